package plan

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// ErrBlock reports bytes that are not a well-formed per-rank block.
var ErrBlock = errors.New("plan: malformed block")

// blockVersion is the layout version written in every block. A decoder
// refuses any other version.
const blockVersion = 3

// The fixed layout of a block, all integers little-endian:
//
//	offset size field
//	     0    4 magic "DHPB"
//	     4    2 version (blockVersion)
//	     6    1 mode
//	     7    1 flags: bit 0 NoTrain, the other bits zero
//	     8    4 rank
//	    12    4 sample count (the batch size B)
//	    16    8 step
//	    24    8 seed
//	    32    8 margin, µs
//	    40    8 deadline, µs
//	    48    8 backlog, µs
//	    56    8 capacity, fixed-point
//	    64    8 bandwidth, fixed-point bytes/µs
//	    72    8 latency, µs
//	    80    8 node
//	    88    8 bandwidth to other nodes, fixed-point bytes/µs
//	    96    8 latency to other nodes, µs
//	   104 32*B samples: id (8), bytes (8), cost (8), GPU time in ns (8)
//
// Version 2 added the samples' GPU time, version 3 the node and the
// bandwidth and latency to other nodes; older blocks are refused. The
// flags byte was reserved and zero before NoTrain: a decoder of that time
// refuses a block with NoTrain set, as it must.
const (
	blockMagic      = "DHPB"
	blockHeaderSize = 104
	blockSampleSize = 32
)

// flagNoTrain is bit 0 of the flags byte: Params.NoTrain.
const flagNoTrain = 1

// flags is the block's flags byte.
func (b *Block) flags() byte {
	if b.NoTrain {
		return flagNoTrain
	}
	return 0
}

// BlockSize returns the encoded size of a block carrying batch samples;
// every rank's block has this size, so the blocks can be gathered with a
// fixed-size allgather.
func BlockSize(batch int) int { return blockHeaderSize + blockSampleSize*batch }

// Block is what one rank contributes to the allgather: the job parameters
// it was started with, the step, its progress and its own samples.
type Block struct {
	Params
	Step     int64
	Rank     int
	Progress Progress
	// Samples are the rank's B samples in its own order. Their Owner must
	// be Rank; the encoding does not store it.
	Samples []Sample
}

// AppendBlock appends the encoding of b to dst. It refuses (with an error
// wrapping ErrInput) a block the decoder would refuse.
func AppendBlock(dst []byte, b *Block) ([]byte, error) {
	if err := b.check(); err != nil {
		return dst, fmt.Errorf("%w: %v", ErrInput, err)
	}
	for k := range b.Samples {
		if b.Samples[k].Owner != b.Rank {
			return dst, fmt.Errorf("%w: rank %d block: sample %d (id %d) has owner %d", ErrInput, b.Rank, k, b.Samples[k].ID, b.Samples[k].Owner)
		}
	}
	le := binary.LittleEndian
	dst = append(dst, blockMagic...)
	dst = le.AppendUint16(dst, blockVersion)
	dst = append(dst, byte(b.Mode), b.flags())
	dst = le.AppendUint32(dst, uint32(b.Rank))
	dst = le.AppendUint32(dst, uint32(len(b.Samples)))
	for _, v := range [...]int64{b.Step, int64(b.Seed), b.Margin,
		b.Progress.Deadline, b.Progress.Backlog, b.Progress.Capacity,
		b.Progress.Bandwidth, b.Progress.Latency,
		b.Progress.Node, b.Progress.NodeBandwidth, b.Progress.NodeLatency} {
		dst = le.AppendUint64(dst, uint64(v))
	}
	for k := range b.Samples {
		s := &b.Samples[k]
		dst = le.AppendUint64(dst, s.ID)
		dst = le.AppendUint64(dst, uint64(s.Bytes))
		dst = le.AppendUint64(dst, uint64(s.Cost))
		dst = le.AppendUint64(dst, uint64(s.Train))
	}
	return dst, nil
}

// check validates everything but the samples' owners; the error does not
// wrap a sentinel, the caller adds one.
func (b *Block) check() error {
	switch {
	case b.Mode >= numModes:
		return fmt.Errorf("rank %d block: unknown mode %d", b.Rank, uint8(b.Mode))
	case b.Rank < 0 || b.Rank >= maxRanks:
		return fmt.Errorf("rank %d outside [0, %d)", b.Rank, maxRanks)
	case len(b.Samples) < 1 || len(b.Samples) > maxBatch:
		return fmt.Errorf("rank %d block: %d samples outside [1, %d]", b.Rank, len(b.Samples), maxBatch)
	case b.Step < 0:
		return fmt.Errorf("rank %d block: step %d is negative", b.Rank, b.Step)
	case b.Margin < 0 || b.Margin > maxTime:
		return fmt.Errorf("rank %d block: margin %d µs outside [0, %d]", b.Rank, b.Margin, int64(maxTime))
	}
	if err := b.Progress.check(); err != nil {
		return fmt.Errorf("rank %d block: %v", b.Rank, err)
	}
	for k := range b.Samples {
		if err := b.Samples[k].check(); err != nil {
			return fmt.Errorf("rank %d block: sample %d (id %d): %v", b.Rank, k, b.Samples[k].ID, err)
		}
	}
	return nil
}

