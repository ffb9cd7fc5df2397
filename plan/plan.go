package plan

import "slices"

// Plan is the planner's decision for one batch, identical on every rank
// that computed it from the same input.
type Plan struct {
	Step  int64
	Mode  Mode
	Ranks int // N
	Batch int // B

	// Assign[k] is the rank that decodes and trains on Input.Samples[k].
	// Every rank is assigned exactly Batch samples.
	Assign []int32
	// Order[r*Batch : (r+1)*Batch] are the indices of the samples rank r
	// decodes, in decode order: largest estimated cost first, ties by
	// sample id.
	Order []int32

	// Finish[r] is rank r's predicted finish, µs from the instant the
	// progress was measured: Backlog + ceil(work*One/Capacity), where work
	// is the summed cost of its samples. It is computed with the model the
	// mode plans with (ModeStatic: no backlog, capacity One).
	Finish []int64
	// Lateness[r] is max(0, Finish[r]-Deadline[r]) under the same model.
	Lateness []int64

	LateRanks   int   // ranks with Finish > Deadline
	MaxLateness int64 // largest Lateness
	// MaxExcess is the largest Finish-Deadline; negative when every rank
	// has slack. With equal deadlines it is the makespan minus the
	// deadline.
	MaxExcess int64
	Makespan  int64 // largest Finish

	Moved      int   // samples decoded away from their owner
	BytesMoved int64 // their compressed bytes
	// Moves lists one entry per (source, destination) pair that exchanges
	// samples, sorted by source then destination: one message each.
	Moves []Move
	// Exchanges lists the swaps the planner made, in the order it made
	// them, with the gain and transfer cost that justified each.
	Exchanges []Exchange

	// Hash is a 64-bit digest of the step, mode, shape, decode orders and
	// predicted finishes. Ranks compare it to detect divergent plans.
	Hash uint64

	recv           []Move  // Moves sorted by destination then source
	sendAt, recvAt []int32 // per-rank offsets into Moves and recv
	moveSamples    []int32 // backing array of Move.Samples
}

// Move is the set of samples one rank sends to another.
type Move struct {
	Src, Dst int
	Bytes    int64 // total compressed bytes, the message length
	// Samples are indices into Input.Samples, ascending: the order in
	// which the sender packs them into the message and the receiver
	// unpacks them. They are Src's own samples, so ascending index is the
	// sender's own record order.
	Samples []int32
}

// Exchange is one swap the planner made: sample A went from rank From to
// rank To and sample B from To to From, so both ranks keep Batch samples.
type Exchange struct {
	A, B     int32 // sample indices
	From, To int32
	// Gain is the reduction, in µs, of the pair's lateness: the larger
	// lateness of the two ranks before the exchange minus after. It is
	// positive except for a relocation of a huge sample, which the
	// planner makes only when transfers are free (see ModeOracle) and
	// keeps only if later exchanges make it pay.
	Gain int64
	// Cost is the change in predicted transfer time, µs, summed over A
	// and B (negative when a sample goes back to its owner). Under
	// ModeHelix an exchange that sends a sample away from its owner was
	// made only if Gain > Cost + Margin, unless TrainGain is set.
	Cost int64
	// TrainGain is set by the last phase, which evens out the ranks' GPU
	// work once every rank is on time: the GPU time, ns per step, the
	// pair's more loaded rank saves. Gain is then 0 and the gate does not
	// apply: the exchange keeps both ranks' excess, with the arrival time
	// of the sample each receives under ModeHelix, within a level (see the
	// package doc's objective).
	TrainGain int64
}

// Sends returns the moves whose source is rank r, by destination.
func (p *Plan) Sends(r int) []Move {
	if r < 0 || r >= len(p.sendAt)-1 {
		return nil
	}
	return p.Moves[p.sendAt[r]:p.sendAt[r+1]]
}

// Receives returns the moves whose destination is rank r, by source.
func (p *Plan) Receives(r int) []Move {
	if r < 0 || r >= len(p.recvAt)-1 {
		return nil
	}
	return p.recv[p.recvAt[r]:p.recvAt[r+1]]
}

