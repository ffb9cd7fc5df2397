package spmd

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/datahelix/datahelix/decode"
)

func wireSamples() []*decode.Sample {
	return []*decode.Sample{
		{Shard: "/data/shard-000.tar", Key: "clips/000123", Members: []decode.Member{
			{Name: "clips/000123.mp4", Ext: "mp4", Data: bytes.Repeat([]byte{1, 2, 3}, 300)},
			{Name: "clips/000123.txt", Ext: "txt", Data: []byte("a caption")},
		}},
		{Shard: "s", Key: "", Members: nil},
		{Shard: "x.tar", Key: "k", Members: []decode.Member{{Name: "k.json", Ext: "json", Data: []byte{}}}},
	}
}

func TestWireRoundTrip(t *testing.T) {
	var buf []byte
	for _, s := range wireSamples() {
		before := len(buf)
		buf = appendWire(buf, s)
		if got := int64(len(buf) - before); got != wireSize(s) {
			t.Errorf("sample %q: wrote %d bytes, wireSize says %d", s.Key, got, wireSize(s))
		}
	}
	rest := buf
	for _, want := range wireSamples() {
		got, r, err := readWire(rest)
		if err != nil {
			t.Fatal(err)
		}
		rest = r
		if want.Members == nil {
			want.Members = []decode.Member{}
		}
		for i := range want.Members {
			if want.Members[i].Data == nil {
				want.Members[i].Data = []byte{}
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("got %+v, want %+v", got, want)
		}
	}
	if len(rest) != 0 {
		t.Errorf("%d bytes left over", len(rest))
	}
}

// TestWirePartsSendDataInPlace: the parts of several samples laid out
// with one growing header buffer join into the samples' encodings one
// after another, although the buffer moves as it grows, and every
// non-empty member's data part is the member's own slice, not a copy.
func TestWirePartsSendDataInPlace(t *testing.T) {
	var parts [][]byte
	var hdr []byte // no capacity: it is reallocated while parts point into it
	var want []byte
	for range 20 {
		for _, s := range wireSamples() {
			parts, hdr = appendWireParts(parts, hdr, s)
			want = append(want, appendWire(nil, s)...)
		}
	}
	if got := bytes.Join(parts, nil); !bytes.Equal(got, want) {
		t.Fatalf("parts join to %d bytes that differ from the %d of the encodings", len(got), len(want))
	}
	ss := wireSamples()
	parts, _ = appendWireParts(nil, nil, ss[0])
	for _, m := range ss[0].Members {
		found := false
		for _, p := range parts {
			found = found || (len(p) == len(m.Data) && &p[0] == &m.Data[0])
		}
		if !found {
			t.Errorf("member %q: its data is not one of the parts as it lies", m.Name)
		}
	}
	for i, p := range parts {
		if len(p) == 0 {
			t.Errorf("part %d is empty", i)
		}
	}
}

func TestWireRejectsTruncation(t *testing.T) {
	full := appendWire(nil, wireSamples()[0])
	for n := 0; n < len(full); n++ {
		if _, _, err := readWire(full[:n]); !errors.Is(err, ErrWire) {
			t.Fatalf("truncated to %d of %d bytes: got %v, want ErrWire", n, len(full), err)
		}
	}
}

func FuzzReadWire(f *testing.F) {
	for _, s := range wireSamples() {
		f.Add(appendWire(nil, s))
	}
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, data []byte) {
		s, rest, err := readWire(data)
		if err != nil {
			return
		}
		// What parses must re-encode to the bytes it came from.
		again := appendWire(nil, s)
		if !bytes.Equal(again, data[:len(data)-len(rest)]) {
			t.Fatalf("re-encoding differs:\n%x\n%x", again, data[:len(data)-len(rest)])
		}
	})
}
