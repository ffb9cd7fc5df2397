package decoding

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/datahelix/datahelix/internal/mp4"
	"github.com/datahelix/datahelix/internal/video/videotest"
)

// sampleOf builds a sample from (ext, data) pairs.
func sampleOf(key string, members ...any) *Sample {
	s := &Sample{Shard: "shard-0.tar", Key: key}
	for i := 0; i < len(members); i += 2 {
		ext := members[i].(string)
		var data []byte
		switch d := members[i+1].(type) {
		case string:
			data = []byte(d)
		case []byte:
			data = d
		}
		s.Members = append(s.Members, Member{Name: key + "." + ext, Ext: ext, Data: data})
	}
	return s
}

func TestParseRecord(t *testing.T) {
	mp4 := videotest.Read(t, "h264_faststart.mp4")
	webm := videotest.Read(t, "vp9.webm")
	jpg := readImage(t, "y420.jpg")
	png := readImage(t, "rgb.png")
	webp := readImage(t, "lossy.webp")
	tests := []struct {
		name     string
		sample   *Sample
		modality Modality
		video    string // codec, "" for none
		images   []int  // Member index of each image, in record order
		tokens   int    // -1 when Text must be nil
	}{
		{"video with caption", sampleOf("v", "json", `{"caption":"a dog"}`, "mp4", mp4, "txt", "a dog runs"), ModalityVideo, "h264", nil, 3}, // the json is metadata
		{"webm by content", sampleOf("w", "mkv", webm), ModalityVideo, "vp9", nil, -1},
		{"video and thumbnail", sampleOf("t", "jpg", jpg, "mp4", mp4), ModalityVideo, "h264", []int{0}, -1},
		{"image", sampleOf("i", "jpg", jpg), ModalityImage, "", []int{0}, -1},
		{"image with caption", sampleOf("c", "webp", webp, "txt", "a cat", "cls", "281"), ModalityImage, "", []int{0}, 2},
		{"images without text", sampleOf("m", "jpg", jpg, "png", png), ModalityImage, "", []int{0, 1}, -1},
		{"document", sampleOf("d", "txt", "intro", "2.png", png, "0.jpg", jpg, "1.webp", webp), ModalityDocument, "", []int{2, 3, 1}, 1},
		{"interleaved one image", sampleOf("e", "0.txt", "first", "1.jpg", jpg, "2.txt", "after"), ModalityDocument, "", []int{1}, 2},
		{"text", sampleOf("x", "txt", "just some words", "json", `{"id": 7}`), ModalityText, "", nil, 3},
		{"json only", sampleOf("j", "json", `{"text": "a long document here"}`), ModalityText, "", nil, 4},
		{"image with metadata", sampleOf("l", "jpg", jpg, "json", `{"url": "x"}`), ModalityImage, "", []int{0}, -1}, // no caption: Decode gives no text
		{"video with metadata", sampleOf("m", "mp4", mp4, "cls", "7", "json", `{"caption": "x"}`), ModalityVideo, "h264", nil, -1},
		{"json document", sampleOf("d", "2.png", png, "json", `{"texts": ["a b", null, null, "c"], "url": "https://x/y"}`, "1.jpg", jpg), ModalityDocument, "", []int{2, 0}, 3},
		{"metadata.txt", sampleOf("t", "0.text.txt", "one two", "metadata.txt", "t.0.text.txt\nt.1.image.jpg", "1.image.jpg", jpg), ModalityDocument, "", []int{2}, 2},
		{"captions of models", sampleOf("b", "jpg", jpg, "blip2.txt", "a cat", "t5.txt", "cat"), ModalityImage, "", []int{0}, 3},
		{"text and other members", sampleOf("o", "txt", "words", "npy", "\x93NUMPY"), ModalityText, "", nil, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ParseRecord(tt.sample, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			var bytes int64
			for _, m := range tt.sample.Members {
				bytes += int64(len(m.Data))
			}
			if r.Modality != tt.modality || r.Bytes != bytes || r.Key != tt.sample.Key || r.Shard != tt.sample.Shard {
				t.Errorf("got %v, %d bytes, key %q; want %v, %d bytes, key %q", r.Modality, r.Bytes, r.Key, tt.modality, bytes, tt.sample.Key)
			}
			switch {
			case tt.video == "" && r.Video != nil:
				t.Errorf("unexpected video %+v", r.Video)
			case tt.video != "" && (r.Video == nil || r.Video.Codec != tt.video):
				t.Errorf("video %+v, want codec %s", r.Video, tt.video)
			case tt.video != "" && tt.sample.Members[r.Video.Member].Ext != "mp4" && tt.sample.Members[r.Video.Member].Ext != "mkv":
				t.Errorf("video Member %d is %q", r.Video.Member, tt.sample.Members[r.Video.Member].Ext)
			}
			var got []int
			for _, im := range r.Images {
				got = append(got, im.Member)
				if im.Bytes != len(tt.sample.Members[im.Member].Data) {
					t.Errorf("image %d: %d bytes, member has %d", im.Member, im.Bytes, len(tt.sample.Members[im.Member].Data))
				}
			}
			if !reflect.DeepEqual(got, tt.images) {
				t.Errorf("image members %v, want %v", got, tt.images)
			}
			switch {
			case tt.tokens < 0 && r.Text != nil:
				t.Errorf("unexpected text %+v", r.Text)
			case tt.tokens >= 0 && (r.Text == nil || r.Text.Tokens != tt.tokens):
				t.Errorf("text %+v, want %d tokens", r.Text, tt.tokens)
			}
		})
	}
}

