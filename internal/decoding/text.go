package decoding

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode"
	"unicode/utf8"
)

// parseText returns the byte length and estimated token count of a text
// member. A JSON member (ext ending in "json") that parses counts the
// tokens of its string values only — captions and text fields, not keys,
// numbers or punctuation; other members, and JSON that does not parse,
// are counted as plain text.
func parseText(data []byte, ext string) TextInfo {
	info := TextInfo{Bytes: len(data)}
	if isJSONExt(ext) {
		if j, ok := scanJSON(data); ok {
			info.Tokens = j.tokens
			return info
		}
	}
	info.Tokens = estimateTokens(data)
	return info
}

// wideBOM names the encoding whose byte order mark starts data when it is
// UTF-16 or UTF-32 ("UTF-16LE", ...), and returns "" otherwise (UTF-8,
// with or without its mark, or no mark at all).
func wideBOM(data []byte) string {
	switch {
	case bytes.HasPrefix(data, []byte{0xFF, 0xFE, 0, 0}):
		return "UTF-32LE"
	case bytes.HasPrefix(data, []byte{0, 0, 0xFE, 0xFF}):
		return "UTF-32BE"
	case bytes.HasPrefix(data, []byte{0xFF, 0xFE}):
		return "UTF-16LE"
	case bytes.HasPrefix(data, []byte{0xFE, 0xFF}):
		return "UTF-16BE"
	}
	return ""
}

func isJSONExt(ext string) bool {
	return ext == "json" || len(ext) > 5 && ext[len(ext)-5:] == ".json"
}

// estimateTokens estimates how many tokens a GPT-style BPE tokenizer
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
func estimateTokens(text []byte) int {
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

// jsonText is what scanJSON finds in a JSON document.
type jsonText struct {
	tokens int // estimated tokens of its string values (not keys)
	// doc is set for an interleaved document's JSON: a top-level object
	// with a "texts" array (OBELICS, MINT-1T: a string or null per
	// position) or a "text_list" array (MMC4); docBytes and docTokens
	// count the strings of those arrays alone, not URLs or other
	// metadata.
	doc                 bool
	docBytes, docTokens int
	// embedded says how the document embeds image data, "" when it does
	// not: an "image_base64" string (MMC4's image_info) or a data:image
	// URI.
	embedded string
	// values are its string values in order (tokens counts them), and
	// docParts a document's text strings with their index in its array
	// (docTokens counts them): the text Decode gives.
	values   []string
	docParts []docPart
}

// docPart is one text string of a JSON document at its position.
type docPart struct {
	pos  int
	text string
}

// isDocTextKey reports whether a top-level key holds a document's text
// parts.
func isDocTextKey(key string) bool { return key == "texts" || key == "text_list" }

// scanJSON reads a JSON document's strings; ok is false when data is not
// valid JSON.
func scanJSON(data []byte) (j jsonText, ok bool) {
	if !json.Valid(data) {
		return jsonText{}, false
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	type level struct {
		object, keyNext bool
		key             string // in an object, the key of the value being read
		docText         bool   // an array under a top-level "texts" or "text_list"
		n               int    // in an array, the values read so far
	}
	var stack []level
	for {
		tok, err := dec.Token()
		if err != nil {
			return j, true // io.EOF after the valid document
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			continue
		}
		key, pos := "", 0
		if n := len(stack); n > 0 {
			switch top := &stack[n-1]; {
			case !top.object:
				pos = top.n
				top.n++
			case top.keyNext:
				top.keyNext = false
				top.key, _ = tok.(string)
				continue // a key
			default:
				top.keyNext = true // this token starts the value
				key = top.key
			}
		}
		switch v := tok.(type) {
		case json.Delim:
			docText := v == '[' && len(stack) == 1 && stack[0].object && isDocTextKey(key)
			j.doc = j.doc || docText
			stack = append(stack, level{object: v == '{', keyNext: v == '{', docText: docText})
		case string:
			n := estimateTokens([]byte(v))
			j.tokens += n
			j.values = append(j.values, v)
			if len(stack) == 2 && stack[1].docText {
				j.docBytes += len(v)
				j.docTokens += n
				j.docParts = append(j.docParts, docPart{pos, v})
			}
			switch {
			case j.embedded != "":
			case key == "image_base64" && v != "":
				j.embedded = `"image_base64" strings, as MMC4 stores them`
			case strings.HasPrefix(v, "data:image/"):
				j.embedded = "data:image URIs"
			}
		}
	}
}
