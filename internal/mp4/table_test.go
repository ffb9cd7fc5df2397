package mp4

import (
	"bytes"
	"encoding/binary"
	"errors"
	"maps"
	"strings"
	"testing"
)

// TestParseMP4ForgedTableCounts forges the entry count of each sample
// table box: stco, co64 and stsc were not checked, and FFmpeg then failed
// with "Cannot allocate memory" instead of a message naming the box.
func TestParseMP4ForgedTableCounts(t *testing.T) {
	entry := videoEntry("avc1", 16, 16)
	good := map[string][]byte{
		"stts": fbox("stts", 0, 0, u32s(1, 2, 1)),
		"stsz": fbox("stsz", 0, 0, u32s(5, 2)),
		"stsc": fbox("stsc", 0, 0, u32s(1, 1, 2, 1)),
		"stco": fbox("stco", 0, 0, u32s(1, 48)),
		"ctts": fbox("ctts", 0, 0, u32s(1, 2, 0)),
		"stss": fbox("stss", 0, 0, u32s(1, 1)),
	}
	file := func(boxes map[string][]byte, chunks string) []byte {
		stbl := [][]byte{entry}
		for _, typ := range []string{"stts", "ctts", "stss", "stsz", "stsc", chunks} {
			stbl = append(stbl, boxes[typ])
		}
		return box("moov", trak(1, 10, 2, nil, stbl...))
	}
	good["co64"] = fbox("co64", 0, 0, u32s(1, 0, 48))
	for _, chunks := range []string{"stco", "co64"} {
		if v, err := Parse(file(good, chunks)); err != nil || v.Frames != 2 {
			t.Fatalf("valid file with %s: %+v, %v", chunks, v, err)
		}
	}
	tests := []struct {
		typ, want string
	}{
		{"stco", "stco counts 2147483647 entries, but its 4 bytes of 4-byte entries hold at most 1"},
		{"co64", "co64 counts 2147483647 entries, but its 8 bytes of 8-byte entries hold at most 1"},
		{"stsc", "stsc counts 2147483647 entries, but its 12 bytes of 12-byte entries hold at most 1"},
		{"stts", "stts counts 2147483647 entries, but its 8 bytes of 8-byte entries hold at most 1"},
		{"ctts", "ctts counts 2147483647 entries, but its 8 bytes of 8-byte entries hold at most 1"},
		{"stss", "stss counts 2147483647 entries, but its 4 bytes of 4-byte entries hold at most 1"},
	}
	for _, tt := range tests {
		boxes := maps.Clone(good)
		b := bytes.Clone(boxes[tt.typ])
		binary.BigEndian.PutUint32(b[12:], 0x7FFFFFFF) // after size, type, version and flags
		boxes[tt.typ] = b
		chunks := "stco"
		if tt.typ == "co64" {
			chunks = "co64"
		}
		_, err := Parse(file(boxes, chunks))
		if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("forged %s count: err %v, want ErrFormat saying %q", tt.typ, err, tt.want)
		}
	}
	// An stts without entries for frames: FFmpeg refuses it as "missing
	// mandatory atoms".
	boxes := maps.Clone(good)
	boxes["stts"] = fbox("stts", 0, 0, u32s(0))
	if _, err := Parse(file(boxes, "stco")); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "stts has no entries for 2 frames") {
		t.Errorf("empty stts: err %v", err)
	}
}