func TestParseRecordErrors(t *testing.T) {
	_, err := ParseRecord(sampleOf("n", "npy", "x", "wav", "y"), Limits{})
	if !errors.Is(err, ErrNoPayload) || !strings.Contains(err.Error(), `"n"`) || !strings.Contains(err.Error(), "npy wav") {
		t.Errorf("no payload: err %v, want ErrNoPayload naming the sample and its members", err)
	}
	_, err = ParseRecord(sampleOf("b", "mp4", "not a video", "txt", "caption"), Limits{})
	if !errors.Is(err, mp4.ErrFormat) || !strings.Contains(err.Error(), "b.mp4") {
		t.Errorf("bad video: err %v, want mp4.ErrFormat naming the member", err)
	}
	_, err = ParseRecord(sampleOf("j", "jpg", "\xff\xd8\xff\xd9"), Limits{})
	if !errors.Is(err, ErrBadImage) {
		t.Errorf("bad image: err %v, want ErrBadImage", err)
	}

	// Samples that would train without part of what they hold.
	jpg, mp4 := readImage(t, "y420.jpg"), videotest.Read(t, "h264_faststart.mp4")
	for _, tt := range []struct {
		sample       *Sample
		member, want string
	}{
		{sampleOf("a", "txt", "birds", "flac", "fLaC"), "a.flac", ".flac audio with no video or image"},
		{sampleOf("g", "0.txt", "x", "1.tif", "II*\x00", "2.jpg", jpg), "g.1.tif", ".tif image; datahelix reads images jpg"},
		{sampleOf("v", "avi", "RIFF", "txt", "a clip"), "v.avi", ".avi video; datahelix reads"},
		{sampleOf("e", "json", `{"texts": ["x"], "images": ["data:image/png;base64,iVBORw0KGgo="]}`), "e.json", "images embedded in JSON (data:image URIs)"},
		{sampleOf("u", "mp4", mp4, "txt", "\xfe\xff\x00a"), "u.txt", "UTF-16BE text (it starts with that byte order mark)"},
		{sampleOf("w", "json", "\xff\xfe\x00\x00{\x00\x00\x00}\x00\x00\x00"), "w.json", "UTF-32LE text"},
	} {
		_, err := ParseRecord(tt.sample, Limits{})
		var se *SampleError
		if !errors.Is(err, ErrUnsupported) || !errors.As(err, &se) || se.Member != tt.member || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("sample %q: err %v, want ErrUnsupported naming %s and saying %q", tt.sample.Key, err, tt.member, tt.want)
		}
	}
	// Beside a clip, other media are thumbnails and audio tracks; audio
	// beside an image is left out as a clip's audio track is; without any
	// payload, unread media are no payload.
	for _, s := range []*Sample{
		sampleOf("c", "mp4", mp4, "gif", "GIF89a", "m4a", "x", "txt", "a clip"),
		sampleOf("i", "jpg", jpg, "wav", "RIFF", "txt", "spoken caption"),
	} {
		if _, err := ParseRecord(s, Limits{}); err != nil {
			t.Errorf("sample %q: %v", s.Key, err)
		}
	}
	if _, err := ParseRecord(sampleOf("o", "gif", "GIF89a", "mp3", "ID3"), Limits{}); !errors.Is(err, ErrNoPayload) {
		t.Errorf("gif and mp3 alone: err %v, want ErrNoPayload", err)
	}
}

func TestDocPosition(t *testing.T) {
	tests := []struct {
		ext string
		pos int
		ok  bool
	}{
		{"jpg", 0, false}, {"0.jpg", 0, true}, {"12.txt", 12, true}, {"img_3.jpg", 3, true},
		{"seg.txt", 0, false}, {"-1.jpg", 0, false}, {"x.y.jpg", 0, false},
		{"0.text.txt", 0, true}, {"text_12.txt", 12, true}, {"+1.jpg", 0, false}, {"blip2.txt", 0, false},
		{"qwen2.txt", 0, false}, {"3x.jpg", 0, false}, {"img_.jpg", 0, false}, {"99999999999999999999.jpg", 0, false},
		{"image10.png", 10, true}, {"page2.txt", 2, true}, {"a_b_7.txt", 7, true}, {"gpt4.txt", 0, false}, {"img-3.jpg", 0, false},
	}
	for _, tt := range tests {
		pos, ok := docPosition(tt.ext)
		if pos != tt.pos || ok != tt.ok {
			t.Errorf("docPosition(%q) = %d, %v; want %d, %v", tt.ext, pos, ok, tt.pos, tt.ok)
		}
	}
}

