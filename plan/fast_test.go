package plan

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// unmix64 inverts mix64.
func unmix64(x uint64) uint64 {
	unshift := func(y uint64, s uint) uint64 {
		x := y
		for range 64 / s {
			x = y ^ x>>s
		}
		return x
	}
	inverse := func(c uint64) uint64 { // of an odd c, mod 2^64 (Newton)
		v := c
		for range 6 {
			v *= 2 - c*v
		}
		return v
	}
	x = unshift(x, 31)
	x *= inverse(0x94d049bb133111eb)
	x = unshift(x, 27)
	x *= inverse(0xbf58476d1ce4e5b9)
	return unshift(x, 30)
}

// TestUniqueFingerprints checks the uniqueness check where two distinct
// ids share the fingerprint the table holds and the slot they hash to:
// no error, from Validate, Compute and DecodeInput; and a true duplicate
// still named, with both samples.
func TestUniqueFingerprints(t *testing.T) {
	for _, x := range []uint64{0, 1, 0xdeadbeef, 1 << 63, ^uint64(0)} {
		if unmix64(mix64(x)) != x {
			t.Fatalf("unmix64(mix64(%#x)) = %#x", x, unmix64(mix64(x)))
		}
	}
	// Same high 32 bits (the fingerprint) and low bits (the slot in any
	// table of up to 2^31 slots): only bit 31 differs.
	a, b := unmix64(0xabcd1234_00000005), unmix64(0xabcd1234_80000005)
	in := smallInput()
	in.Samples[1].ID, in.Samples[4].ID = a, b
	if err := in.Validate(); err != nil {
		t.Fatalf("distinct ids sharing a fingerprint: %v", err)
	}
	if _, err := Compute(in); err != nil {
		t.Fatalf("Compute, distinct ids sharing a fingerprint: %v", err)
	}
	var got Input
	if err := DecodeInput(encodeInput(t, in), &got); err != nil {
		t.Fatalf("DecodeInput, distinct ids sharing a fingerprint: %v", err)
	}
	in.Samples[5].ID = a
	want := "sample id " + itoa(a) + " appears twice (samples 1 and 5)"
	if err := in.Validate(); !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), want) {
		t.Fatalf("Validate: %v, want %q", err, want)
	}
	if _, err := Compute(in); !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), want) {
		t.Fatalf("Compute: %v, want %q", err, want)
	}
	if err := DecodeInput(encodeInput(t, in), &got); !errors.Is(err, ErrBlock) || !strings.Contains(err.Error(), want) {
		t.Fatalf("DecodeInput: %v, want %q", err, want)
	}
}

func itoa(x uint64) string {
	if x == 0 {
		return "0"
	}
	var b []byte
	for ; x > 0; x /= 10 {
		b = append(b, byte('0'+x%10))
	}
	slices.Reverse(b)
	return string(b)
}

// TestOwnerDivision checks Planner.owner against k / B for every batch
// size at the edges of each rank and at the largest index.
func TestOwnerDivision(t *testing.T) {
	var p Planner
	for b := 1; b <= maxBatch; b++ {
		p.in = &Input{Batch: b}
		p.ownerShift, p.ownerMul = ownerDivisor(b)
		g := maxRanks * b
		for _, k := range []int{0, 1, b - 1, b, b + 1, 2*b - 1, g/2 - 1, g/2 + b - 1, g - b, g - b - 1, g - 1} {
			if k < 0 || k >= g {
				continue
			}
			if got := p.owner(int32(k)); int(got) != k/b {
				t.Fatalf("B=%d: owner(%d) = %d, want %d", b, k, got, k/b)
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 1_000_000 {
		b := 1 + rng.IntN(maxBatch)
		k := rng.IntN(maxRanks * b)
		p.ownerShift, p.ownerMul = ownerDivisor(b)
		if got := p.owner(int32(k)); int(got) != k/b {
			t.Fatalf("B=%d: owner(%d) = %d, want %d", b, k, got, k/b)
		}
	}
}

// TestDecodeNets checks the sorting networks by the 0-1 principle: a
// network sorts every input if it sorts every input of zeros and ones,
// all of which are tried up to 16 keys, and random ones beyond.
func TestDecodeNets(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for m, net := range decodeNets {
		n := 1 << m
		for it := range 1 << min(n, 16) {
			bits := uint64(it)
			if n > 16 {
				bits = rng.Uint64()
			}
			var keys [64]uint64
			for i := range n {
				keys[i] = bits >> i & 1
			}
			for _, c := range net {
				x, y := keys[c[0]], keys[c[1]]
				keys[c[0]], keys[c[1]] = min(x, y), max(x, y)
			}
			if !slices.IsSorted(keys[:n]) {
				t.Fatalf("network of %d keys leaves %v unsorted", n, keys[:n])
			}
		}
	}
}

// TestSortDecode checks the sorting network of sortDecode against the
// library's sort with cmpDecode, for every size it covers, with many
// equal costs.
func TestSortDecode(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for it := range 3000 {
		b := 1 + it%70
		in := &Input{Batch: b}
		for k := range b {
			in.Samples = append(in.Samples, Sample{ID: rng.Uint64N(50), Cost: rng.Int64N(int64(1 + it%9))})
			if it%3 == 0 {
				in.Samples[k].Cost = rng.Int64N(maxCost + 1)
			}
		}
		p := Planner{in: in, cost: make([]int64, b)}
		for k := range b {
			p.cost[k] = in.Samples[k].Cost
		}
		got := make([]int32, b)
		for i := range got {
			got[i] = int32(i)
		}
		rng.Shuffle(b, func(i, j int) { got[i], got[j] = got[j], got[i] })
		want := slices.Clone(got)
		slices.SortFunc(want, p.cmpDecode)
		p.sortDecode(got)
		if !slices.Equal(got, want) {
			t.Fatalf("B=%d: got %v, want %v", b, got, want)
		}
	}
}
