package decoding

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestSampleMD5sRefusesLikeDecode checks that SampleMD5s refuses what
// Decode refuses before decoding, with the same kind and the same member:
// both resolve a sample's payload the same way.
func TestSampleMD5sRefusesLikeDecode(t *testing.T) {
	jpg := media(t, "image420.jpg")
	tests := []struct {
		name   string
		lim    Limits
		sample *Sample
		want   error
	}{
		{"images per doc", Limits{MaxImages: 1}, decSample("k", map[string][]byte{"0.jpg": jpg, "1.jpg": jpg, "txt": []byte("x")}), ErrLimit},
		{"images per image sample", Limits{MaxImages: 1}, decSample("k", map[string][]byte{"jpg": jpg, "png": media(t, "image.png")}), ErrLimit},
		{"unknown members", Limits{}, decSample("k", map[string][]byte{"bin": {1, 2}}), ErrNoPayload},
		{"no members", Limits{}, &Sample{Shard: "test.tar", Key: "k"}, ErrNoPayload},
		{"truncated jpeg", Limits{}, decSample("k", map[string][]byte{"jpg": jpg[:len(jpg)/3]}), ErrCorrupt},
	}
	for _, tc := range tests {
		_, derr := NewDecoder(Options{Size: 32, Limits: tc.lim}).Decode(context.Background(), tc.sample, nil)
		_, merr := SampleMD5s(context.Background(), tc.sample, tc.lim)
		for _, c := range []struct {
			fn  string
			err error
		}{{"Decode", derr}, {"SampleMD5s", merr}} {
			var se *SampleError
			if !errors.Is(c.err, tc.want) || !errors.As(c.err, &se) {
				t.Errorf("%s: %s: got %v, want a *SampleError wrapping %v", tc.name, c.fn, c.err, tc.want)
				continue
			}
			if se.Shard != "test.tar" || se.Key != "k" {
				t.Errorf("%s: %s: got shard %q key %q, want test.tar k", tc.name, c.fn, se.Shard, se.Key)
			}
		}
		var dse, mse *SampleError
		if errors.As(derr, &dse) && errors.As(merr, &mse) && dse.Member != mse.Member {
			t.Errorf("%s: SampleMD5s names member %q, Decode %q", tc.name, mse.Member, dse.Member)
		}
	}
}

// TestDecodeRecordWithoutPayload checks a record that names no decodable
// member of its sample (a record built for other bytes): ErrNoPayload for
// a clip, ErrCorrupt for an image index outside the sample.
func TestDecodeRecordWithoutPayload(t *testing.T) {
	s := decSample("k", map[string][]byte{"txt": []byte("caption")})
	tests := []struct {
		name string
		rec  *Record
		want error
	}{
		{"video without clip", &Record{Modality: ModalityVideo}, ErrNoPayload},
		{"video member outside", &Record{Modality: ModalityVideo, Video: &VideoInfo{Member: 3}}, ErrNoPayload},
		{"unknown modality", &Record{}, ErrNoPayload},
		{"image member outside", &Record{Modality: ModalityImage, Images: []ImageInfo{{Member: 5}}}, ErrCorrupt},
	}
	for _, tc := range tests {
		_, err := NewDecoder(Options{Size: 32}).Decode(context.Background(), s, tc.rec)
		var se *SampleError
		if !errors.Is(err, tc.want) || !errors.As(err, &se) || se.Member != "" {
			t.Errorf("%s: got %v, want a *SampleError of the whole sample wrapping %v", tc.name, err, tc.want)
		}
	}
}

