package decoding

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/datahelix/datahelix/internal/mp4"
)

// TestTextLimit checks that text members beyond MaxTextBytes fail the
// sample with ErrLimit, naming the shard, sample, member and size, in
// ParseRecord, Decode (also with a record parsed under other limits) and
// SampleText, and that the default limit takes a real document.
func TestTextLimit(t *testing.T) {
	small := Limits{MaxTextBytes: 100}
	big := decSample("k", map[string][]byte{"txt": []byte(strings.Repeat("word ", 30))}) // 150 bytes
	split := decSample("k", map[string][]byte{"0.txt": []byte(strings.Repeat("a", 60)), "1.txt": []byte(strings.Repeat("b", 60))})
	check := func(what string, err error, member, size string) {
		t.Helper()
		var se *SampleError
		if !errors.Is(err, ErrLimit) || !errors.As(err, &se) || se.Member != member {
			t.Errorf("%s: got %v, want a *SampleError of member %s wrapping ErrLimit", what, err, member)
			return
		}
		for _, want := range []string{"test.tar", `"k"`, member, size, "limit 100"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %q does not name %q", what, err, want)
			}
		}
	}
	_, err := ParseRecord(big, small)
	check("ParseRecordLimits", err, "k.txt", "150 bytes")
	_, err = ParseRecord(split, small)
	check("two members", err, "k.1.txt", "120 bytes")
	_, err = NewDecoder(Options{Limits: small}).Decode(context.Background(), big, nil)
	check("Decode", err, "k.txt", "150 bytes")
	rec, err := ParseRecord(big, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewDecoder(Options{Limits: small}).Decode(context.Background(), big, rec)
	check("Decode of a given record", err, "k.txt", "150 bytes")
	_, _, err = SampleText(big, small)
	check("SampleText", err, "k.txt", "150 bytes")

	huge := decSample("k", map[string][]byte{"txt": make([]byte, defaultMaxTextBytes+1)})
	if _, err := ParseRecord(huge, Limits{}); !errors.Is(err, ErrLimit) {
		t.Errorf("ParseRecord of %d bytes of text: got %v, want ErrLimit", defaultMaxTextBytes+1, err)
	}
	doc := decSample("k", map[string][]byte{"txt": []byte(strings.Repeat("a long document ", 1<<16))}) // 1 MiB
	if _, err := NewDecoder(Options{}).Decode(context.Background(), doc, nil); err != nil {
		t.Errorf("1 MiB document under the default limits: %v", err)
	}
}

// TestSampleTextTokens checks that the text and tokens Decode and
// SampleText give are the joined captions in document order and the
// tokens of that text.
func TestSampleTextTokens(t *testing.T) {
	s := decSample("k", map[string][]byte{"2.txt": []byte("world 123"), "0.txt": []byte("héllo, 45"), "json": []byte(`{"a":"b"}`), "1.caption": {0xe2, 0x82}})
	text, tokens, err := SampleText(s, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if want := "héllo, 45\n\xe2\x82\nworld 123"; text != want {
		t.Errorf("text %q, want %q", text, want)
	}
	if want := estimateTokens([]byte(text)); tokens != want {
		t.Errorf("tokens %d, want %d (the joined text's)", tokens, want)
	}
	out, err := NewDecoder(Options{}).Decode(context.Background(), s, nil)
	if err != nil || out.Text != text || out.Tokens != tokens {
		t.Errorf("Decode: got %v, %+v; want text %q, %d tokens", err, out, text, tokens)
	}
}

// TestSampleErrorNamesOnce checks the one format of sample errors: the
// shard, sample and member once each, "file" for a plain file, "empty"
// for a 0-byte member, with errors.Is still matching the format's error.
func TestSampleErrorNamesOnce(t *testing.T) {
	tests := []struct {
		name   string
		sample *Sample
		is     error
		want   string
	}{
		{"bad video", decSample("k", map[string][]byte{"mp4": []byte("not a video")}), mp4.ErrFormat,
			`decode: shard test.tar: sample "k": member k.mp4: invalid MP4/MOV: `},
		{"no payload", decSample("k", map[string][]byte{"npy": {1}}), ErrNoPayload,
			`decode: shard test.tar: sample "k": no recognised payload: members [npy]; recognised: video mp4 `},
		{"file of unknown type", FileSample("data/x.npy", []byte{1}), ErrNoPayload,
			`decode: file data/x.npy: no recognised payload: extension .npy; recognised: video mp4 `},
		{"file without extension", FileSample("data/clip", []byte{1}), ErrNoPayload,
			`decode: file data/clip: no recognised payload: the file name has no extension; recognised: `},
		{"empty image", decSample("k", map[string][]byte{"jpg": {}}), ErrBadImage,
			`decode: shard test.tar: sample "k": member k.jpg: empty (0 bytes)`},
		{"empty video", decSample("k", map[string][]byte{"webm": {}}), mp4.ErrFormat,
			`decode: shard test.tar: sample "k": member k.webm: empty (0 bytes)`},
		{"file", FileSample("img/cmyk.jpg", []byte("\xff\xd8\xff\xd9")), ErrBadImage,
			`decode: file img/cmyk.jpg: invalid image header: `},
		{"empty file", FileSample("img/empty.jpg", nil), ErrBadImage,
			`decode: file img/empty.jpg: empty (0 bytes)`},
	}
	for _, tc := range tests {
		_, perr := ParseRecord(tc.sample, Limits{})
		_, derr := NewDecoder(Options{Size: 32}).Decode(context.Background(), tc.sample, nil)
		for _, err := range []error{perr, derr} {
			var se *SampleError
			if !errors.As(err, &se) || !errors.Is(err, tc.is) || !errors.Is(err, classify(tc.is)) {
				t.Errorf("%s: got %T %v, want a *SampleError matching %v", tc.name, err, err, tc.is)
				continue
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, tc.want) || strings.Count(msg, "decode:") != 1 || strings.Count(msg, tc.sample.Shard) != 1 {
				t.Errorf("%s: got %q, want it to start %q and name the shard once", tc.name, msg, tc.want)
			}
		}
	}
	if _, err := ParseRecord(decSample("k", map[string][]byte{"txt": {}}), Limits{}); err != nil {
		t.Errorf("an empty caption is text: %v", err)
	}
}

// TestRecognisedExtsListsKnownKinds keeps the list errors print in step
// with memberKind: every extension it names is recognised.
func TestRecognisedExtsListsKnownKinds(t *testing.T) {
	n := 0
	for _, group := range strings.Split(recognisedExts, ", ") {
		fields := strings.Fields(group)
		want := map[string]int{"video": kindVideo, "image": kindImage, "text": kindText}[fields[0]]
		if want == 0 {
			t.Fatalf("group %q: unknown kind", group)
		}
		for _, ext := range fields[1:] {
			n++
			if got := memberKind(ext); got != want {
				t.Errorf("%s is listed as %s, memberKind says %d", ext, fields[0], got)
			}
		}
	}
	if n < 10 {
		t.Errorf("only %d extensions listed", n)
	}
}
