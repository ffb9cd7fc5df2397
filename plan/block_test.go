package plan

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

func sampleBlock() *Block {
	return &Block{
		Params: Params{Mode: ModeHelixNoGate, Seed: 0xfeedface, Margin: 250},
		Step:   42,
		Rank:   3,
		Progress: Progress{Deadline: 90_000, Backlog: 12_000, Capacity: 6 * One, Bandwidth: 10_000 * One, Latency: 5,
			Node: 2, NodeBandwidth: 125 * One, NodeLatency: 40},
		Samples: []Sample{
			{ID: 1<<40 + 7, Owner: 3, Bytes: 3_500_000, Cost: 640_000, Train: 31_000_000},
			{ID: 9, Owner: 3, Bytes: 0, Cost: 0},
			{ID: 1<<63 + 1, Owner: 3, Bytes: maxBytes, Cost: maxCost, Train: maxTrain},
		},
	}
}

func TestBlockRoundTrip(t *testing.T) {
	want := sampleBlock()
	buf, err := AppendBlock([]byte("prefix"), want)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(buf) - len("prefix"); got != BlockSize(len(want.Samples)) {
		t.Fatalf("encoded %d bytes, BlockSize says %d", got, BlockSize(len(want.Samples)))
	}
	var got Block
	if err := decodeBlock(buf[len("prefix"):], &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&got, want) {
		t.Fatalf("round trip: got %+v, want %+v", got, *want)
	}
	// The NoTrain flag travels in the flags byte.
	want.NoTrain = true
	buf, err = AppendBlock(nil, want)
	if err != nil {
		t.Fatal(err)
	}
	if buf[7] != 1 {
		t.Errorf("flags byte %#x with NoTrain, want 1", buf[7])
	}
	if err := decodeBlock(buf, &got); err != nil || !reflect.DeepEqual(&got, want) {
		t.Fatalf("round trip with NoTrain: got %+v (%v), want %+v", got, err, *want)
	}
}

// TestBlockLayout pins the documented byte layout: changing it must bump
// blockVersion.
func TestBlockLayout(t *testing.T) {
	buf, err := AppendBlock(nil, sampleBlock())
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	for _, c := range []struct {
		name      string
		got, want uint64
	}{
		{"version", uint64(le.Uint16(buf[4:])), blockVersion},
		{"mode", uint64(buf[6]), uint64(ModeHelixNoGate)},
		{"rank", uint64(le.Uint32(buf[8:])), 3},
		{"count", uint64(le.Uint32(buf[12:])), 3},
		{"step", le.Uint64(buf[16:]), 42},
		{"seed", le.Uint64(buf[24:]), 0xfeedface},
		{"margin", le.Uint64(buf[32:]), 250},
		{"deadline", le.Uint64(buf[40:]), 90_000},
		{"backlog", le.Uint64(buf[48:]), 12_000},
		{"capacity", le.Uint64(buf[56:]), 6 * One},
		{"bandwidth", le.Uint64(buf[64:]), 10_000 * One},
		{"latency", le.Uint64(buf[72:]), 5},
		{"node", le.Uint64(buf[80:]), 2},
		{"bandwidth to other nodes", le.Uint64(buf[88:]), 125 * One},
		{"latency to other nodes", le.Uint64(buf[96:]), 40},
		{"sample 0 id", le.Uint64(buf[104:]), 1<<40 + 7},
		{"sample 0 bytes", le.Uint64(buf[112:]), 3_500_000},
		{"sample 0 cost", le.Uint64(buf[120:]), 640_000},
		{"sample 0 GPU time", le.Uint64(buf[128:]), 31_000_000},
		{"sample 1 id", le.Uint64(buf[136:]), 9},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
	if string(buf[:4]) != "DHPB" {
		t.Errorf("magic = %q, want DHPB", buf[:4])
	}
}

func TestDecodeBlockRejects(t *testing.T) {
	good, err := AppendBlock(nil, sampleBlock())
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	put64 := func(off int, v int64) func([]byte) []byte {
		return func(b []byte) []byte { le.PutUint64(b[off:], uint64(v)); return b }
	}
	for _, c := range []struct {
		name   string
		mutate func([]byte) []byte
		want   string
	}{
		{"empty", func([]byte) []byte { return nil }, "shorter than"},
		{"truncated header", func(b []byte) []byte { return b[:103] }, "shorter than"},
		{"truncated sample", func(b []byte) []byte { return b[:len(b)-1] }, "want 200"},
		{"trailing byte", func(b []byte) []byte { return append(b, 0) }, "want 200"},
		{"magic", func(b []byte) []byte { b[0] = 'X'; return b }, "bad magic"},
		{"version 2", func(b []byte) []byte { le.PutUint16(b[4:], 2); return b }, "version 2, want 3"},
		{"version 4", func(b []byte) []byte { le.PutUint16(b[4:], 4); return b }, "version 4"},
		{"mode", func(b []byte) []byte { b[6] = 9; return b }, "unknown mode"},
		{"flags", func(b []byte) []byte { b[7] = 2; return b }, "only bit 0 is defined"},
		{"rank", func(b []byte) []byte { le.PutUint32(b[8:], maxRanks); return b }, "rank 65536"},
		{"zero samples", func(b []byte) []byte { le.PutUint32(b[12:], 0); return b[:104] }, "sample count 0"},
		{"huge count", func(b []byte) []byte { le.PutUint32(b[12:], 1<<31); return b }, "sample count"},
		{"negative step", put64(16, -1), "step -1"},
		{"negative margin", put64(32, -5), "margin -5"},
		{"negative deadline", put64(40, -1), "deadline -1"},
		{"overflowing backlog", put64(48, 1<<62), "backlog"},
		{"zero capacity", put64(56, 0), "capacity 0"},
		{"zero bandwidth", put64(64, 0), "bandwidth 0"},
		{"negative latency", put64(72, -1), "latency -1"},
		{"negative node", put64(80, -1), "node -1"},
		{"node past the ranks", put64(80, maxRanks), "node 65536"},
		{"negative bandwidth to other nodes", put64(88, -1), "bandwidth to other nodes -1"},
		{"negative latency to other nodes", put64(96, -1), "latency to other nodes -1"},
		{"negative bytes", put64(112, -1), "size -1"},
		{"overflowing cost", put64(120, maxCost+1), "cost 4294967297"},
		{"negative cost", put64(120, -1<<63), "cost -9223372036854775808"},
		{"negative GPU time", put64(128, -1), "GPU time -1"},
		{"overflowing GPU time", put64(128, maxTrain+1), "GPU time 1099511627777"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var blk Block
			err := decodeBlock(c.mutate(bytes.Clone(good)), &blk)
			if !errors.Is(err, ErrBlock) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want ErrBlock mentioning %q", err, c.want)
			}
		})
	}
}

