package bridge

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
)

// Protocol is the version of the layout in docs/bridge.md. A client of
// another version is refused in the handshake, with both named.
const Protocol = 1

// Magic starts every message: the bytes "DHX1".
const Magic uint32 = 0x31584844

// HeaderSize is the size of every message's header.
const HeaderSize = 16

// MaxMessage bounds a message either side reads: a BATCH of the largest
// batch (planlimits.Batch samples) with long keys fits with room to spare.
const MaxMessage = 4 << 20

// Type is a message's type.
type Type uint16

// The message types (docs/bridge.md).
const (
	TypeHello   Type = 1 // client → server, JSON
	TypeWelcome Type = 2 // server → client, JSON and the ring's memfd
	TypeRefuse  Type = 3 // server → client, UTF-8 reason
	TypeNext    Type = 4 // client → server, Next
	TypeBatch   Type = 5 // server → client, BatchMsg
	TypeEnd     Type = 6 // server → client, the steps delivered
	TypeError   Type = 7 // server → client, UTF-8 reason
	TypeRelease Type = 8 // client → server, release_below
	TypeBye     Type = 9 // client → server, empty
)

// String names the type as docs/bridge.md does.
func (t Type) String() string {
	names := [...]string{"", "HELLO", "WELCOME", "REFUSE", "NEXT", "BATCH", "END", "ERROR", "RELEASE", "BYE"}
	if int(t) < len(names) && t != 0 {
		return names[t]
	}
	return fmt.Sprintf("type %d", uint16(t))
}

// ErrMessage matches every malformed message: a bad magic, a length that
// disagrees with the packet, a payload of the wrong size for its type.
var ErrMessage = errors.New("bridge: malformed message")

// Message is one decoded packet: its type and payload.
type Message struct {
	Type    Type
	Payload []byte
}

// AppendHeader appends the header of a message of type t with a payload
// of n bytes.
func AppendHeader(b []byte, t Type, n int) []byte {
	b = binary.LittleEndian.AppendUint32(b, Magic)
	b = binary.LittleEndian.AppendUint16(b, uint16(t))
	b = binary.LittleEndian.AppendUint16(b, 0)
	b = binary.LittleEndian.AppendUint32(b, uint32(n))
	return binary.LittleEndian.AppendUint32(b, 0)
}

// Encode returns the packet of a message: header and payload.
func Encode(t Type, payload []byte) []byte {
	return append(AppendHeader(make([]byte, 0, HeaderSize+len(payload)), t, len(payload)), payload...)
}

// Decode parses one packet, checking the magic and that the header's
// length is the packet's.
func Decode(p []byte) (Message, error) {
	if len(p) < HeaderSize {
		return Message{}, fmt.Errorf("%w: %d bytes, shorter than a header", ErrMessage, len(p))
	}
	if m := binary.LittleEndian.Uint32(p); m != Magic {
		return Message{}, fmt.Errorf("%w: magic %#08x, want %#08x (not a datahelix client?)", ErrMessage, m, Magic)
	}
	t := Type(binary.LittleEndian.Uint16(p[4:]))
	n := binary.LittleEndian.Uint32(p[8:])
	if int64(n) != int64(len(p)-HeaderSize) {
		return Message{}, fmt.Errorf("%w: %s says %d payload bytes, the packet has %d", ErrMessage, t, n, len(p)-HeaderSize)
	}
	return Message{Type: t, Payload: p[HeaderSize:]}, nil
}

// Hello is the client's first message.
type Hello struct {
	Protocol int    `json:"protocol"`
	Client   string `json:"client"` // e.g. "datahelix-python 0.1.0"
	Job      string `json:"job"`
	Rank     int    `json:"rank"`
	PID      int    `json:"pid"`
	CUDA     bool   `json:"cuda"`
	// Resume is a loader state the client got from an earlier run
	// (Loader.state_dict()), or null to start at step 0. The server's
	// loader reads it (spmd.Config.Restore).
	Resume json.RawMessage `json:"resume"`
}