// decodeBlock decodes one block from data, which must be exactly one block
// long, into b, reusing b.Samples. Malformed bytes and out-of-range values
// give an error wrapping ErrBlock; b is then unspecified.
func decodeBlock(data []byte, b *Block) error {
	if len(data) < blockHeaderSize {
		return fmt.Errorf("%w: %d bytes, shorter than the %d-byte header", ErrBlock, len(data), blockHeaderSize)
	}
	le := binary.LittleEndian
	if string(data[0:4]) != blockMagic {
		return fmt.Errorf("%w: bad magic %q", ErrBlock, data[0:4])
	}
	if v := le.Uint16(data[4:]); v != blockVersion {
		return fmt.Errorf("%w: version %d, want %d", ErrBlock, v, blockVersion)
	}
	if data[7]&^flagNoTrain != 0 {
		return fmt.Errorf("%w: flags byte is %#x, only bit 0 is defined", ErrBlock, data[7])
	}
	rank, count := le.Uint32(data[8:]), le.Uint32(data[12:])
	if count < 1 || count > maxBatch {
		return fmt.Errorf("%w: sample count %d outside [1, %d]", ErrBlock, count, maxBatch)
	}
	if want := BlockSize(int(count)); len(data) != want {
		return fmt.Errorf("%w: %d bytes, want %d for %d samples", ErrBlock, len(data), want, count)
	}
	if rank >= maxRanks {
		return fmt.Errorf("%w: rank %d outside [0, %d)", ErrBlock, rank, maxRanks)
	}
	i64 := func(off int) int64 { return int64(le.Uint64(data[off:])) }
	b.Mode, b.NoTrain = Mode(data[6]), data[7]&flagNoTrain != 0
	b.Rank = int(rank)
	b.Step = i64(16)
	b.Seed = le.Uint64(data[24:])
	b.Margin = i64(32)
	b.Progress = Progress{Deadline: i64(40), Backlog: i64(48), Capacity: i64(56), Bandwidth: i64(64), Latency: i64(72),
		Node: i64(80), NodeBandwidth: i64(88), NodeLatency: i64(96)}
	b.Samples = grow(b.Samples, int(count))
	for i := range b.Samples {
		d := data[blockHeaderSize+i*blockSampleSize:][:blockSampleSize]
		b.Samples[i] = Sample{ID: le.Uint64(d), Owner: b.Rank, Bytes: int64(le.Uint64(d[8:])), Cost: int64(le.Uint64(d[16:])), Train: int64(le.Uint64(d[24:]))}
	}
	if err := b.check(); err != nil {
		return fmt.Errorf("%w: %v", ErrBlock, err)
	}
	return nil
}

// DecodeInput decodes the allgathered buffer — N blocks of equal size in
// rank order — into in, reusing its slices. Every block must name its own
// position as its rank and carry the same step, batch size and parameters
// as block 0; a rank that disagrees is named in the error, which wraps
// ErrBlock. The decoded input is validated as by Input.Validate.
func DecodeInput(buf []byte, in *Input) error {
	table := tables.Get().(*[]uint32)
	var err error
	if *table, err = decodeInput(buf, in, *table); err != nil {
		return err // the table may be lost with the error
	}
	tables.Put(table)
	return nil
}

// decodeInput is DecodeInput with table as the uniqueness check's
// scratch, which it returns for reuse.
func decodeInput(buf []byte, in *Input, table []uint32) ([]uint32, error) {
	var blk Block
	if len(buf) < blockHeaderSize {
		return table, fmt.Errorf("%w: allgathered buffer of %d bytes is shorter than one header", ErrBlock, len(buf))
	}
	count := binary.LittleEndian.Uint32(buf[12:])
	if count < 1 || count > maxBatch {
		return table, fmt.Errorf("%w: rank 0 block: sample count %d outside [1, %d]", ErrBlock, count, maxBatch)
	}
	size := BlockSize(int(count))
	if len(buf)%size != 0 {
		return table, fmt.Errorf("%w: allgathered buffer of %d bytes is not a whole number of %d-byte blocks", ErrBlock, len(buf), size)
	}
	n := len(buf) / size
	if n > maxRanks {
		return table, fmt.Errorf("%w: %d blocks, more than %d ranks", ErrBlock, n, maxRanks)
	}
	c := int(count)
	in.Batch = c
	in.Ranks = in.Ranks[:0]
	in.Samples = slices.Grow(in.Samples[:0], n*c)[:n*c]
	// The ids go into the uniqueness check block by block, while the
	// block's samples are in cache; a duplicate is reported after every
	// block has decoded.
	ids := idSet{table: table}
	ids.reset(n * c)
	for r := range n {
		// decodeBlock appends exactly c samples, in place.
		blk.Samples = in.Samples[r*c : r*c : (r+1)*c]
		if err := decodeBlock(buf[r*size:(r+1)*size], &blk); err != nil {
			return table, fmt.Errorf("rank %d block: %w", r, err)
		}
		if blk.Rank != r {
			return table, fmt.Errorf("%w: block at position %d says it is rank %d", ErrBlock, r, blk.Rank)
		}
		if r == 0 {
			in.Params, in.Step = blk.Params, blk.Step
		} else if blk.Params != in.Params || blk.Step != in.Step {
			return table, fmt.Errorf("%w: rank %d plans step %d with mode %s, seed %d, margin %d µs, no GPU-work phase %v; rank 0 plans step %d with mode %s, seed %d, margin %d µs, no GPU-work phase %v",
				ErrBlock, r, blk.Step, blk.Mode, blk.Seed, blk.Margin, blk.NoTrain, in.Step, in.Mode, in.Seed, in.Margin, in.NoTrain)
		}
		in.Ranks = append(in.Ranks, blk.Progress)
		for k := r * c; k < (r+1)*c; k++ {
			ids.add(in.Samples[k].ID)
		}
	}
	// Every check of Input.Validate but the ids' uniqueness has passed:
	// decodeBlock checked each block's parameters, progress and samples,
	// the sizes and the batch, and the owners are the blocks' positions.
	table, err := in.checkUnique(&ids)
	if err != nil {
		return table, fmt.Errorf("%w: %w", ErrBlock, err)
	}
	return table, nil
}
