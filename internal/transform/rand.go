package transform

import (
	"math"
	"math/bits"
)

// Rand is a SplitMix64 stream: small, fast, and the same on every
// platform. Its zero value is a valid stream.
type Rand struct{ state uint64 }

// The purposes of a sample's streams, one each so that enabling one
// transform does not move another's draws.
const (
	streamCrop uint64 = iota + 1
	streamFlip
	streamSegment
)

const golden = 0x9e3779b97f4a7c15

// mix is SplitMix64's finaliser: a bijection of 64 bits that spreads
// every input bit over the output.
func mix(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// fnv64a is the 64-bit FNV-1a hash of s.
func fnv64a(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// Seed is the seed of one sample: a function of the job's seed, the
// epoch the sample was handed out in and its key, and of nothing else.
func Seed(seed uint64, epoch int, key string) uint64 {
	z := mix(seed + golden)
	z = mix(z ^ (uint64(epoch) + golden))
	return mix(z ^ fnv64a(key))
}

// stream returns the generator of one purpose of one picture (index
// counts a document's images; 0 for a clip) of the sample seeded s.
func stream(s uint64, purpose uint64, index int) *Rand {
	return &Rand{state: mix(mix(s^purpose*golden) + uint64(index))}
}

// Uint64 returns the next 64 random bits.
func (r *Rand) Uint64() uint64 {
	r.state += golden
	return mix(r.state)
}

// Intn returns a number in [0, n) (0 when n <= 0), by the high half of a
// 64x64-bit product (bias below 2^-32 for the sizes here).
func (r *Rand) Intn(n int) int {
	if n <= 0 {
		return 0
	}
	hi, _ := bits.Mul64(r.Uint64(), uint64(n))
	return int(hi)
}

// Float64 returns a number in [0, 1) with 53 random bits.
func (r *Rand) Float64() float64 {
	return float64(r.Uint64()>>11) * 0x1p-53
}

// uniform returns a number in [a, b): a + (b-a) u, each operation
// rounded on its own (the explicit conversion forbids a fused
// multiply-add, which would round once and differ by platform).
func (r *Rand) uniform(a, b float64) float64 {
	return float64((b-a)*r.Float64()) + a
}

// logUniform returns a number in [a, b] whose logarithm is uniform:
// a (b/a)^u. The power is a product of repeated square roots of b/a, one
// per bit of u's 24 bits, so only correctly rounded operations are used
// (math.Exp and math.Log differ by platform).
func (r *Rand) logUniform(a, b float64) float64 {
	u := r.Uint64() >> 40 // 24 bits
	q := b / a
	p := 1.0
	for k := 23; k >= 0; k-- {
		q = math.Sqrt(q) // (b/a)^(2^-(24-k))
		if u>>uint(k)&1 != 0 {
			p = float64(p * q)
		}
	}
	return float64(a * p)
}
