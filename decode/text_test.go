package decode

import (
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
		if got := EstimateTokens([]byte(tt.text)); got != tt.want {
			t.Errorf("EstimateTokens(%q) = %d, want %d", tt.text, got, tt.want)
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
		got := EstimateTokens([]byte(s))
		if got > len(s) || got < n || (n > 0 && got > 4*utf8.RuneCountInString(s)) {
			t.Fatalf("EstimateTokens(%q) = %d for %d words, %d bytes", s, got, n, len(s))
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
		if got := ParseText([]byte(tt.data), tt.ext); got != tt.want {
			t.Errorf("ParseText(%q, %q) = %+v, want %+v", tt.data, tt.ext, got, tt.want)
		}
	}
}
