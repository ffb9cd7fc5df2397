package spmd

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/datahelix/datahelix/internal/gen/gentest"
)

func TestRxClass(t *testing.T) {
	for _, tc := range []struct{ n, want int64 }{
		{1, 4096}, {4096, 4096}, {4097, 5120}, {8192, 8192}, {8193, 10240},
		{151490, 163840}, {1 << 20, 1 << 20}, {1<<20 + 1, 1<<20 + 1<<18},
	} {
		if got := rxClass(tc.n); got != tc.want {
			t.Errorf("rxClass(%d) = %d, want %d", tc.n, got, tc.want)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	prev := int64(0)
	for n := int64(1); n < 1<<26; n += 1 + rng.Int64N(n) {
		c := rxClass(n)
		if c < n || (n > 4096 && 4*(c-n) >= c) {
			t.Fatalf("rxClass(%d) = %d: want at least n and under a quarter wasted", n, c)
		}
		if c < prev {
			t.Fatalf("rxClass(%d) = %d, less than the class %d of a smaller size", n, c, prev)
		}
		prev = c
	}
}

func TestRxPoolReusesTheBestFit(t *testing.T) {
	p := newRxPool(1 << 30)
	small, big := p.get(5000), p.get(300_000)
	if p.hits != 0 || p.misses != 2 || len(small) != 5000 || cap(small) != int(rxClass(5000)) {
		t.Fatalf("fresh pool: len %d cap %d, hits %d misses %d; want 2 misses and a buffer of the class's capacity", len(small), cap(small), p.hits, p.misses)
	}
	p.put(small)
	p.put(big)
	// 4800 fits the small buffer; the big one is far over twice its class.
	if b := p.get(4800); &b[:1][0] != &small[:1][0] || len(b) != 4800 {
		t.Errorf("get(4800) did not return the 5000-byte buffer")
	}
	// 200 000 fits only the big one, within twice its class.
	if b := p.get(200_000); &b[:1][0] != &big[:1][0] {
		t.Errorf("get(200000) did not return the 300000-byte buffer")
	}
	if p.hits != 2 || len(p.free) != 0 || p.bytes != 0 {
		t.Errorf("after two reuses: hits %d, %d free holding %d B; want 2, 0, 0", p.hits, len(p.free), p.bytes)
	}
	p.put(big)
	if b := p.get(4800); cap(b) == cap(big) {
		t.Errorf("get(4800) took the %d-byte buffer, over twice its class", cap(big))
	}
}

func TestRxPoolKeepsItsLimit(t *testing.T) {
	p := newRxPool(100_000)
	p.put(make([]byte, 200_000)) // over the limit: not kept
	if len(p.free) != 0 {
		t.Fatalf("kept a buffer larger than the limit")
	}
	for _, n := range []int{40_000, 10_000, 30_000, 50_000} {
		p.put(make([]byte, n))
	}
	// 130 000 B > 100 000: the smallest went until it fit.
	if got := freeCaps(p); !slices.Equal(got, []int{40_000, 50_000}) {
		t.Errorf("free capacities %v, want [40000 50000] (the smallest let go first)", got)
	}
	q := newRxPool(1 << 40)
	for range rxPoolMaxFree + 10 {
		q.put(make([]byte, 1))
	}
	if len(q.free) != rxPoolMaxFree {
		t.Errorf("%d free buffers, want at most %d", len(q.free), rxPoolMaxFree)
	}
}

// freeCaps lists the capacities of p's free buffers, in p's order.
func freeCaps(p *rxPool) []int {
	var c []int
	for _, b := range p.free {
		c = append(c, cap(b))
	}
	return c
}

// TestRxPoolRandom checks the pool's invariants over random traffic
// against a plain reference: no buffer handed out twice at once, free
// buffers sorted and summed right, within the limits, and every get
// served by the smallest fitting free buffer when one qualifies.
func TestRxPoolRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	p := newRxPool(2 << 20)
	var out [][]byte
	for i := range 20_000 {
		if len(out) > 0 && rng.IntN(2) == 0 {
			j := rng.IntN(len(out))
			p.put(out[j])
			out = slices.Delete(out, j, j+1)
		} else {
			n := 1 + rng.Int64N(1<<uint(rng.IntN(20)+1))
			// The reference: the smallest free buffer of capacity >= n, if
			// at most twice n's class.
			want := -1
			for _, b := range p.free {
				if int64(cap(b)) >= n && (want < 0 || cap(b) < want) {
					want = cap(b)
				}
			}
			if want > int(2*rxClass(n)) {
				want = -1
			}
			b := p.get(n)
			if int64(len(b)) != n || (want >= 0 && cap(b) != want) || (want < 0 && int64(cap(b)) != rxClass(n)) {
				t.Fatalf("op %d: get(%d) gave len %d cap %d, want cap %d (-1: a new buffer)", i, n, len(b), cap(b), want)
			}
			for _, o := range out {
				if &o[:1][0] == &b[:1][0] {
					t.Fatalf("op %d: get(%d) handed out a buffer in use", i, n)
				}
			}
			out = append(out, b)
		}
		var sum int64
		for k, b := range p.free {
			sum += int64(cap(b))
			if k > 0 && cap(p.free[k-1]) > cap(b) {
				t.Fatalf("op %d: free buffers not sorted: %v", i, freeCaps(p))
			}
		}
		if sum != p.bytes || sum > p.limit || len(p.free) > rxPoolMaxFree {
			t.Fatalf("op %d: %d free buffers of %d B (pool says %d), limit %d", i, len(p.free), sum, p.bytes, p.limit)
		}
	}
}

// TestReceivedSamplesDecodeAsReadLocally runs helix, which moves
// samples between ranks into pooled buffers, and torch, which decodes
// every sample where it was read, and wants every sample's decoded bytes
// equal. The pools poison every buffer given back: one given back while
// a sample still aliased it would change that sample's decode or fail it
// (and the race detector would see the receive writing it).
func TestReceivedSamplesDecodeAsReadLocally(t *testing.T) {
	data := gentest.Tiny(t)
	testPoisonRx = true
	defer func() { testPoisonRx = false }()
	digests := func(k Kind) (map[uint64][32]byte, int, int64) {
		var mu sync.Mutex
		got := map[uint64][32]byte{}
		moved, hits := 0, int64(0)
		var dropped []string
		cfg := testConfig(k)
		cfg.Steps, cfg.Batch = 8, 4 // messages of several samples
		runLoaders(t, 8, data, cfg, func(r int, b *Batch) error {
			mu.Lock()
			defer mu.Unlock()
			for _, d := range b.Dropped {
				dropped = append(dropped, fmt.Sprintf("%s of %s: %v", d.Key, d.Shard, d.Err))
			}
			for _, s := range b.Samples {
				h := sha256.New()
				for _, tn := range s.Tensors {
					h.Write(tn.Data)
				}
				h.Write([]byte(s.Text))
				binary.Write(h, binary.LittleEndian, int64(s.Tokens))
				got[s.ID] = [32]byte(h.Sum(nil))
				if s.Owner != r {
					moved++
				}
			}
			return nil
		}, func(_ int, l *Loader) {
			l.mu.Lock()
			defer l.mu.Unlock()
			mu.Lock()
			defer mu.Unlock()
			hits += l.rx.hits
		})
		if len(dropped) > 0 {
			t.Errorf("%s dropped %d samples, first %s", k, len(dropped), dropped[0])
		}
		return got, moved, hits
	}
	want, _, _ := digests(KindTorch)
	got, moved, hits := digests(KindHelix)
	if moved == 0 || hits == 0 {
		t.Fatalf("helix moved %d samples and reused %d receive buffers: the test needs both", moved, hits)
	}
	if len(got) != len(want) {
		t.Fatalf("helix delivered %d samples, torch %d", len(got), len(want))
	}
	for id, d := range want {
		if got[id] != d {
			t.Errorf("sample %d decoded differently under helix than under torch", id)
		}
	}
	t.Logf("%d samples, %d decoded away from their reader, %d receive buffers reused", len(got), moved, hits)
}
