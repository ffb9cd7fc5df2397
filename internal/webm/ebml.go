package webm

import (
	"encoding/binary"
	"fmt"
	"math"
)

// ebmlElem reads one element header at the start of b: its ID (up to 4
// bytes, marker kept), its data size (unknownSize for the reserved
// all-ones value) and the header length.
func ebmlElem(b []byte) (id uint32, size int64, hdr int, ok bool) {
	if len(b) == 0 || b[0] == 0 {
		return 0, 0, 0, false
	}
	idLen := 1
	for b[0]&(0x80>>(idLen-1)) == 0 {
		idLen++
	}
	if idLen > 4 || len(b) < idLen {
		return 0, 0, 0, false
	}
	for _, c := range b[:idLen] {
		id = id<<8 | uint32(c)
	}
	v, n, ok := ebmlVint(b[idLen:])
	if !ok {
		return 0, 0, 0, false
	}
	if v == 1<<(7*n)-1 {
		return id, unknownSize, idLen + n, true
	}
	if v > math.MaxInt64/2 {
		return 0, 0, 0, false
	}
	return id, int64(v), idLen + n, true
}

// ebmlVint reads a variable-length integer with its length marker removed.
func ebmlVint(b []byte) (v uint64, n int, ok bool) {
	if len(b) == 0 || b[0] == 0 {
		return 0, 0, false
	}
	n = 1
	for b[0]&(0x80>>(n-1)) == 0 {
		n++
	}
	if len(b) < n {
		return 0, 0, false
	}
	v = uint64(b[0] & (0xff >> n))
	for _, c := range b[1:n] {
		v = v<<8 | uint64(c)
	}
	return v, n, true
}

// ebmlUint reads an unsigned integer element body of up to 8 bytes.
func ebmlUint(b []byte) uint64 {
	var v uint64
	for _, c := range b[:min(len(b), 8)] {
		v = v<<8 | uint64(c)
	}
	return v
}

// ebmlFloat reads a 4- or 8-byte float element body; other sizes and
// non-finite values give 0.
func ebmlFloat(b []byte) float64 {
	var f float64
	switch len(b) {
	case 4:
		f = float64(math.Float32frombits(binary.BigEndian.Uint32(b)))
	case 8:
		f = math.Float64frombits(binary.BigEndian.Uint64(b))
	}
	if math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		return 0
	}
	return f
}

// ebmlIter walks the elements packed in b. Elements of unknown size are
// returned with the rest of b as their body; the caller reports how much
// of it it used with skipTo.
type ebmlIter struct {
	b   []byte
	off int // offset of b[0] in the file
	err error
}

func (it *ebmlIter) next() (id uint32, body []byte, unknown, ok bool) {
	if len(it.b) == 0 || it.err != nil {
		return 0, nil, false, false
	}
	id, size, hdr, ok := ebmlElem(it.b)
	if !ok {
		it.err = fmt.Errorf("%w: bad element header at offset %d", ErrFormat, it.off)
		return 0, nil, false, false
	}
	if size == unknownSize {
		body = it.b[hdr:]
		it.b, it.off = nil, it.off+len(it.b)
		return id, body, true, true
	}
	if size > int64(len(it.b)-hdr) {
		it.err = fmt.Errorf("%w: %s of %d bytes runs past its parent at offset %d (truncated?)", ErrFormat, elemName(id), size, it.off)
		return 0, nil, false, false
	}
	end := hdr + int(size)
	body = it.b[hdr:end:end]
	it.b, it.off = it.b[end:], it.off+end
	return id, body, false, true
}

// child32 returns the body of the first element with the given ID in b.
func child32(b []byte, want uint32) []byte {
	it := ebmlIter{b: b}
	for {
		id, body, unknown, ok := it.next()
		if !ok || unknown {
			return nil
		}
		if id == want {
			return body
		}
	}
}
