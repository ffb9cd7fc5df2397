package plan

import (
	"errors"
	"fmt"
	"sync"

	"github.com/datahelix/datahelix/internal/planlimits"
)

// One is the fixed-point scale of Progress.Capacity and
// Progress.Bandwidth: a value of One means 1.0.
const One = 1 << oneBits

const oneBits = 16

// The limits on the input (internal/planlimits holds their values, which
// Input.Validate states).
const (
	maxRanks     = planlimits.Ranks
	maxBatch     = planlimits.Batch
	maxCost      = planlimits.Cost
	maxBytes     = planlimits.Bytes
	maxTime      = planlimits.Time
	maxCapacity  = planlimits.Capacity
	maxBandwidth = planlimits.Bandwidth
	maxLatency   = planlimits.Latency
	maxTrain     = planlimits.Train
)

// ErrInput reports an input the planner refuses: a value out of range, a
// zero capacity, a sample in the wrong place. The wrapping error names the
// rank or sample.
var ErrInput = errors.New("plan: invalid input")

// Mode selects the planning policy. It is part of the input, so every rank
// plans with the same policy or the plan hashes differ.
type Mode uint8

// The planning modes. The zero value is the full system.
const (
	// ModeHelix pre-balances with deadlines, backlogs and measured speeds,
	// and moves a sample only if the exchange passes the transfer-cost gate.
	ModeHelix Mode = iota
	// ModeHelixNoGate is ModeHelix without the gate: transfers are treated
	// as free.
	ModeHelixNoGate
	// ModeStatic balances estimated cost from the records alone, as a
	// cost-aware load-balancing sampler would: every rank is taken to have
	// deadline 0, no backlog and capacity One, and transfers are free.
	ModeStatic
	// ModeOracle is the simulator's lower bound: the caller passes true
	// costs and progress, and transfers are treated as free.
	ModeOracle
	// ModeLocal moves nothing: every sample stays with its owner. It gives
	// the rank-local baselines the same decode order and predictions.
	ModeLocal
	numModes
)

var modeNames = [numModes]string{"helix", "helix-nogate", "static", "oracle", "local"}

// String returns the name used in flags and tables.
func (m Mode) String() string {
	if m < numModes {
		return modeNames[m]
	}
	return fmt.Sprintf("mode(%d)", uint8(m))
}

