package decode

import (
	"bytes"
	"encoding/json"
	"unicode"
	"unicode/utf8"
)

// ParseText returns the byte length and estimated token count of a text
// member. A JSON member (ext ending in "json") that parses counts the
// tokens of its string values only — captions and text fields, not keys,
// numbers or punctuation; other members, and JSON that does not parse,
// are counted as plain text.
func ParseText(data []byte, ext string) TextInfo {
	info := TextInfo{Bytes: len(data)}
	if isJSONExt(ext) {
		if n, ok := jsonStringTokens(data); ok {
			info.Tokens = n
			return info
		}
	}
	info.Tokens = EstimateTokens(data)
	return info
}

func isJSONExt(ext string) bool {
	return ext == "json" || len(ext) > 5 && ext[len(ext)-5:] == ".json"
}

// EstimateTokens estimates how many tokens a GPT-style BPE tokenizer
// (such as cl100k) produces for UTF-8 text, without a vocabulary:
//
//   - a run of letters is 1 + (w-1)/8 tokens, where w counts ASCII
//     letters once and other letters (accents, Cyrillic, Greek, ...) and
//     combining marks twice: common English words are one token, long
//     ones split, and vocabularies hold fewer merges of non-ASCII letters;
//   - a run of digits is one token per started 3 digits (BPE vocabularies
//     group digits in threes);
//   - each Han, Hiragana, Katakana or Hangul character is one token;
//   - each other non-space character (punctuation, symbols, emoji, and
//     invalid UTF-8 bytes) is one token; white space is free, as it merges
//     into the following word.
//
// It is a heuristic, not a tokenizer ("The quick brown fox jumps over the
// lazy dog." gives 10, as cl100k does); the cost model only needs text
// samples ranked by size and a plausible count to report.
func EstimateTokens(text []byte) int {
	tokens := 0
	letters, digits := 0, 0 // weight of the current letter run, length of the digit run
	flush := func() {
		if letters > 0 {
			tokens += 1 + (letters-1)/8
		}
		tokens += (digits + 2) / 3
		letters, digits = 0, 0
	}
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRune(text[i:])
		i += size
		switch {
		case r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z':
			if digits > 0 {
				flush()
			}
			letters++
		case r >= '0' && r <= '9':
			if letters > 0 {
				flush()
			}
			digits++
		case r == utf8.RuneError && size == 1,
			unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul):
			flush()
			tokens++
		case unicode.IsLetter(r) || unicode.IsMark(r):
			if digits > 0 {
				flush()
			}
			letters += 2
		case unicode.IsSpace(r):
			flush()
		default:
			flush()
			tokens++
		}
	}
	flush()
	return tokens
}

// jsonStringTokens sums the estimated tokens of the string values (not
// keys) of a JSON document; ok is false when data is not valid JSON.
func jsonStringTokens(data []byte) (int, bool) {
	if !json.Valid(data) {
		return 0, false
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	type level struct{ object, keyNext bool }
	var stack []level
	tokens := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return tokens, true // io.EOF after the valid document
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			continue
		}
		if n := len(stack); n > 0 && stack[n-1].object {
			if stack[n-1].keyNext {
				stack[n-1].keyNext = false
				continue // a key
			}
			stack[n-1].keyNext = true // this token starts the value
		}
		switch v := tok.(type) {
		case json.Delim:
			stack = append(stack, level{object: v == '{', keyNext: v == '{'})
		case string:
			tokens += EstimateTokens([]byte(v))
		}
	}
}
