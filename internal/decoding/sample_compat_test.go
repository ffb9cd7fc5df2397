package decoding

import (
	"archive/tar"
	"encoding/base64"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/datahelix/datahelix/internal/tartest"

	"github.com/datahelix/datahelix/internal/video/videotest"
)

// TestWriterLayouts reads a shard holding samples laid out as the tools
// that write multimodal WebDataset shards lay them out, and checks what
// each record says against what the writer means: its modality, its
// images in document order (by member extension) and the tokens of the
// text training sees, or, for samples datahelix cannot give whole, an
// ErrUnsupported naming the member it cannot read.
func TestWriterLayouts(t *testing.T) {
	jpg, png := string(readImage(t, "y420.jpg")), string(readImage(t, "rgb.png"))
	mp4 := string(videotest.Read(t, "h264_faststart.mp4"))
	// img2dataset's and video2dataset's json metadata (json.dumps(meta,
	// indent=4)): its URL, key, status and hash are not a caption.
	i2dMeta := `{
    "url": "https://example.com/fox.jpg",
    "caption": null,
    "key": "000000001",
    "status": "success",
    "error_message": null,
    "width": 96,
    "height": 64,
    "sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
}`
	m4a := "\x00\x00\x00\x18ftypM4A \x00\x00\x02\x00M4A mp42isom"
	tests := []struct {
		name     string
		members  []string // ext, data pairs
		modality Modality
		images   []string // the image members' extensions, in record order
		tokens   int      // -1: no Text
		bad      string   // the member an ErrUnsupported names; "" for none
	}{
		// img2dataset: KEY.jpg, KEY.txt (caption, "" when missing), KEY.json.
		{"img2dataset", []string{"jpg", jpg, "txt", "a red fox in the snow", "json", i2dMeta}, ModalityImage, []string{"jpg"}, 6, ""},
		{"img2dataset without caption_col", []string{"jpg", jpg, "json", i2dMeta}, ModalityImage, []string{"jpg"}, -1, ""},
		{"img2dataset empty caption", []string{"jpg", jpg, "txt", "", "json", i2dMeta}, ModalityImage, []string{"jpg"}, 0, ""},
		// ImageNet-style class label beside the image.
		{"cls label", []string{"jpeg", jpg, "cls", "281"}, ModalityImage, []string{"jpeg"}, -1, ""},
		// video2dataset: KEY.mp4, KEY.txt, KEY.json, and its audio
		// encode format beside the clip (KEY.m4a).
		{"video2dataset", []string{"mp4", mp4, "txt", "a dog runs", "json", i2dMeta}, ModalityVideo, nil, 3, ""},
		{"video2dataset no caption", []string{"mp4", mp4, "json", i2dMeta}, ModalityVideo, nil, -1, ""},
		{"video2dataset with audio", []string{"m4a", m4a, "mp4", mp4, "txt", "a dog runs", "json", i2dMeta}, ModalityVideo, nil, 3, ""},
		{"video2dataset audio only", []string{"m4a", m4a, "txt", "birdsong at dawn", "json", i2dMeta}, 0, nil, 0, "k.m4a"},
		{"wav with transcript", []string{"txt", "hello there", "wav", "RIFF\x24\x00\x00\x00WAVEfmt "}, 0, nil, 0, "k.wav"},
		// Hugging Face M4 web documents (OBELICS): KEY.N.text.txt and
		// KEY.N.image.EXT per position, KEY.metadata.txt listing them.
		{"M4 web document", []string{"0.text.txt", "Foxes live in dens.", "1.image.jpg", jpg, "2.text.txt", "They hunt at night.",
			"metadata.txt", "k.0.text.txt\nk.1.image.jpg\nk.2.text.txt"}, ModalityDocument, []string{"1.image.jpg"}, 10, ""},
		{"M4 image-text pair", []string{"image.jpg", jpg, "text.txt", "a fox"}, ModalityImage, []string{"image.jpg"}, 2, ""},
		// A JSON document (texts with null at image positions) and its
		// images as KEY.N.EXT.
		{"JSON document", []string{"json", `{"texts": ["Foxes live in dens.", null, null, "They hunt."], "images": [null, "a.png", "b.jpg", null], "url": "https://example.com/foxes"}`,
			"2.jpg", jpg, "1.png", png}, ModalityDocument, []string{"1.png", "2.jpg"}, 8, ""},
		{"JSON document one image", []string{"json", `{"texts": ["Foxes live in dens.", null], "images": [null, "https://example.com/a.jpg"]}`, "1.jpg", jpg},
			ModalityDocument, []string{"1.jpg"}, 5, ""},
		{"MMC4 text_list", []string{"json", `{"text_list": ["Foxes live in dens.", "They hunt."], "image_info": [{"image_name": "a.jpg", "matched_text_index": 1}]}`, "1.jpg", jpg},
			ModalityDocument, []string{"1.jpg"}, 8, ""},
		// MINT-1T PDF and ArXiv: KEY.json and the document's images in a
		// TIFF; MMC4 as OpenFlamingo shards it: images in base64 inside
		// the JSON.
		{"MINT-1T PDF", []string{"json", `{"texts": ["Intro.", null], "images": [null, "page_0_image_85"]}`, "tiff", "II*\x00\x08\x00\x00\x00"}, 0, nil, 0, "k.tiff"},
		{"MMC4 base64", []string{"json", `{"text_list": ["Foxes."], "image_info": [{"image_base64": "` + base64.StdEncoding.EncodeToString([]byte(jpg)) + `", "matched_text_index": 0}]}`},
			0, nil, 0, "k.json"},
		// Captions by several models beside one image: not positions.
		{"model-named captions", []string{"jpg", jpg, "txt", "a fox", "blip2.txt", "a red fox", "qwen2.txt", "fox"}, ModalityImage, []string{"jpg"}, 2 + 3 + 1, ""},
		{"caption.txt", []string{"jpg", jpg, "caption.txt", "a fox in snow"}, ModalityImage, []string{"jpg"}, 4, ""},
		// Pictures datahelix does not read, where dropping them changes
		// the sample.
		{"gif with caption", []string{"gif", "GIF89a\x01\x00\x01\x00", "txt", "a dancing cat"}, 0, nil, 0, "k.gif"},
		{"document with a gif", []string{"0.txt", "intro", "1.jpg", jpg, "2.gif", "GIF89a\x01\x00\x01\x00", "3.txt", "end"}, 0, nil, 0, "k.2.gif"},
		{"gif thumbnail of a clip", []string{"gif", "GIF89a", "mp4", mp4, "txt", "a clip"}, ModalityVideo, nil, 2, ""},
		// Captions in other encodings.
		{"UTF-16 caption", []string{"jpg", jpg, "txt", "\xff\xfea\x00 \x00c\x00a\x00t\x00"}, 0, nil, 0, "k.txt"},
		{"UTF-8 BOM and CRLF", []string{"jpg", jpg, "txt", "\ufeffa cat\r\n"}, ModalityImage, []string{"jpg"}, 3, ""}, // the BOM counts as a token, as a BPE vocabulary's bytes do
		// Text only.
		{"json only", []string{"json", `{"text": "a long document here"}`}, ModalityText, nil, 4, ""},
		{"json document without images", []string{"json", `{"texts": ["Foxes.", null], "images": [null, "x"], "url": "https://example.com/a/b/c"}`}, ModalityText, nil, 2, ""},
	}
	// The text Decode gives, where it is more than one member's.
	texts := map[string]string{
		"M4 web document":                 "Foxes live in dens.\nThey hunt at night.",
		"JSON document":                   "Foxes live in dens.\nThey hunt.",
		"MMC4 text_list":                  "Foxes live in dens.\nThey hunt.",
		"json only":                       "a long document here",
		"json document without images":    "Foxes.",
		"img2dataset without caption_col": "",
		"cls label":                       "",
	}
	var files []tartest.File
	for i, tt := range tests {
		key := "s" + string(rune('a'+i/26)) + string(rune('a'+i%26))
		for j := 0; j < len(tt.members); j += 2 {
			files = append(files, tartest.File{Name: key + "." + tt.members[j], Data: tt.members[j+1]})
		}
	}
	samples, warnings := shardSamples(t, "layouts.tar", tartest.Write(t, tar.FormatPAX, files))
	if len(samples) != len(tests) || len(warnings) != 0 {
		t.Fatalf("%d samples, warnings %q; want %d samples", len(samples), warnings, len(tests))
	}
	for i, tt := range tests {
		smp := samples[i]
		r, err := ParseRecord(smp, Limits{})
		if tt.bad != "" {
			var se *SampleError
			bad := strings.Replace(tt.bad, "k.", smp.Key+".", 1)
			if !errors.Is(err, ErrUnsupported) || !errors.As(err, &se) || se.Member != bad {
				got := "error " + fmt.Sprint(err)
				if r != nil {
					got = "a " + r.Modality.String() + " record"
				}
				t.Errorf("%s: got %s; want ErrUnsupported naming %s", tt.name, got, bad)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		var images []string
		for _, im := range r.Images {
			images = append(images, smp.Members[im.Member].Ext)
		}
		tokens := -1
		if r.Text != nil {
			tokens = r.Text.Tokens
		}
		if r.Modality != tt.modality || !reflect.DeepEqual(images, tt.images) || tokens != tt.tokens {
			t.Errorf("%s: %v, images %v, %d tokens; want %v, images %v, %d tokens", tt.name, r.Modality, images, tokens, tt.modality, tt.images, tt.tokens)
		}
		// What training gets is the text the record counts.
		text, n, err := SampleText(smp, Limits{})
		if want, ok := texts[tt.name]; err != nil || n != max(tokens, 0) || tokens < 0 && text != "" || ok && text != want {
			t.Errorf("%s: decoded text %q, %d tokens, %v; want the record's %d tokens (text %q)", tt.name, text, n, err, tokens, want)
		}
	}
}