// TestSampleMD5sHashesWhatDecodeDecodes checks that SampleMD5s lists, for
// each modality, exactly the members Decode turns into tensors, in the
// same order, each image with its imageMD5.
func TestSampleMD5sHashesWhatDecodeDecodes(t *testing.T) {
	clip, jpg, png := media(t, "h264_bframes.mp4"), media(t, "image420.jpg"), media(t, "image.png")
	tests := []struct {
		name    string
		sample  *Sample
		members []string
		video   bool
	}{
		{"clip", decSample("k", map[string][]byte{"mp4": clip, "txt": []byte("a caption")}), []string{"k.mp4"}, true},
		// A video sample's thumbnail is not decoded, so it is not hashed.
		{"clip with thumbnail", decSample("k", map[string][]byte{"mp4": clip, "jpg": jpg}), []string{"k.mp4"}, true},
		{"image", decSample("k", map[string][]byte{"jpg": jpg, "json": []byte(`{}`)}), []string{"k.jpg"}, false},
		{"document", decSample("k", map[string][]byte{"0.txt": []byte("a"), "1.png": png, "2.jpg": jpg}), []string{"k.1.png", "k.2.jpg"}, false},
		{"text", decSample("k", map[string][]byte{"txt": []byte("only words")}), nil, false},
	}
	d := NewDecoder(Options{Frames: 2, Size: 16})
	for _, tc := range tests {
		out, err := d.Decode(context.Background(), tc.sample, nil)
		if err != nil {
			t.Fatalf("%s: Decode: %v", tc.name, err)
		}
		ms, err := SampleMD5s(context.Background(), tc.sample, Limits{})
		if err != nil {
			t.Fatalf("%s: SampleMD5s: %v", tc.name, err)
		}
		var got []string
		for _, m := range ms {
			got = append(got, m.Member)
			if m.Video != tc.video {
				t.Errorf("%s: %s: got Video %v, want %v", tc.name, m.Member, m.Video, tc.video)
			}
		}
		if !slices.Equal(got, tc.members) {
			t.Errorf("%s: got members %v, want %v", tc.name, got, tc.members)
		}
		if !tc.video && len(ms) != len(out.Tensors) {
			t.Errorf("%s: got %d hashed members, Decode made %d tensors", tc.name, len(ms), len(out.Tensors))
		}
		for _, m := range ms {
			if m.Video {
				want, err := frameMD5s(context.Background(), clip, Limits{})
				if err != nil || !slices.Equal(m.MD5s, want) {
					t.Errorf("%s: clip: got %d MD5s, want FrameMD5s' %d (err %v)", tc.name, len(m.MD5s), len(want), err)
				}
				continue
			}
			for _, mem := range tc.sample.Members {
				if mem.Name != m.Member {
					continue
				}
				want, _, _, err := imageMD5(mem.Data, Limits{})
				if err != nil || len(m.MD5s) != 1 || m.MD5s[0] != want {
					t.Errorf("%s: %s: got %v, want [%s] (err %v)", tc.name, m.Member, m.MD5s, want, err)
				}
			}
		}
	}
}

// TestSampleMD5sOfFile checks SampleMD5s on plain files (FileSample), as
// datahelix decode --md5 hashes them: a good image gives its imageMD5,
// and a failing one an error naming the file once with the cause of the
// stage that failed, not "decode:" twice or a shard, sample and member.
func TestSampleMD5sOfFile(t *testing.T) {
	jpg, png := media(t, "image420.jpg"), media(t, "image.png")
	ms, err := SampleMD5s(context.Background(), FileSample("img/a.jpg", jpg), Limits{})
	want, _, _, _ := imageMD5(jpg, Limits{})
	if err != nil || len(ms) != 1 || !slices.Equal(ms[0].MD5s, []string{want}) {
		t.Errorf("good JPEG: got %v, %v; want [%s]", ms, err, want)
	}
	tests := []struct {
		name, path string
		data       []byte
		is         error
		want       string
	}{
		{"garbage JPEG", "img/bad.jpg", []byte("\xff\xd8\xff\xe0garbage"), ErrBadImage, "decode: file img/bad.jpg: invalid image header: "},
		{"truncated PNG", "img/half.png", png[:300], ErrCorrupt, "decode: file img/half.png: png: "},
		{"truncated JPEG", "img/half.jpg", jpg[:3000], ErrCorrupt, "decode: file img/half.jpg: tjpeg: "},
	}
	for _, tc := range tests {
		_, err := SampleMD5s(context.Background(), FileSample(tc.path, tc.data), Limits{})
		if !errors.Is(err, tc.is) || err == nil || !strings.HasPrefix(err.Error(), tc.want) ||
			strings.Count(err.Error(), tc.path) != 1 || strings.Contains(err.Error(), "sample") {
			t.Errorf("%s: got %v, want %q... (%v) naming the file once", tc.name, err, tc.want, tc.is)
		}
	}
}