// ParseHello decodes a HELLO payload.
func ParseHello(p []byte) (Hello, error) {
	var h Hello
	if err := json.Unmarshal(p, &h); err != nil {
		return h, fmt.Errorf("%w: HELLO: %v", ErrMessage, err)
	}
	if h.Protocol <= 0 {
		return h, fmt.Errorf("%w: HELLO without a protocol version", ErrMessage)
	}
	return h, nil
}

// Welcome is the server's answer to a HELLO it accepts.
type Welcome struct {
	Protocol  int    `json:"protocol"`
	Server    string `json:"server"`
	Job       string `json:"job"`
	Rank      int    `json:"rank"`
	WorldSize int    `json:"world_size"`
	Batch     int    `json:"batch"`
	// Steps is the last step plus one; 0 serves until the client stops.
	Steps     int64 `json:"steps"`
	FirstStep int64 `json:"first_step"`
	Frames    int   `json:"frames"`
	Size      int   `json:"size"`
	// AudioRate and AudioChannels are the audio output's (0 when off):
	// then every BATCH carries an audio table.
	AudioRate     int   `json:"audio_rate,omitempty"`
	AudioChannels int   `json:"audio_channels,omitempty"`
	Slots         int   `json:"slots"`
	SlotBytes     int64 `json:"slot_bytes"`
	RingBytes     int64 `json:"ring_bytes"`
	// State is the loader's state at FirstStep (spmd.Loader.State): the
	// identity of the sample stream, which the client's state_dict
	// returns with the step it reached.
	State json.RawMessage `json:"state"`
}

// Next is the client's request for a batch.
type Next struct {
	Step int64
	// GPUStepUS is the GPU time of the previous step, µs, measured with
	// CUDA events; -1 when not measured.
	GPUStepUS int64
	// ReleaseBelow releases every batch of an earlier step.
	ReleaseBelow int64
}

// NextSize is the payload size of a NEXT.
const NextSize = 24

// Encode returns the NEXT packet.
func (n Next) Encode() []byte {
	b := AppendHeader(make([]byte, 0, HeaderSize+NextSize), TypeNext, NextSize)
	b = binary.LittleEndian.AppendUint64(b, uint64(n.Step))
	b = binary.LittleEndian.AppendUint64(b, uint64(n.GPUStepUS))
	return binary.LittleEndian.AppendUint64(b, uint64(n.ReleaseBelow))
}

// ParseNext decodes a NEXT payload.
func ParseNext(p []byte) (Next, error) {
	if len(p) != NextSize {
		return Next{}, fmt.Errorf("%w: NEXT of %d bytes, want %d", ErrMessage, len(p), NextSize)
	}
	n := Next{
		Step:         int64(binary.LittleEndian.Uint64(p)),
		GPUStepUS:    int64(binary.LittleEndian.Uint64(p[8:])),
		ReleaseBelow: int64(binary.LittleEndian.Uint64(p[16:])),
	}
	if n.Step < 0 {
		return n, fmt.Errorf("%w: NEXT for step %d", ErrMessage, n.Step)
	}
	return n, nil
}

// ParseRelease decodes a RELEASE payload: release_below.
func ParseRelease(p []byte) (int64, error) {
	if len(p) != 8 {
		return 0, fmt.Errorf("%w: RELEASE of %d bytes, want 8", ErrMessage, len(p))
	}
	return int64(binary.LittleEndian.Uint64(p)), nil
}

// EncodeInt64 returns a packet of type t whose payload is v (END,
// RELEASE).
func EncodeInt64(t Type, v int64) []byte {
	return binary.LittleEndian.AppendUint64(AppendHeader(nil, t, 8), uint64(v))
}

// Kind is a sample's kind on the wire: decode.Modality's numbering.
type Kind uint8

// The kinds.
const (
	KindText     Kind = 1
	KindImage    Kind = 2
	KindVideo    Kind = 3
	KindDocument Kind = 4
	KindAudio    Kind = 5
)

