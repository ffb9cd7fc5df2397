package wire

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
		{Shard: "s", Key: "", Members: nil, Epoch: 7},
		{Shard: "e.tar", Key: "late", Epoch: MaxEpoch, Members: []decode.Member{{Name: "late.txt", Ext: "txt", Data: []byte("x")}}},
		{Shard: "x.tar", Key: "k", Members: []decode.Member{{Name: "k.json", Ext: "json", Data: []byte{}}}},
	}
}

func TestWireRoundTrip(t *testing.T) {
	var buf []byte
	for _, s := range wireSamples() {
		before := len(buf)
		buf = Append(buf, s)
		if got := int64(len(buf) - before); got != Size(s) {
			t.Errorf("sample %q: wrote %d bytes, Size says %d", s.Key, got, Size(s))
		}
	}
	rest := buf
	for _, want := range wireSamples() {
		got, r, err := Read(rest)
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
// after another, although the buffer moves as it grows; every member of
// wireInlineBelow bytes or more is sent as its own slice, not a copy, and
// the headers and small members between two of them go out as one part.
func TestWirePartsSendDataInPlace(t *testing.T) {
	big := func(key string) *decode.Sample {
		return &decode.Sample{Shard: "s.tar", Key: key, Members: []decode.Member{
			{Name: key + ".mp4", Ext: "mp4", Data: bytes.Repeat([]byte(key), wireInlineBelow)},
			{Name: key + ".txt", Ext: "txt", Data: []byte("a caption")},
			{Name: key + ".json", Ext: "json", Data: []byte{}},
		}}
	}
	// A sample whose large member comes last ends on a data part, not a
	// header run, which the next sample's header must not be merged into.
	last := &decode.Sample{Shard: "s.tar", Key: "z", Members: []decode.Member{
		{Name: "z.txt", Ext: "txt", Data: []byte("cap")},
		{Name: "z.mp4", Ext: "mp4", Data: bytes.Repeat([]byte("z"), wireInlineBelow)},
	}}
	samples := append(wireSamples(), big("a"), last, big("b"), last, last, big("c"))
	var parts [][]byte
	var hdr []byte // no capacity: it is reallocated while parts point into it
	var want []byte
	for range 20 {
		for _, s := range samples {
			parts, hdr = AppendParts(parts, hdr, s)
			want = append(want, Append(nil, s)...)
		}
	}
	if got := bytes.Join(parts, nil); !bytes.Equal(got, want) {
		t.Fatalf("parts join to %d bytes that differ from the %d of the encodings", len(got), len(want))
	}
	for i, p := range parts {
		if len(p) == 0 {
			t.Errorf("part %d is empty", i)
		}
	}

	// Three samples, each with one large member: its header, then per
	// sample the large data and the run of headers and small members up
	// to the next large one.
	abc := []*decode.Sample{big("a"), big("b"), big("c")}
	parts, hdr = nil, make([]byte, 0, 1<<10)
	for _, s := range abc {
		parts, hdr = AppendParts(parts, hdr, s)
	}
	if len(parts) != 1+2*len(abc) {
		t.Fatalf("3 samples with one large member each: %d parts, want %d", len(parts), 1+2*len(abc))
	}
	for i, s := range abc {
		if d := s.Members[0].Data; &parts[1+2*i][0] != &d[0] || len(parts[1+2*i]) != len(d) {
			t.Errorf("sample %q: part %d is not its large member's data as it lies", s.Key, 1+2*i)
		}
	}
}

func TestWireRejectsTruncation(t *testing.T) {
	full := Append(nil, wireSamples()[0])
	for n := 0; n < len(full); n++ {
		if _, _, err := Read(full[:n]); !errors.Is(err, ErrMalformed) {
			t.Fatalf("truncated to %d of %d bytes: got %v, want ErrMalformed", n, len(full), err)
		}
	}
}

// TestWireRefusesBadEpoch: an epoch beyond MaxEpoch, or in a longer
// uvarint than it needs, is malformed.
func TestWireRefusesBadEpoch(t *testing.T) {
	for _, epoch := range [][]byte{{0xff, 0xff, 0xff, 0xff, 0x08}, {0x80, 0x00}} {
		msg := append([]byte{1, 's', 1, 'k'}, epoch...)
		msg = append(msg, 0)
		if _, _, err := Read(msg); !errors.Is(err, ErrMalformed) {
			t.Errorf("epoch bytes %x: got %v, want ErrMalformed", epoch, err)
		}
	}
	if s, _, err := Read([]byte{1, 's', 1, 'k', 5, 0}); err != nil || s.Epoch != 5 {
		t.Errorf("epoch 5: got %+v, %v", s, err)
	}
}

func FuzzReadWire(f *testing.F) {
	for _, s := range wireSamples() {
		f.Add(Append(nil, s))
	}
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, data []byte) {
		s, rest, err := Read(data)
		if err != nil {
			return
		}
		// What parses must re-encode to the bytes it came from, in one
		// buffer and in parts.
		again := Append(nil, s)
		if !bytes.Equal(again, data[:len(data)-len(rest)]) {
			t.Fatalf("re-encoding differs:\n%x\n%x", again, data[:len(data)-len(rest)])
		}
		parts, _ := AppendParts(nil, nil, s)
		if joined := bytes.Join(parts, nil); !bytes.Equal(joined, again) {
			t.Fatalf("parts join to other bytes:\n%x\n%x", joined, again)
		}
	})
}
