package decoding

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestEstimateTokens(t *testing.T) {
	tests := []struct {
		text string
		want int
	}{
		{"", 0},
		{"   \n\t", 0},
		{"hello", 1},
		{"The quick brown fox jumps over the lazy dog.", 10},
		{"internationalization", 3}, // 20 letters: 1 + 19/8
		{"1234567", 3},              // digits in threes
		{"année", 1},                // weight 4 + 2
		{"résumé-ready", 3},         // "résumé" (weight 8), "-", "ready"
		{"Привет", 2},               // 6 Cyrillic letters: 1 + 5/3
		{"日本語のテキスト", 8},             // one per CJK/kana character
		{"a, b; c!", 6},
		{"\xff\xfe", 2}, // invalid bytes count one each
	}
	for _, tt := range tests {
		if got := estimateTokens([]byte(tt.text)); got != tt.want {
			t.Errorf("estimateTokens(%q) = %d, want %d", tt.text, got, tt.want)
		}
	}
}

// TestEstimateTokensBounds checks the estimate on random text against
// bounds that hold for BPE tokenizers: at most one token per byte and four
// per character, at least one per word.
func TestEstimateTokensBounds(t *testing.T) {
	words := []string{"a", "the", "data", "helix", "réseau", "東京", "42", "1999", "!", "—", "internationalization"}
	seed := uint32(1)
	for i := 0; i < 500; i++ {
		var b strings.Builder
		n := int(seed % 40)
		for j := 0; j < n; j++ {
			seed = seed*1664525 + 1013904223
			b.WriteString(words[seed>>16%uint32(len(words))])
			b.WriteByte(' ')
		}
		s := b.String()
		got := estimateTokens([]byte(s))
		if got > len(s) || got < n || (n > 0 && got > 4*utf8.RuneCountInString(s)) {
			t.Fatalf("estimateTokens(%q) = %d for %d words, %d bytes", s, got, n, len(s))
		}
	}
}

func TestParseText(t *testing.T) {
	tests := []struct {
		data, ext string
		want      TextInfo
	}{
		{"a cat on a mat", "txt", TextInfo{Bytes: 14, Tokens: 5}},
		{`{"caption": "a cat on a mat", "width": 640, "tags": ["cute cat", {"k": "v"}]}`, "json", TextInfo{Bytes: 77, Tokens: 5 + 2 + 1}},
		{`{"caption": broken`, "json", TextInfo{Bytes: 18, Tokens: 6}}, // counted as text: { " caption " : broken
		{`["one", "two"]`, "0.json", TextInfo{Bytes: 14, Tokens: 2}},
	}
	for _, tt := range tests {
		if got := parseText([]byte(tt.data), tt.ext); got != tt.want {
			t.Errorf("parseText(%q, %q) = %+v, want %+v", tt.data, tt.ext, got, tt.want)
		}
	}
}

// TestScanJSON checks what scanJSON finds in the JSON of real layouts:
// the tokens of every string value, a document's text parts apart
// ("texts" or "text_list" at the top level only) and images embedded as
// base64.
func TestScanJSON(t *testing.T) {
	tests := []struct {
		data      string
		ok, doc   bool
		tokens    int
		docBytes  int
		docTokens int
		embedded  bool
	}{
		{`{"url": "https://x.org/a.jpg", "caption": "a cat"}`, true, false, 13, 0, 0, false}, // https : / / x . org / a . jpg, a cat
		{`{"texts": ["a cat.", null, "dogs"], "images": [null, "u", null]}`, true, true, 5, 10, 4, false},
		{`{"text_list": ["one", "two"], "image_info": [{"image_base64": "QUJD", "matched_text_index": 0}]}`, true, true, 3, 6, 2, true},
		{`{"meta": {"texts": ["nested is not a document"]}}`, true, false, 5, 0, 0, false},
		{`{"texts": "a string is not a list"}`, true, false, 6, 0, 0, false},
		{`{"texts": [["deeper"], "kept"]}`, true, true, 2, 4, 1, false},
		{`["data:image/png;base64,AAAA"]`, true, false, 10, 0, 0, true},
		{`{"image_base64": ""}`, true, false, 0, 0, 0, false},
		{`{"texts": [`, false, false, 0, 0, 0, false},
	}
	for _, tt := range tests {
		j, ok := scanJSON([]byte(tt.data))
		if ok != tt.ok || j.doc != tt.doc || j.tokens != tt.tokens || j.docBytes != tt.docBytes || j.docTokens != tt.docTokens || (j.embedded != "") != tt.embedded {
			t.Errorf("scanJSON(%s) = %+v, %v; want ok %v, doc %v, %d tokens, %d doc bytes, %d doc tokens, embedded %v",
				tt.data, j, ok, tt.ok, tt.doc, tt.tokens, tt.docBytes, tt.docTokens, tt.embedded)
		}
	}
}

func TestWideBOM(t *testing.T) {
	for data, want := range map[string]string{
		"\xff\xfea\x00": "UTF-16LE", "\xfe\xff\x00a": "UTF-16BE", "\xff\xfe\x00\x00a\x00\x00\x00": "UTF-32LE",
		"\x00\x00\xfe\xff": "UTF-32BE", "\xef\xbb\xbfa": "", "a cat": "", "": "", "\xff": "",
	} {
		if got := wideBOM([]byte(data)); got != want {
			t.Errorf("wideBOM(%q) = %q, want %q", data, got, want)
		}
	}
}

// FuzzScanJSON reads mutated JSON: scanJSON must never panic, must agree
// with json.Valid, and its document text must be part of its strings.
func FuzzScanJSON(f *testing.F) {
	f.Add([]byte(`{"texts": ["a cat.", null, "dogs"], "images": [null, "u", null], "url": "https://x"}`))
	f.Add([]byte(`{"text_list": ["one"], "image_info": [{"image_base64": "QUJD"}]}`))
	f.Add([]byte(`[{"texts": [1, {"a": ["b"]}]}, "data:image/gif;base64,R0lG", "\u00e9\ud83d\ude00"]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		j, ok := scanJSON(data)
		if ok != json.Valid(data) {
			t.Fatalf("ok %v, json.Valid %v", ok, !ok)
		}
		// A string's bytes grow at most 3x when decoded (an invalid byte
		// becomes U+FFFD).
		if j.docTokens > j.tokens || j.docBytes > 3*len(data) || j.tokens < 0 || (!j.doc && j.docBytes+j.docTokens > 0) {
			t.Fatalf("scanJSON(%q) = %+v", data, j)
		}
		if got := parseText(data, "json"); ok && got.Tokens != j.tokens {
			t.Fatalf("parseText counts %d tokens, scanJSON %d", got.Tokens, j.tokens)
		}
	})
}