// Sample is one sample of a BATCH: where its pixels and text lie in the
// ring and what it is.
type Sample struct {
	PixelsOff, PixelsLen uint64
	TextOff              uint64
	TextLen              uint32
	Kind                 Kind
	Shape                [4]uint32 // N, H, W, C
	Tokens               uint32
	Owner                uint32
	ID                   uint64
	Key                  string
	// The sample's entry of the audio table (BatchMsg.Audio): where its
	// float32 PCM lies in the ring, [AudioChannels, AudioSamples] at
	// AudioRate Hz, and AudioFlags (AudioMissing); zero without audio.
	AudioOff, AudioLen          uint64
	AudioChannels, AudioSamples uint32
	AudioRate, AudioFlags       uint32
}

// AudioMissing is the AudioFlags bit of a sample whose clip has no audio
// track: its PCM is silence.
const AudioMissing = 1

// BatchAudio is the BATCH head's flags bit saying an audio table follows
// the dropped list.
const BatchAudio = 1

// Dropped is a sample of the batch that failed to decode.
type Dropped struct {
	Key, Err string
}

// BatchMsg is a BATCH message.
type BatchMsg struct {
	Step       int64
	Slot       uint32
	SlotOffset uint64
	Samples    []Sample
	Dropped    []Dropped
	// Audio says the audio output is on: an audio table, one entry per
	// sample, follows the dropped list (flags bit BatchAudio).
	Audio bool
}

// Sizes of a BATCH's parts.
const (
	batchHeadSize  = 32
	sampleSize     = 64
	audioEntrySize = 32
)

// Encode returns the BATCH packet.
func (m *BatchMsg) Encode() ([]byte, error) {
	n := batchHeadSize + sampleSize*len(m.Samples)
	for _, s := range m.Samples {
		if len(s.Key) > math.MaxUint16 {
			return nil, fmt.Errorf("bridge: sample key of %d bytes, more than %d", len(s.Key), math.MaxUint16)
		}
		n += len(s.Key)
	}
	for i := range m.Dropped {
		d := &m.Dropped[i]
		d.Key, d.Err = clip(d.Key), clip(d.Err)
		n += 4 + len(d.Key) + len(d.Err)
	}
	if m.Audio {
		n += audioEntrySize * len(m.Samples)
	}
	if HeaderSize+n > MaxMessage {
		return nil, fmt.Errorf("bridge: BATCH of step %d would take %d bytes, more than %d", m.Step, n, MaxMessage)
	}
	le := binary.LittleEndian
	b := AppendHeader(make([]byte, 0, HeaderSize+n), TypeBatch, n)
	b = le.AppendUint64(b, uint64(m.Step))
	b = le.AppendUint32(b, m.Slot)
	b = le.AppendUint32(b, uint32(len(m.Samples)))
	b = le.AppendUint32(b, uint32(len(m.Dropped)))
	var flags uint32
	if m.Audio {
		flags |= BatchAudio
	}
	b = le.AppendUint32(b, flags)
	b = le.AppendUint64(b, m.SlotOffset)
	for _, s := range m.Samples {
		b = le.AppendUint64(b, s.PixelsOff)
		b = le.AppendUint64(b, s.PixelsLen)
		b = le.AppendUint64(b, s.TextOff)
		b = le.AppendUint32(b, s.TextLen)
		b = le.AppendUint16(b, uint16(len(s.Key)))
		b = append(b, byte(s.Kind), 4)
		for _, d := range s.Shape {
			b = le.AppendUint32(b, d)
		}
		b = le.AppendUint32(b, s.Tokens)
		b = le.AppendUint32(b, s.Owner)
		b = le.AppendUint64(b, s.ID)
	}
	for _, s := range m.Samples {
		b = append(b, s.Key...)
	}
	for _, d := range m.Dropped {
		b = le.AppendUint16(b, uint16(len(d.Key)))
		b = le.AppendUint16(b, uint16(len(d.Err)))
		b = append(b, d.Key...)
		b = append(b, d.Err...)
	}
	if m.Audio {
		for _, s := range m.Samples {
			b = le.AppendUint64(b, s.AudioOff)
			b = le.AppendUint64(b, s.AudioLen)
			b = le.AppendUint32(b, s.AudioChannels)
			b = le.AppendUint32(b, s.AudioSamples)
			b = le.AppendUint32(b, s.AudioRate)
			b = le.AppendUint32(b, s.AudioFlags)
		}
	}
	return b, nil
}