func TestAppendBlockRejects(t *testing.T) {
	for _, c := range []struct {
		name   string
		mutate func(*Block)
		want   string
	}{
		{"owner", func(b *Block) { b.Samples[1].Owner = 2 }, "has owner 2"},
		{"no samples", func(b *Block) { b.Samples = nil }, "0 samples"},
		{"zero capacity", func(b *Block) { b.Progress.Capacity = 0 }, "capacity 0"},
		{"negative rank", func(b *Block) { b.Rank = -1 }, "rank -1"},
		{"mode", func(b *Block) { b.Mode = numModes }, "unknown mode"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := sampleBlock()
			c.mutate(b)
			for k := range b.Samples {
				if c.name != "owner" {
					b.Samples[k].Owner = b.Rank
				}
			}
			_, err := AppendBlock(nil, b)
			if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want ErrInput mentioning %q", err, c.want)
			}
		})
	}
}

// encodeInput is what the allgather produces: every rank's block in rank
// order.
func encodeInput(t testing.TB, in *Input) []byte {
	t.Helper()
	var buf []byte
	for r := range in.Ranks {
		var err error
		if buf, err = in.appendBlockOf(buf, r); err != nil {
			t.Fatal(err)
		}
	}
	return buf
}

func TestDecodeInputRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var got Input
	for range 50 {
		in := genInput(rng, 1+rng.IntN(9), 1+rng.IntN(7), genOpts{mode: Mode(rng.IntN(int(numModes))), heavy: true, progress: true, margin: rng.Int64N(100)})
		buf := encodeInput(t, in)
		if len(buf) != len(in.Ranks)*BlockSize(in.Batch) {
			t.Fatalf("allgather buffer %d bytes, want %d", len(buf), len(in.Ranks)*BlockSize(in.Batch))
		}
		if err := DecodeInput(buf, &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(&got, in) {
			t.Fatalf("round trip: got %+v, want %+v", got, *in)
		}
	}
}

