package wire

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestRxClass(t *testing.T) {
	for _, tc := range []struct{ n, want int64 }{
		{1, 4096}, {4096, 4096}, {4097, 5120}, {8192, 8192}, {8193, 10240},
		{151490, 163840}, {1 << 20, 1 << 20}, {1<<20 + 1, 1<<20 + 1<<18},
	} {
		if got := sizeClass(tc.n); got != tc.want {
			t.Errorf("sizeClass(%d) = %d, want %d", tc.n, got, tc.want)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	prev := int64(0)
	for n := int64(1); n < 1<<26; n += 1 + rng.Int64N(n) {
		c := sizeClass(n)
		if c < n || (n > 4096 && 4*(c-n) >= c) {
			t.Fatalf("sizeClass(%d) = %d: want at least n and under a quarter wasted", n, c)
		}
		if c < prev {
			t.Fatalf("sizeClass(%d) = %d, less than the class %d of a smaller size", n, c, prev)
		}
		prev = c
	}
}

func TestRxPoolReusesTheBestFit(t *testing.T) {
	p := NewPool(1<<30, false)
	small, big := p.Get(5000), p.Get(300_000)
	if p.Hits != 0 || p.Misses != 2 || len(small) != 5000 || cap(small) != int(sizeClass(5000)) {
		t.Fatalf("fresh pool: len %d cap %d, hits %d misses %d; want 2 misses and a buffer of the class's capacity", len(small), cap(small), p.Hits, p.Misses)
	}
	p.Put(small)
	p.Put(big)
	// 4800 fits the small buffer; the big one is far over twice its class.
	if b := p.Get(4800); &b[:1][0] != &small[:1][0] || len(b) != 4800 {
		t.Errorf("get(4800) did not return the 5000-byte buffer")
	}
	// 200 000 fits only the big one, within twice its class.
	if b := p.Get(200_000); &b[:1][0] != &big[:1][0] {
		t.Errorf("get(200000) did not return the 300000-byte buffer")
	}
	if p.Hits != 2 || len(p.free) != 0 || p.bytes != 0 {
		t.Errorf("after two reuses: hits %d, %d free holding %d B; want 2, 0, 0", p.Hits, len(p.free), p.bytes)
	}
	p.Put(big)
	if b := p.Get(4800); cap(b) == cap(big) {
		t.Errorf("get(4800) took the %d-byte buffer, over twice its class", cap(big))
	}
}

func TestRxPoolKeepsItsLimit(t *testing.T) {
	p := NewPool(100_000, false)
	p.Put(make([]byte, 200_000)) // over the limit: not kept
	if len(p.free) != 0 {
		t.Fatalf("kept a buffer larger than the limit")
	}
	for _, n := range []int{40_000, 10_000, 30_000, 50_000} {
		p.Put(make([]byte, n))
	}
	// 130 000 B > 100 000: the smallest went until it fit.
	if got := freeCaps(p); !slices.Equal(got, []int{40_000, 50_000}) {
		t.Errorf("free capacities %v, want [40000 50000] (the smallest let go first)", got)
	}
	q := NewPool(1<<40, false)
	for range poolMaxFree + 10 {
		q.Put(make([]byte, 1))
	}
	if len(q.free) != poolMaxFree {
		t.Errorf("%d free buffers, want at most %d", len(q.free), poolMaxFree)
	}
}

// freeCaps lists the capacities of p's free buffers, in p's order.
func freeCaps(p *Pool) []int {
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
	p := NewPool(2<<20, false)
	var out [][]byte
	for i := range 20_000 {
		if len(out) > 0 && rng.IntN(2) == 0 {
			j := rng.IntN(len(out))
			p.Put(out[j])
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
			if want > int(2*sizeClass(n)) {
				want = -1
			}
			b := p.Get(n)
			if int64(len(b)) != n || (want >= 0 && cap(b) != want) || (want < 0 && int64(cap(b)) != sizeClass(n)) {
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
		if sum != p.bytes || sum > p.limit || len(p.free) > poolMaxFree {
			t.Fatalf("op %d: %d free buffers of %d B (pool says %d), limit %d", i, len(p.free), sum, p.bytes, p.limit)
		}
	}
}