// clip shortens s to what a u16 length holds.
func clip(s string) string {
	if len(s) > math.MaxUint16 {
		return s[:math.MaxUint16]
	}
	return s
}

// ParseBatch decodes a BATCH payload (the server writes them; tests and
// tools read them back).
func ParseBatch(p []byte) (*BatchMsg, error) {
	le := binary.LittleEndian
	if len(p) < batchHeadSize {
		return nil, fmt.Errorf("%w: BATCH of %d bytes, shorter than its head", ErrMessage, len(p))
	}
	flags := le.Uint32(p[20:])
	if flags&^BatchAudio != 0 {
		return nil, fmt.Errorf("%w: BATCH flags %#x", ErrMessage, flags)
	}
	m := &BatchMsg{Step: int64(le.Uint64(p)), Slot: le.Uint32(p[8:]), SlotOffset: le.Uint64(p[24:]), Audio: flags&BatchAudio != 0}
	n, d := int(le.Uint32(p[12:])), int(le.Uint32(p[16:]))
	rest := p[batchHeadSize:]
	if n > len(rest)/sampleSize || d > len(rest) {
		return nil, fmt.Errorf("%w: BATCH says %d samples and %d dropped in %d bytes", ErrMessage, n, d, len(rest))
	}
	m.Samples = make([]Sample, n)
	keyLens := make([]int, n)
	for i := range m.Samples {
		e := rest[i*sampleSize:]
		s := &m.Samples[i]
		s.PixelsOff, s.PixelsLen, s.TextOff = le.Uint64(e), le.Uint64(e[8:]), le.Uint64(e[16:])
		s.TextLen = le.Uint32(e[24:])
		keyLens[i] = int(le.Uint16(e[28:]))
		s.Kind = Kind(e[30])
		for j := range s.Shape {
			s.Shape[j] = le.Uint32(e[32+4*j:])
		}
		s.Tokens, s.Owner, s.ID = le.Uint32(e[48:]), le.Uint32(e[52:]), le.Uint64(e[56:])
	}
	rest = rest[n*sampleSize:]
	for i := range m.Samples {
		k := keyLens[i]
		if k > len(rest) {
			return nil, fmt.Errorf("%w: BATCH key %d runs past the message", ErrMessage, i)
		}
		m.Samples[i].Key, rest = string(rest[:k]), rest[k:]
	}
	for range d {
		if len(rest) < 4 {
			return nil, fmt.Errorf("%w: BATCH dropped list runs past the message", ErrMessage)
		}
		kl, el := int(le.Uint16(rest)), int(le.Uint16(rest[2:]))
		rest = rest[4:]
		if kl+el > len(rest) {
			return nil, fmt.Errorf("%w: BATCH dropped entry runs past the message", ErrMessage)
		}
		m.Dropped = append(m.Dropped, Dropped{Key: string(rest[:kl]), Err: string(rest[kl : kl+el])})
		rest = rest[kl+el:]
	}
	if m.Audio {
		if len(rest) < n*audioEntrySize {
			return nil, fmt.Errorf("%w: BATCH audio table runs past the message", ErrMessage)
		}
		for i := range m.Samples {
			e, s := rest[i*audioEntrySize:], &m.Samples[i]
			s.AudioOff, s.AudioLen = le.Uint64(e), le.Uint64(e[8:])
			s.AudioChannels, s.AudioSamples = le.Uint32(e[16:]), le.Uint32(e[20:])
			s.AudioRate, s.AudioFlags = le.Uint32(e[24:]), le.Uint32(e[28:])
			if uint64(s.AudioChannels)*uint64(s.AudioSamples)*4 != s.AudioLen {
				return nil, fmt.Errorf("%w: BATCH audio %d: %d x %d samples in %d bytes", ErrMessage, i, s.AudioChannels, s.AudioSamples, s.AudioLen)
			}
		}
		rest = rest[n*audioEntrySize:]
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("%w: BATCH has %d bytes past its dropped list and audio table", ErrMessage, len(rest))
	}
	return m, nil
}