func TestDecodeInputRejects(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	base := genInput(rng, 4, 3, genOpts{heavy: true, progress: true})
	for _, c := range []struct {
		name string
		make func() []byte
		want string
	}{
		{"step differs", func() []byte {
			in := *base
			buf := encodeInput(t, &in)
			binary.LittleEndian.PutUint64(buf[2*BlockSize(3)+16:], uint64(in.Step+1))
			return buf
		}, "rank 2 plans step"},
		{"mode differs", func() []byte {
			buf := encodeInput(t, base)
			buf[3*BlockSize(3)+6] = byte(ModeStatic)
			return buf
		}, "rank 3 plans step"},
		{"NoTrain differs", func() []byte {
			buf := encodeInput(t, base)
			buf[BlockSize(3)+7] = 1
			return buf
		}, "rank 1 plans step"},
		{"rank out of place", func() []byte {
			buf := encodeInput(t, base)
			binary.LittleEndian.PutUint32(buf[BlockSize(3)+8:], 2)
			return buf
		}, "position 1 says it is rank 2"},
		{"batch differs", func() []byte {
			buf := encodeInput(t, base)
			one := genInput(rng, 1, 4, genOpts{})
			blk, _ := one.appendBlockOf(nil, 0)
			return append(buf[:BlockSize(3)], blk...)
		}, "not a whole number"},
		{"duplicate id", func() []byte {
			in := *base
			in.Samples = append([]Sample(nil), base.Samples...)
			in.Samples[7].ID = in.Samples[2].ID
			return encodeInput(t, &in)
		}, "appears twice"},
		{"bad block", func() []byte {
			buf := encodeInput(t, base)
			binary.LittleEndian.PutUint64(buf[BlockSize(3)+56:], 0)
			return buf
		}, "rank 1 block"},
		{"empty", func() []byte { return nil }, "shorter than one header"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var in Input
			err := DecodeInput(c.make(), &in)
			if !errors.Is(err, ErrBlock) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want ErrBlock mentioning %q", err, c.want)
			}
		})
	}
}

// FuzzDecodeBlock feeds arbitrary bytes to the block decoder: it must
// return an error or a block that re-encodes to the same bytes.
func FuzzDecodeBlock(f *testing.F) {
	good, _ := AppendBlock(nil, sampleBlock())
	f.Add(good)
	f.Add(good[:80])
	f.Add([]byte("DHPB"))
	one, _ := AppendBlock(nil, &Block{Rank: 0, Progress: Progress{Capacity: 1, Bandwidth: 1}, Samples: []Sample{{}}})
	f.Add(one)
	f.Fuzz(func(t *testing.T, data []byte) {
		var b Block
		if err := decodeBlock(data, &b); err != nil {
			if !errors.Is(err, ErrBlock) {
				t.Fatalf("error %v does not wrap ErrBlock", err)
			}
			return
		}
		again, err := AppendBlock(nil, &b)
		if err != nil {
			t.Fatalf("decoded block does not encode: %v", err)
		}
		if !bytes.Equal(again, data) {
			t.Fatalf("re-encoding differs:\n got %x\nwant %x", again, data)
		}
	})
}

// FuzzDecodeInput feeds arbitrary allgather buffers to DecodeInput and
// plans every buffer it accepts: planning a decoded input never fails,
// never panics and keeps every invariant.
func FuzzDecodeInput(f *testing.F) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, mode := range []Mode{ModeHelix, ModeStatic, ModeOracle} {
		f.Add(encodeInput(f, genInput(rng, 3, 2, genOpts{mode: mode, heavy: true, progress: true})))
	}
	f.Add(encodeInput(f, genInput(rng, 2, 1, genOpts{maxCost: 10})))
	f.Add(encodeInput(f, genInput(rng, 3, 4, genOpts{mode: ModeHelix, maxCost: 1000, deadline: 50_000, train: true, margin: 100})))
	f.Add(encodeInput(f, genInput(rng, 4, 3, genOpts{mode: ModeHelixNoGate, heavy: true, progress: true, train: true})))
	var pl Planner
	var p Plan
	f.Fuzz(func(t *testing.T, data []byte) {
		var in Input
		if err := DecodeInput(data, &in); err != nil {
			if !errors.Is(err, ErrBlock) {
				t.Fatalf("error %v does not wrap ErrBlock", err)
			}
			return
		}
		if err := pl.Compute(&in, &p); err != nil {
			t.Fatalf("decoded input does not plan: %v", err)
		}
		checkPlan(t, &in, &p)
		// A reused Planner plans as a fresh one: ranks that planned other
		// steps before must still agree.
		if fresh, err := Compute(&in); err != nil || fresh.Hash != p.Hash {
			t.Fatalf("a fresh planner gives hash %x (%v), the reused one %x", fresh.Hash, err, p.Hash)
		}
		if !bytes.Equal(encodeInput(t, &in), data) {
			t.Fatalf("re-encoding the decoded input differs")
		}
	})
}

// appendBlockOf appends rank r's block of in to dst: the inverse of
// DecodeInput, one rank at a time.
func (in *Input) appendBlockOf(dst []byte, r int) ([]byte, error) {
	if r < 0 || r >= len(in.Ranks) || in.Batch < 1 || len(in.Samples) < (r+1)*in.Batch {
		return dst, fmt.Errorf("%w: no block for rank %d in an input of %d ranks and %d samples", ErrInput, r, len(in.Ranks), len(in.Samples))
	}
	return AppendBlock(dst, &Block{Params: in.Params, Step: in.Step, Rank: r, Progress: in.Ranks[r],
		Samples: in.Samples[r*in.Batch : (r+1)*in.Batch]})
}
