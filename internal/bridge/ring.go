package bridge

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Ring is the shared memory that batches travel in: Slots slots of
// SlotBytes each, in a memfd that the client maps once. The memfd has no
// name on any file system and goes when both sides have closed it.
type Ring struct {
	fd        int
	mem       []byte
	Slots     int
	SlotBytes int64
}

// NewRing makes a ring of slots slots that each hold slotBytes (rounded
// up to whole pages, so that every slot starts page-aligned, as
// cudaHostRegister and DMA like it). The pages are touched only as
// batches fill them.
func NewRing(slots int, slotBytes int64) (*Ring, error) {
	if slots < 2 {
		return nil, fmt.Errorf("bridge: a ring of %d slots: want at least 2", slots)
	}
	page := int64(os.Getpagesize())
	slotBytes = (max(slotBytes, 1) + page - 1) / page * page
	size := int64(slots) * slotBytes
	fd, err := unix.MemfdCreate("datahelix-ring", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("bridge: memfd_create: %w", err)
	}
	if err := unix.Ftruncate(fd, size); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("bridge: size the ring to %d bytes: %w", size, err)
	}
	mem, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("bridge: map the ring (%d bytes): %w", size, err)
	}
	return &Ring{fd: fd, mem: mem, Slots: slots, SlotBytes: slotBytes}, nil
}

// FD is the memfd, to pass to the client.
func (r *Ring) FD() int { return r.fd }

// Bytes is the ring's size.
func (r *Ring) Bytes() int64 { return int64(r.Slots) * r.SlotBytes }

// Offset is where slot i starts.
func (r *Ring) Offset(i int) int64 { return int64(i) * r.SlotBytes }

// Close unmaps the ring and closes its memfd; the memory goes once the
// client has unmapped it too.
func (r *Ring) Close() error {
	err := unix.Munmap(r.mem)
	if cerr := unix.Close(r.fd); err == nil {
		err = cerr
	}
	return err
}

// Input is one sample to put in the ring: its tensors' bytes (the
// pixels, in order, which the ring lays end to end), its audio and its
// text.
type Input struct {
	Key    string
	Kind   Kind
	Shape  [4]uint32
	Pixels [][]byte
	Text   string
	Tokens int
	Owner  int
	ID     uint64
	// Audio is the sample's float32 PCM, little-endian, [AudioChannels,
	// len/4/AudioChannels] channel-major, at AudioRate Hz; AudioFlags as
	// Sample's.
	Audio         []byte
	AudioChannels int
	AudioRate     int
	AudioFlags    uint32
}

// AudioAlign is the alignment of every sample's audio in the ring, so
// that a client views it as float32 (and copies it with vector loads).
const AudioAlign = 64

// Need is the slot bytes that samples take.
func Need(samples []Input) int64 {
	var n int64
	for _, s := range samples {
		for _, p := range s.Pixels {
			n += int64(len(p))
		}
		n += int64(len(s.Text))
		if len(s.Audio) > 0 {
			n += int64(len(s.Audio)) + AudioAlign - 1
		}
	}
	return n
}

// Fill writes samples into slot i: every sample's pixels end to end from
// the slot's start, in order (so that samples of one shape form one
// [B,N,H,W,C] array), then their audio, each at a multiple of
// AudioAlign from the ring's start (end to end when their sizes are
// multiples of it), then their texts. It returns the samples' entries
// for the BATCH message.
func (r *Ring) Fill(i int, samples []Input) ([]Sample, error) {
	if need := Need(samples); need > r.SlotBytes {
		return nil, fmt.Errorf("bridge: a batch of %d bytes does not fit a ring slot of %d (raise --ring-slot-mib)", need, r.SlotBytes)
	}
	base := r.Offset(i)
	slot := r.mem[base : base+r.SlotBytes]
	out := make([]Sample, len(samples))
	at := int64(0)
	for j, s := range samples {
		e := &out[j]
		e.PixelsOff = uint64(base + at)
		for _, p := range s.Pixels {
			at += int64(copy(slot[at:], p))
		}
		e.PixelsLen = uint64(base+at) - e.PixelsOff
		e.Kind, e.Shape, e.Key = s.Kind, s.Shape, s.Key
		e.Tokens, e.Owner, e.ID = uint32(min(max(s.Tokens, 0), 1<<32-1)), uint32(s.Owner), s.ID
	}
	for j, s := range samples {
		e := &out[j]
		if s.AudioChannels <= 0 {
			continue
		}
		at = (base+at+AudioAlign-1)/AudioAlign*AudioAlign - base
		e.AudioOff = uint64(base + at)
		e.AudioLen = uint64(copy(slot[at:], s.Audio))
		at += int64(len(s.Audio))
		e.AudioChannels, e.AudioSamples = uint32(s.AudioChannels), uint32(len(s.Audio)/4/s.AudioChannels)
		e.AudioRate, e.AudioFlags = uint32(s.AudioRate), s.AudioFlags
	}
	for j, s := range samples {
		out[j].TextOff = uint64(base + at)
		out[j].TextLen = uint32(copy(slot[at:], s.Text))
		at += int64(len(s.Text))
	}
	return out, nil
}

// Read returns n bytes of the ring at off (tests and Go clients).
func (r *Ring) Read(off, n uint64) []byte { return r.mem[off : off+n] }