// FuzzSampleMD5s hashes arbitrary bytes as a video or image member, beside
// an image when second is set (a document or a clip with a thumbnail),
// with small limits: only success or a typed *SampleError may come back,
// within the deadline; a sample Decode refuses as a whole SampleMD5s
// refuses the same way, and when both succeed they cover the same members
// (one hashed member per tensor).
func FuzzSampleMD5s(f *testing.F) {
	exts := []string{"mp4", "webm", "0.jpg", "png", "webp"}
	for i, name := range []string{"h264_bframes.mp4", "vp9.webm", "image420.jpg", "image.png", "image.webp"} {
		f.Add(media(f, name), uint8(i), i%2 == 0)
	}
	lim := Limits{MaxPixels: 1 << 20, MaxImagePixels: 1 << 22, MaxFramesDecoded: 300, SampleDeadline: time.Second, MaxImages: 1}
	d := NewDecoder(Options{Frames: 3, Size: 16, Limits: lim})
	png := media(f, "image.png")
	f.Fuzz(func(t *testing.T, data []byte, kind uint8, second bool) {
		members := map[string][]byte{exts[int(kind)%len(exts)]: data, "txt": []byte("caption")}
		if second {
			members["1.png"] = png
		}
		s := decSample("k", members)
		start := time.Now()
		ms, err := SampleMD5s(context.Background(), s, lim)
		if time.Since(start) > 3*time.Second {
			t.Fatalf("took %v", time.Since(start))
		}
		checkSampleErr(t, "SampleMD5s", err)
		out, derr := d.Decode(context.Background(), s, nil)
		checkSampleErr(t, "Decode", derr)
		if err == nil && derr == nil && len(ms) != len(out.Tensors) {
			t.Fatalf("got %d hashed members, Decode made %d tensors", len(ms), len(out.Tensors))
		}
		// A refusal of the whole sample (no member named) comes before any
		// decoding, so SampleMD5s must refuse it the same way.
		var dse, mse *SampleError
		if errors.As(derr, &dse) && dse.Member == "" && (!errors.As(err, &mse) || mse.Member != "" || mse.Kind != dse.Kind) {
			t.Fatalf("Decode refused the sample: %v; SampleMD5s: %v", derr, err)
		}
	})
}

// FuzzFileMD5s hashes arbitrary bytes with the whole-file hashers:
// FFmpeg alone (FrameMD5s), no record parser in front, and as an image
// (imageMD5). An error must be one of the decode kinds, within the
// deadline, and no more frames than the limit may be hashed.
func FuzzFileMD5s(f *testing.F) {
	for _, name := range []string{"h264_bframes.mp4", "vp9.webm", "h264_audio.mkv", "image420.jpg", "image.png", "image.webp"} {
		f.Add(media(f, name))
	}
	lim := Limits{MaxPixels: 1 << 20, MaxImagePixels: 1 << 22, MaxFramesDecoded: 300, SampleDeadline: time.Second}
	kinds := []error{ErrCorrupt, ErrLimit, ErrUnsupported, ErrTimeout}
	typed := func(err error) bool {
		return err == nil || slices.ContainsFunc(kinds, func(k error) bool { return errors.Is(err, k) })
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		start := time.Now()
		hs, err := frameMD5s(context.Background(), data, lim)
		if took := time.Since(start); took > 3*time.Second {
			t.Fatalf("FrameMD5s took %v", took)
		}
		if !typed(err) {
			t.Fatalf("FrameMD5s: untyped error %v", err)
		}
		if len(hs) > lim.MaxFramesDecoded {
			t.Fatalf("FrameMD5s hashed %d frames, past the limit of %d", len(hs), lim.MaxFramesDecoded)
		}
		sum, w, h, err := imageMD5(data, lim)
		if !typed(err) {
			t.Fatalf("imageMD5: untyped error %v", err)
		}
		if err == nil && (len(sum) != 32 || w < 1 || h < 1 || int64(w)*int64(h) > lim.MaxImagePixels) {
			t.Fatalf("imageMD5: %q of a %dx%d image", sum, w, h)
		}
	})
}

// imageMD5 is imagePixelsMD5 under lim (zero fields: DefaultLimits) with
// its error classified, as decode --md5 reports it.
func imageMD5(data []byte, lim Limits) (sum string, width, height int, err error) {
	sum, width, height, err = imagePixelsMD5(data, lim.withDefaults().MaxImagePixels)
	if err != nil {
		return "", 0, 0, fmt.Errorf("%w: %w", classify(err), err)
	}
	return sum, width, height, nil
}