// FuzzParseRecord builds records of samples whose member bytes are
// mutated real media and text, under the extensions of each kind, beside
// a second image when doc is set (a document, or a clip with a
// thumbnail): it must return a record or an error, never panic, and a
// record's modality must follow from its parts.
func FuzzParseRecord(f *testing.F) {
	f.Add(videotest.Read(f, "h264_frag.mp4"), "mp4", false)
	f.Add(videotest.Read(f, "vp8.webm"), "webm", true)
	f.Add(readImage(f, "prog420.jpg"), "0.jpg", true)
	f.Add(readImage(f, "alpha.webp"), "webp", false)
	f.Add([]byte(`{"caption": "a cat", "tags": ["x", {"k": "v"}]}`), "json", false)
	f.Add([]byte(`{"texts": ["a", null, "b"], "images": [null, "x", null]}`), "json", true)
	f.Add([]byte(`{"text_list": ["a"], "image_info": [{"image_base64": "/9j/4AAQ"}]}`), "json", false)
	f.Add([]byte("\xff\xfea\x00"), "txt", false)
	f.Add([]byte("GIF89a"), "2.gif", true)
	f.Add([]byte("x"), "metadata.txt", false)
	png := readImage(f, "rgb.png")
	f.Fuzz(func(t *testing.T, data []byte, ext string, doc bool) {
		s := sampleOf("k", ext, data, "txt", "caption")
		if doc {
			s.Members = append(s.Members, Member{Name: "k.1.png", Ext: "1.png", Data: png})
		}
		r, err := ParseRecord(s, Limits{})
		if err != nil {
			return
		}
		switch {
		case r.Modality == ModalityVideo && r.Video == nil,
			r.Modality == ModalityImage && len(r.Images) == 0,
			r.Modality == ModalityDocument && (len(r.Images) == 0 || r.Text == nil),
			r.Text == nil:
			t.Fatalf("inconsistent record %+v", r)
		}
		if r.Video != nil {
			if err := r.Video.Check(); err != nil {
				t.Fatal(err)
			}
		}
		// Training gets the text the record counts.
		if _, n, err := SampleText(s, Limits{}); err != nil || n != r.Text.Tokens {
			t.Fatalf("SampleText gives %d tokens (%v); the record counts %d", n, err, r.Text.Tokens)
		}
	})
}

// TestParseRecordGeneratorShard reads a shard written by `datahelix gen
// --preset text` (committed): every sample is text, counted from its txt
// member, its json metadata aside.
func TestParseRecordGeneratorShard(t *testing.T) {
	samples, warnings := shardSamples(t, "gen-text.tar", readTestdata(t, "shards", "gen-text.tar"))
	if len(samples) != 4 || len(warnings) != 0 {
		t.Fatalf("%d samples, warnings %q; want 4 samples, no warnings", len(samples), warnings)
	}
	for _, smp := range samples {
		r, err := ParseRecord(smp, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		var txt []byte
		for _, m := range smp.Members {
			if m.Ext == "txt" {
				txt = m.Data
			}
		}
		if r.Modality != ModalityText || r.Text == nil || r.Text.Tokens != estimateTokens(txt) || r.Text.Tokens == 0 {
			t.Errorf("sample %q: %v, text %+v; want text with %d tokens", smp.Key, r.Modality, r.Text, estimateTokens(txt))
		}
	}
}

// TestSampleTextDocumentWithoutStrings checks that a JSON document whose
// texts are all null (or none) is the sample's text, of no tokens, for
// the record and for the text training gets alike: the sample's other
// json and cls members stay metadata in both.
func TestSampleTextDocumentWithoutStrings(t *testing.T) {
	for _, s := range []*Sample{
		sampleOf("k", "json", `{"texts": [null], "url": "https://example.com/a"}`, "cls", "281"),
		sampleOf("k", "json", `{"text_list": []}`, "meta.json", `{"title": "hello world"}`),
	} {
		r, err := ParseRecord(s, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		text, n, err := SampleText(s, Limits{})
		if err != nil || r.Text == nil || n != r.Text.Tokens || text != "" {
			t.Errorf("%s: record text %+v; SampleText %q, %d tokens, %v: want the record's tokens and no text", s.Members[1].Name, r.Text, text, n, err)
		}
	}
}
