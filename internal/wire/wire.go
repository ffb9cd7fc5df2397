package wire

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/datahelix/datahelix/decode"
)

// ErrMalformed reports a malformed exchange message.
var ErrMalformed = errors.New("spmd: malformed sample message")

// Size is the exact length of s in the exchange format; the records
// carry it so receivers post receives of exact size.
func Size(s *decode.Sample) int64 {
	n := uvlen(uint64(len(s.Shard))) + len(s.Shard) + uvlen(uint64(len(s.Key))) + len(s.Key) + uvlen(uint64(s.Epoch)) + uvlen(uint64(len(s.Members)))
	for _, m := range s.Members {
		n += uvlen(uint64(len(m.Name))) + len(m.Name) + uvlen(uint64(len(m.Ext))) + len(m.Ext) + uvlen(uint64(len(m.Data))) + len(m.Data)
	}
	return int64(n)
}

func uvlen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

// appendWireString appends v with its length as a minimal uvarint.
func appendWireString(b []byte, v string) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// appendSampleHead appends the fields of s before its members: shard,
// key, epoch, member count.
func appendSampleHead(b []byte, s *decode.Sample) []byte {
	b = appendWireString(b, s.Shard)
	b = appendWireString(b, s.Key)
	b = binary.AppendUvarint(b, uint64(s.Epoch))
	return binary.AppendUvarint(b, uint64(len(s.Members)))
}

// appendMemberHead appends the fields of m before its data: name,
// extension, data length.
func appendMemberHead(b []byte, m decode.Member) []byte {
	b = appendWireString(b, m.Name)
	b = appendWireString(b, m.Ext)
	return binary.AppendUvarint(b, uint64(len(m.Data)))
}

// Append appends s in the exchange format (see AppendParts) to
// dst, in one buffer: the bytes the parts AppendParts lays out join
// into, which the tests hold the two to. The exchange measurement packs
// with it.
func Append(dst []byte, s *decode.Sample) []byte {
	dst = appendSampleHead(dst, s)
	for _, m := range s.Members {
		dst = append(appendMemberHead(dst, m), m.Data...)
	}
	return dst
}

// wireInlineBelow is the size under which AppendParts copies a
// member's data among the headers rather than sending it where it lies:
// captions and JSON, whose copy costs less than a block of the message.
const wireInlineBelow = 4 << 10

// AppendParts appends s in the exchange format to parts, as pieces
// whose concatenation is the message: shard, key, epoch (which seeds the
// sample's transforms on the rank that decodes it), member count, then each
// member's name, extension and data, every field length-prefixed with a
// minimal uvarint (Read rejects overlong ones, so a message has one
// encoding). The length prefixes, the short fields and data under
// wireInlineBelow bytes are written into hdr, and the parts hold slices of
// it; larger data is not copied, its part is the member's own slice. A
// header run that follows the previous sample's in hdr extends its part,
// so parts must hold this message's parts only. It returns parts and hdr
// extended. Neither hdr's bytes nor the data may change until the parts
// are sent.
func AppendParts(parts [][]byte, hdr []byte, s *decode.Sample) ([][]byte, []byte) {
	start := len(hdr)
	if n := len(parts); n > 0 && start > 0 {
		if last := parts[n-1]; len(last) > 0 && &last[len(last)-1] == &hdr[start-1] {
			parts, start = parts[:n-1], start-len(last)
		}
	}
	hdr = appendSampleHead(hdr, s)
	for _, m := range s.Members {
		hdr = appendMemberHead(hdr, m)
		if len(m.Data) < wireInlineBelow {
			hdr = append(hdr, m.Data...)
			continue
		}
		// The header run is cut here; if hdr grows into a new array
		// later, this part keeps the old one, which nothing writes again.
		parts = append(parts, hdr[start:len(hdr):len(hdr)], m.Data)
		start = len(hdr)
	}
	if start < len(hdr) {
		parts = append(parts, hdr[start:len(hdr):len(hdr)])
	}
	return parts, hdr
}

// MaxEpoch bounds a sample's epoch, as the reader bounds a saved state's.
// Append writes a negative epoch, which no reader hands out, as a huge
// one that Read refuses.
const MaxEpoch = 1<<31 - 1

// maxWireMembers bounds the members of one received sample.
const maxWireMembers = 4096

// Read parses one sample from the front of buf and returns it with
// the rest of buf. Member data aliases buf.
func Read(buf []byte) (*decode.Sample, []byte, error) {
	field := func() ([]byte, error) {
		n, k := binary.Uvarint(buf)
		if k <= 0 || k != uvlen(n) || n > uint64(len(buf)-k) {
			return nil, fmt.Errorf("%w: field length at %d bytes before the end", ErrMalformed, len(buf))
		}
		f := buf[k : k+int(n) : k+int(n)]
		buf = buf[k+int(n):]
		return f, nil
	}
	s := &decode.Sample{}
	shard, err := field()
	if err != nil {
		return nil, nil, err
	}
	key, err := field()
	if err != nil {
		return nil, nil, err
	}
	s.Shard, s.Key = string(shard), string(key)
	epoch, k := binary.Uvarint(buf)
	if k <= 0 || k != uvlen(epoch) || epoch > MaxEpoch {
		return nil, nil, fmt.Errorf("%w: epoch of sample %q", ErrMalformed, s.Key)
	}
	s.Epoch = int(epoch)
	buf = buf[k:]
	count, k := binary.Uvarint(buf)
	if k <= 0 || k != uvlen(count) || count > maxWireMembers {
		return nil, nil, fmt.Errorf("%w: member count of sample %q", ErrMalformed, s.Key)
	}
	buf = buf[k:]
	s.Members = make([]decode.Member, 0, count)
	for i := uint64(0); i < count; i++ {
		name, err := field()
		if err != nil {
			return nil, nil, err
		}
		ext, err := field()
		if err != nil {
			return nil, nil, err
		}
		data, err := field()
		if err != nil {
			return nil, nil, err
		}
		s.Members = append(s.Members, decode.Member{Name: string(name), Ext: string(ext), Data: data})
	}
	return s, buf, nil
}
