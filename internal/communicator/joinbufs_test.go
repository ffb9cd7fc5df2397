package communicator

import (
	"bytes"
	"testing"
)

// TestJoinBufsReuse: a joined message is the parts' concatenation; a
// buffer put back is reused by the next join that fits in it, the
// smallest that fits, and the list keeps at most joinBufsKept buffers,
// the largest.
func TestJoinBufsReuse(t *testing.T) {
	var j joinBufs
	parts := [][]byte{[]byte("ab"), nil, []byte("cde"), {}, []byte("f")}
	first := j.join(parts)
	if string(first) != "abcdef" {
		t.Fatalf("join = %q, want %q", first, "abcdef")
	}
	j.put(first)
	again := j.join([][]byte{[]byte("xyz")})
	if string(again) != "xyz" || &again[:1][0] != &first[:1][0] {
		t.Errorf("join after put: %q at a new buffer; want %q in the one put back", again, "xyz")
	}
	if more := j.join([][]byte{bytes.Repeat([]byte{1}, 10)}); len(more) != 10 || cap(more) < 10 {
		t.Errorf("join of 10 bytes with nothing kept: len %d cap %d", len(more), cap(more))
	}

	j = joinBufs{}
	big, small := make([]byte, 0, 1000), make([]byte, 0, 100)
	j.put(big)
	j.put(small)
	if got := j.join([][]byte{make([]byte, 50)}); &got[:1][0] != &small[:1][0] {
		t.Error("a 50-byte join did not take the smallest buffer that fits")
	}
	for i := range 2 * joinBufsKept {
		j.put(make([]byte, 0, 10+i))
	}
	if len(j.free) != joinBufsKept {
		t.Fatalf("kept %d buffers, want %d", len(j.free), joinBufsKept)
	}
	// The 1000-byte buffer and the largest of the others, 10+2K-1 down.
	want := map[int]bool{1000: true}
	for i := range joinBufsKept - 1 {
		want[10+2*joinBufsKept-1-i] = true
	}
	for _, b := range j.free {
		if !want[cap(b)] {
			t.Errorf("kept a buffer of %d bytes; want those of %v", cap(b), want)
		}
	}
}