// DecodeOrder returns the indices of the samples rank r decodes, in
// order.
func (p *Plan) DecodeOrder(r int) []int32 {
	if r < 0 || r >= p.Ranks {
		return nil
	}
	return p.Order[r*p.Batch : (r+1)*p.Batch]
}

// buildMoves fills Moves, recv and the offsets from Assign. Samples are
// visited in index order, which is owner order, so each source's moves
// come out contiguous; within a source they are ordered by destination
// and then index. size[k] is Samples[k].Bytes.
func (p *Plan) buildMoves(size []int64) {
	n, b := p.Ranks, p.Batch
	p.Moves, p.moveSamples = p.Moves[:0], p.moveSamples[:0]
	p.Moved, p.BytesMoved = 0, 0
	p.sendAt, p.recvAt = grow(p.sendAt, n+1), grow(p.recvAt, n+1)
	clear(p.recvAt)
	for src := range n {
		p.sendAt[src] = int32(len(p.Moves))
		start := len(p.moveSamples)
		for k := src * b; k < (src+1)*b; k++ {
			if int(p.Assign[k]) != src {
				p.moveSamples = append(p.moveSamples, int32(k))
			}
		}
		out := p.moveSamples[start:]
		if len(out) <= 32 {
			// A source sends a few samples: an insertion sort, without
			// the library sort's overhead. (dst, index) is a total
			// order, so either sort gives the same result.
			for i := 1; i < len(out); i++ {
				x := out[i]
				j := i
				for ; j > 0 && (p.Assign[out[j-1]] > p.Assign[x] || p.Assign[out[j-1]] == p.Assign[x] && out[j-1] > x); j-- {
					out[j] = out[j-1]
				}
				out[j] = x
			}
		} else {
			slices.SortFunc(out, func(x, y int32) int {
				if dx, dy := p.Assign[x], p.Assign[y]; dx != dy {
					return int(dx - dy)
				}
				return int(x - y)
			})
		}
		for i := 0; i < len(out); {
			dst := int(p.Assign[out[i]])
			j, bytes := i, int64(0)
			for ; j < len(out) && int(p.Assign[out[j]]) == dst; j++ {
				bytes += size[out[j]]
			}
			p.Moves = append(p.Moves, Move{Src: src, Dst: dst, Bytes: bytes})
			p.recvAt[dst+1]++
			p.Moved += j - i
			p.BytesMoved += bytes
			i = j
		}
	}
	p.sendAt[n] = int32(len(p.Moves))
	// The Samples slices are cut only now: appending may have moved the
	// backing array.
	off := 0
	for i := range p.Moves {
		m := &p.Moves[i]
		start := off
		for off < len(p.moveSamples) && int(p.Assign[p.moveSamples[off]]) == m.Dst && int(p.moveSamples[off])/b == m.Src {
			off++
		}
		m.Samples = p.moveSamples[start:off:off]
	}
	// Counting sort by destination; stable, so sources stay ascending.
	// recvAt[r] holds r's start; placing advances it to r's end, and the
	// shift at the end turns ends back into starts.
	for r := range n {
		p.recvAt[r+1] += p.recvAt[r]
	}
	p.recv = grow(p.recv, len(p.Moves))
	for _, m := range p.Moves {
		p.recv[p.recvAt[m.Dst]] = m
		p.recvAt[m.Dst]++
	}
	copy(p.recvAt[1:], p.recvAt[:n])
	p.recvAt[0] = 0
}

// hash digests the plan. It is a multiply-xorshift over 64-bit words:
// not cryptographic, enough to catch ranks whose plans differ.
func (p *Plan) hash() uint64 {
	h := uint64(0x9e3779b97f4a7c15)
	mix := func(w uint64) {
		h ^= w
		h *= 0xff51afd7ed558ccd
		h ^= h >> 33
	}
	mix(uint64(p.Step))
	mix(uint64(p.Mode))
	mix(uint64(p.Ranks))
	mix(uint64(p.Batch))
	for _, k := range p.Order {
		mix(uint64(k))
	}
	for _, f := range p.Finish {
		mix(uint64(f))
	}
	return h
}