// parseMode returns the mode named s ("helix", "helix-nogate", "static",
// "oracle" or "local").
func parseMode(s string) (Mode, error) {
	for m, name := range modeNames {
		if s == name {
			return Mode(m), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown mode %q (want helix, helix-nogate, static, oracle or local)", ErrInput, s)
}

// gated reports whether the mode applies the transfer-cost gate.
func (m Mode) gated() bool { return m == ModeHelix }

// Params are the job-wide planning parameters. Every rank builds them from
// the same flags; each rank's block carries them so that a rank started
// with different flags is caught when the blocks are decoded.
type Params struct {
	Mode Mode
	// Seed is the job's seed. The planner draws no random numbers today;
	// the seed is carried so that a randomized policy stays reproducible.
	Seed uint64
	// Margin is the extra gain, in µs, an exchange must show beyond its
	// transfer time before the gate lets a sample leave its owner.
	Margin int64
	// NoTrain leaves out the planner's last phase, which evens out the
	// ranks' GPU work (Sample.Train): the ablation that tells cross-rank
	// decode balancing from GPU-work balancing (the helix-notrain loader).
	NoTrain bool
}

// Progress is what one rank reports about itself for the batch being
// planned. Times are µs measured from the same instant (when the rank built
// its block).
type Progress struct {
	// Deadline is the time until this rank's GPU needs the batch.
	Deadline int64
	// Backlog is the wall time, on this rank's CPUs, of decode work
	// already queued ahead of this batch.
	Backlog int64
	// Capacity is decode workers times measured speed relative to the
	// reference CPU, fixed-point (One = one reference CPU). A sample of
	// estimated cost c µs takes c*One/Capacity µs of this rank's wall time.
	// Must be positive.
	Capacity int64
	// Bandwidth is the measured exchange bandwidth, fixed-point bytes/µs
	// (One = 1 byte/µs, so 10 GB/s is 10_000*One). Must be positive.
	Bandwidth int64
	// Latency is the measured per-message latency in µs.
	Latency int64
	// Node is the rank's node: ranks with the same Node exchange samples
	// through Bandwidth and Latency (memory, on one host), ranks of
	// different nodes through NodeBandwidth and NodeLatency (the
	// network). A one-node job leaves it 0 on every rank.
	Node int64
	// NodeBandwidth is the measured bandwidth of this rank's transfers
	// to and from other nodes, fixed-point bytes/µs; 0 means unknown,
	// taken as Bandwidth.
	NodeBandwidth int64
	// NodeLatency is the measured per-message latency to other nodes in
	// µs; 0 means unknown, taken as Latency.
	NodeLatency int64
}

// Sample is the planner's view of one sample's lightweight record.
type Sample struct {
	ID    uint64 // globally unique
	Owner int    // rank that read the sample and holds its compressed bytes
	Bytes int64  // compressed size
	Cost  int64  // estimated preparation cost, µs of reference CPU
	// Train is the GPU time, in nanoseconds (a text sample's can be a
	// fraction of a µs), the sample adds to the training step of the rank
	// that trains it; 0 when unknown. A lockstep step lasts as long as its
	// slowest GPU, so once every rank is on time the planner evens these
	// out (see the package doc).
	Train int64
}

// Input is everything the planner sees, identical on every rank.
type Input struct {
	Params
	Step  int64 // training step the batch belongs to
	Batch int   // B: samples each rank owns and each rank trains on
	// Ranks holds one Progress per rank; N = len(Ranks).
	Ranks []Progress
	// Samples holds N*Batch samples in canonical order: rank r's own
	// samples are Samples[r*Batch : (r+1)*Batch], so Samples[k].Owner is
	// k/Batch.
	Samples []Sample
}

// Validate checks the input against the planner's limits and returns an
// error wrapping ErrInput that names the first offending rank or sample.
// The limits keep every intermediate product inside int64 with room to
// spare and are far above anything a real job produces: at most 2^16
// ranks (and nodes numbered below that) and a batch of at most 2^12;
// per sample at most 2^34 compressed bytes (16 GiB), a cost of 2^32 µs of
// reference CPU (about 71 minutes) and a GPU time of 2^40 ns (about 18
// minutes); deadlines, backlogs and the gate margin at most 2^40 µs
// (about 12 days); a capacity of at most 2^32 (65,536 reference CPUs in
// fixed point), a bandwidth of at most 2^44 (2^28 bytes/µs, about 268
// TB/s) and a latency of at most 2^32 µs per message. Sample ids must be
// unique.
func (in *Input) Validate() error {
	t := tables.Get().(*[]uint32)
	var err error
	*t, err = in.validate(*t)
	tables.Put(t)
	return err
}

// tables holds the hash tables (*[]uint32) of the uniqueness checks made
// without a Planner's scratch (Validate, DecodeInput): at scale a table
// is a megabyte, which allocating and zeroing every step would cost more
// than the check. idSet.reset clears a table before use, so which one it
// gets changes nothing.
var tables = sync.Pool{New: func() any { return new([]uint32) }}

func (in *Input) validate(scratch []uint32) ([]uint32, error) {
	return in.validateInto(scratch, nil, nil)
}

// validateInto is validate that also copies, when cost and size are not
// nil, every sample's Cost and Bytes into them (resized), in the pass
// that checks the samples: at scale a pass over the samples reads
// megabytes.
func (in *Input) validateInto(scratch []uint32, cost, size *[]int64) ([]uint32, error) {
	n, b := len(in.Ranks), in.Batch
	if in.Mode >= numModes {
		return scratch, fmt.Errorf("%w: unknown mode %d", ErrInput, uint8(in.Mode))
	}
	if in.Margin < 0 || in.Margin > maxTime {
		return scratch, fmt.Errorf("%w: margin %d µs outside [0, %d]", ErrInput, in.Margin, int64(maxTime))
	}
	if in.Step < 0 {
		return scratch, fmt.Errorf("%w: step %d is negative", ErrInput, in.Step)
	}
	if n < 1 || n > maxRanks {
		return scratch, fmt.Errorf("%w: %d ranks outside [1, %d]", ErrInput, n, maxRanks)
	}
	if b < 1 || b > maxBatch {
		return scratch, fmt.Errorf("%w: batch %d outside [1, %d]", ErrInput, b, maxBatch)
	}
	if len(in.Samples) != n*b {
		return scratch, fmt.Errorf("%w: %d samples, want ranks*batch = %d*%d = %d", ErrInput, len(in.Samples), n, b, n*b)
	}
	for r := range in.Ranks {
		if err := in.Ranks[r].check(); err != nil {
			return scratch, fmt.Errorf("%w: rank %d: %v", ErrInput, r, err)
		}
	}
	// The ids go into the uniqueness table in the same pass as the other
	// checks, which at scale read megabytes; a duplicate is reported
	// only once every other check has passed.
	ids := idSet{table: scratch}
	ids.reset(len(in.Samples))
	var costs, sizes []int64
	if cost != nil {
		*cost, *size = grow(*cost, len(in.Samples)), grow(*size, len(in.Samples))
		costs, sizes = *cost, *size
	}
	for k := range in.Samples {
		s := &in.Samples[k]
		if costs != nil {
			costs[k], sizes[k] = s.Cost, s.Bytes
		}
		if s.Owner != k/b {
			return ids.table, fmt.Errorf("%w: sample %d (id %d) has owner %d, want %d (rank r's samples are [r*batch, (r+1)*batch))", ErrInput, k, s.ID, s.Owner, k/b)
		}
		if err := s.check(); err != nil {
			return ids.table, fmt.Errorf("%w: sample %d (id %d, rank %d): %v", ErrInput, k, s.ID, s.Owner, err)
		}
		ids.add(s.ID)
	}
	return in.checkUnique(&ids)
}

// idSet finds a sample id that appears twice: reset, then add every
// sample's id in order, then checkUnique. It inserts the ids into an
// open-addressing hash table (reused): linear in the number of samples,
// where sorting the ids would cost G log G. Only lookups are made, so the
// result does not depend on any iteration order but the samples'.
//
// The table holds 32 bits of each id's mix64 (a bijection), the bits
// that do not choose its slot, so that a probe compares with the table
// alone and never reads the samples, scattered over megabytes at scale.
// Equal fingerprints mean the same id or, about once in 2^32 probes, two
// ids that share them: checkUniqueExact then decides.
type idSet struct {
	table []uint32
	mask  uint64
	dup   bool // a fingerprint was added twice
}

// reset empties the set, sized for g ids.
func (u *idSet) reset(g int) {
	u.table, u.mask = uniqueTable(u.table, g)
	u.dup = false
}

// add adds an id.
func (u *idSet) add(id uint64) {
	m := mix64(id)
	fp := max(uint32(m>>32), 1) // 0 marks an empty slot
	for h := m & u.mask; ; h = (h + 1) & u.mask {
		if u.table[h] == 0 {
			u.table[h] = fp
			return
		}
		if u.table[h] == fp {
			u.dup = true
			return
		}
	}
}

// checkUnique reports a sample id that appears twice, once ids holds
// every sample's id, and returns ids' table for reuse.
func (in *Input) checkUnique(ids *idSet) ([]uint32, error) {
	if !ids.dup {
		return ids.table, nil
	}
	return in.checkUniqueExact(ids.table)
}

// uniqueTable returns scratch as an empty table for g ids, at most half
// full, and the mask of its size.
func uniqueTable(scratch []uint32, g int) ([]uint32, uint64) {
	size := 1
	for size < 2*g {
		size <<= 1
	}
	table := grow(scratch, size)
	clear(table)
	return table, uint64(size - 1)
}

// checkUniqueExact is checkUnique comparing the ids themselves: each
// slot holds a sample index + 1.
func (in *Input) checkUniqueExact(scratch []uint32) ([]uint32, error) {
	table, mask := uniqueTable(scratch, len(in.Samples))
	for k := range in.Samples {
		id := in.Samples[k].ID
		for h := mix64(id) & mask; ; h = (h + 1) & mask {
			if table[h] == 0 {
				table[h] = uint32(k) + 1
				break
			}
			if in.Samples[table[h]-1].ID == id {
				return table, fmt.Errorf("%w: sample id %d appears twice (samples %d and %d)", ErrInput, id, table[h]-1, k)
			}
		}
	}
	return table, nil
}

// mix64 is the splitmix64 finalizer: a bijection that spreads the bits of
// an id over the whole word. The planner hashes sample ids with it.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// check reports the first field of p outside its range.
func (p *Progress) check() error {
	switch {
	case p.Deadline < 0 || p.Deadline > maxTime:
		return fmt.Errorf("deadline %d µs outside [0, %d]", p.Deadline, int64(maxTime))
	case p.Backlog < 0 || p.Backlog > maxTime:
		return fmt.Errorf("backlog %d µs outside [0, %d]", p.Backlog, int64(maxTime))
	case p.Capacity < 1 || p.Capacity > maxCapacity:
		return fmt.Errorf("capacity %d outside [1, %d] (fixed-point, %d = 1.0)", p.Capacity, int64(maxCapacity), One)
	case p.Bandwidth < 1 || p.Bandwidth > maxBandwidth:
		return fmt.Errorf("bandwidth %d outside [1, %d] (fixed-point bytes/µs, %d = 1 byte/µs)", p.Bandwidth, int64(maxBandwidth), One)
	case p.Latency < 0 || p.Latency > maxLatency:
		return fmt.Errorf("latency %d µs outside [0, %d]", p.Latency, int64(maxLatency))
	case p.Node < 0 || p.Node >= maxRanks:
		return fmt.Errorf("node %d outside [0, %d)", p.Node, int64(maxRanks))
	case p.NodeBandwidth < 0 || p.NodeBandwidth > maxBandwidth:
		return fmt.Errorf("bandwidth to other nodes %d outside [0, %d] (fixed-point bytes/µs, %d = 1 byte/µs; 0: unknown)", p.NodeBandwidth, int64(maxBandwidth), One)
	case p.NodeLatency < 0 || p.NodeLatency > maxLatency:
		return fmt.Errorf("latency to other nodes %d µs outside [0, %d]", p.NodeLatency, int64(maxLatency))
	}
	return nil
}

// path returns the bandwidth and latency of transfers from a rank with
// progress p to one with progress q: the slower of the two ends', over
// memory when they share a node and over the network otherwise.
func (p *Progress) path(q *Progress) (bandwidth, latency int64) {
	if p.Node == q.Node {
		return min(p.Bandwidth, q.Bandwidth), max(p.Latency, q.Latency)
	}
	return min(p.nodeBandwidth(), q.nodeBandwidth()), max(p.nodeLatency(), q.nodeLatency())
}

func (p *Progress) nodeBandwidth() int64 {
	if p.NodeBandwidth > 0 {
		return p.NodeBandwidth
	}
	return p.Bandwidth
}

func (p *Progress) nodeLatency() int64 {
	if p.NodeLatency > 0 {
		return p.NodeLatency
	}
	return p.Latency
}

// check reports the first field of s outside its range.
func (s *Sample) check() error {
	switch {
	case s.Bytes < 0 || s.Bytes > maxBytes:
		return fmt.Errorf("size %d bytes outside [0, %d]", s.Bytes, int64(maxBytes))
	case s.Cost < 0 || s.Cost > maxCost:
		return fmt.Errorf("cost %d µs outside [0, %d]", s.Cost, int64(maxCost))
	case s.Train < 0 || s.Train > maxTrain:
		return fmt.Errorf("GPU time %d ns outside [0, %d]", s.Train, int64(maxTrain))
	}
	return nil
}
