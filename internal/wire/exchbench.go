package wire

import (
	"fmt"
	"math"
	"time"

	"github.com/datahelix/datahelix/collective"
	"github.com/datahelix/datahelix/decode"
)

// ExchangeStats is what MeasureExchange measured on rank 0, the sender,
// which waits for each message's acknowledgement.
type ExchangeStats struct {
	Bytes    int64         // bytes of one message
	Messages int           // messages timed per path
	Exchange time.Duration // through the exchange path: lay out, IsendParts, receive, unpack
	Packed   time.Duration // the same, the samples packed into one send buffer first
	Bare     time.Duration // the same bytes with bare Isend/Irecv
}

// exchangePath is one way MeasureExchange moves a message.
type exchangePath int

const (
	pathExchange exchangePath = iota // the loader's: IsendParts of the wire layout
	pathPacked                       // packed into a reused buffer, then Isend
	pathBare                         // prepacked bytes, bare Isend/Irecv
)

// MeasureExchange times moving samples from rank 0 to rank 1, rounds
// times, through the loader's exchange path — samples laid out in the wire
// format as one message sent by IsendParts (their data where it lies,
// unless the message is small; in-process ranks always copy), a receive pre-posted with the exact length, the
// message unpacked into samples on arrival — through the same path with
// the samples packed into one reused send buffer first (as the loader did
// before it sent in place), and through bare non-blocking sends and
// receives of the same bytes, taking the three in turn so that a noisy
// machine disturbs them alike. Each message is acknowledged, so a round
// is a whole transfer. Every rank of comm must call it; ranks other than
// 0 and 1 only take part in the barriers.
func MeasureExchange(comm collective.Comm, samples []*decode.Sample, rounds int) (ExchangeStats, error) {
	if comm.Size() < 2 {
		return ExchangeStats{}, fmt.Errorf("spmd: the exchange measurement needs 2 ranks, have %d", comm.Size())
	}
	var size int64
	for _, s := range samples {
		size += Size(s)
	}
	st := ExchangeStats{Bytes: size, Messages: rounds}
	me := comm.Rank()
	ack := make([]byte, 1)
	recvBuf := make([]byte, size)
	var hdr []byte // reused, as the loader reuses its header buffer
	var parts [][]byte
	sendBuf := make([]byte, 0, size) // reused, as the loader reused its send buffer
	pool := NewPool(PoolLimit, false)
	// one moves one message from rank 0 to rank 1 and back an ack.
	one := func(path exchangePath, packed []byte) error {
		var reqs []*collective.Request
		switch me {
		case 0:
			var r *collective.Request
			var err error
			switch path {
			case pathExchange:
				hdr, parts = hdr[:0], parts[:0]
				for _, s := range samples {
					parts, hdr = AppendParts(parts, hdr, s)
				}
				r, err = comm.IsendParts(parts, 1, 7)
			case pathPacked:
				msg := sendBuf[:0]
				for _, s := range samples {
					msg = Append(msg, s)
				}
				r, err = comm.Isend(msg, 1, 7)
			default:
				r, err = comm.Isend(packed, 1, 7)
			}
			if err != nil {
				return err
			}
			a, err := comm.Irecv(ack, 1, 8)
			if err != nil {
				return err
			}
			reqs = append(reqs, r, a)
		case 1:
			buf := recvBuf
			unpack := path != pathBare
			if unpack {
				// The loader receives into a buffer of its pool, given
				// back once the samples unpacked from it, which alias
				// it, are decoded.
				buf = pool.Get(size)
			}
			r, err := comm.Irecv(buf, 0, 7)
			if err != nil {
				return err
			}
			if err := comm.WaitAll([]*collective.Request{r}); err != nil {
				return err
			}
			if unpack {
				if r.Len() != len(buf) {
					return fmt.Errorf("spmd: exchange measurement: received %d bytes, want %d", r.Len(), len(buf))
				}
				rx := &Buf{data: buf, users: len(samples)}
				rest := buf
				for range samples {
					if _, rest, err = Read(rest); err != nil {
						return err
					}
					rx.Release(pool)
				}
			}
			a, err := comm.Isend(ack, 0, 8)
			if err != nil {
				return err
			}
			reqs = append(reqs, a)
		}
		return comm.WaitAll(reqs)
	}
	var packed []byte
	for _, s := range samples {
		packed = Append(packed, s)
	}
	times := [...]*time.Duration{pathExchange: &st.Exchange, pathPacked: &st.Packed, pathBare: &st.Bare}
	for i := -2; i < rounds; i++ { // two untimed warm-up rounds
		for _, path := range []exchangePath{pathExchange, pathPacked, pathBare} {
			if err := comm.Barrier(); err != nil {
				return st, err
			}
			t0 := time.Now()
			if err := one(path, packed); err != nil {
				return st, err
			}
			if i >= 0 {
				*times[path] += time.Since(t0)
			}
		}
	}
	return st, nil
}

// ExchangeReport is the JSON line of datahelix bench exchange (Report).
type ExchangeReport struct {
	Bytes         int64   `json:"bytes"`
	Samples       int     `json:"samples"`
	Messages      int     `json:"messages"`
	ExchangeUSPer float64 `json:"exchange_us_per_message"`
	// PackedUSPer is the exchange path with the samples packed into one
	// send buffer first, as it was before it sent them in place.
	PackedUSPer      float64 `json:"packed_us_per_message"`
	BareUSPer        float64 `json:"bare_us_per_message"`
	ExchangeMBps     float64 `json:"exchange_mb_per_s"`
	PackedMBps       float64 `json:"packed_mb_per_s"`
	BareMBps         float64 `json:"bare_mb_per_s"`
	ExchangeOnBare   float64 `json:"exchange_over_bare"`
	ExchangeOnPacked float64 `json:"exchange_over_packed"`
}

// Report turns what MeasureExchange measured with messages of samples
// samples into the line datahelix bench exchange prints. The
// figures are rounded to what they can tell, so the JSON line reads
// 12432.3, not 12432.311280768185: times per message to 0.01 µs (at
// least 0.01, keeping the rates finite), rates to 0.1 MB/s, the ratio to
// 0.001. The rates and the ratio are computed from the rounded times, so
// that they follow from the printed figures.
func (st ExchangeStats) Report(samples int) ExchangeReport {
	per := func(d time.Duration) float64 {
		return max(roundTo(float64(d)/float64(st.Messages)/1e3, 100), 0.01)
	}
	g := ExchangeReport{Bytes: st.Bytes, Samples: samples, Messages: st.Messages,
		ExchangeUSPer: per(st.Exchange), PackedUSPer: per(st.Packed), BareUSPer: per(st.Bare)}
	g.ExchangeMBps = roundTo(float64(st.Bytes)/g.ExchangeUSPer, 10)
	g.PackedMBps = roundTo(float64(st.Bytes)/g.PackedUSPer, 10)
	g.BareMBps = roundTo(float64(st.Bytes)/g.BareUSPer, 10)
	g.ExchangeOnBare = roundTo(g.ExchangeUSPer/g.BareUSPer, 1000)
	g.ExchangeOnPacked = roundTo(g.ExchangeUSPer/g.PackedUSPer, 1000)
	return g
}

// roundTo rounds v to the nearest multiple of 1/steps.
// roundTo rounds v to 1/steps.
func roundTo(v, steps float64) float64 { return math.Round(v*steps) / steps }
