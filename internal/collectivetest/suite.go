// Package collectivetest is the conformance suite every collective.Comm
// implementation passes, and helpers to run programs under mpirun in
// tests.
//
// Run is called by every rank of a world with its own Comm, as an SPMD
// program: in goroutines for collective.NewLocal, in the processes of an
// mpirun job for communicator.World. It returns the first check that failed.
package collectivetest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"time"

	"github.com/datahelix/datahelix/collective"
)

// BigMessage is the size of the large messages the suite moves: 16 MiB.
const BigMessage = 16 << 20

// Run runs every conformance check on c. All ranks of the world must call
// it at the same time.
func Run(c collective.Comm) error { return RunLogged(c, nil) }

// RunLogged is Run printing the name of each check to log before it
// starts, to find the check a hanging job is stuck in.
func RunLogged(c collective.Comm, log io.Writer) error {
	checks := []struct {
		name string
		f    func(collective.Comm) error
	}{
		{"rank and size", checkRankSize},
		{"allgather", checkAllgather},
		{"allgather size mismatch", checkAllgatherMismatch},
		{"allgatherv", checkAllgatherVar},
		{"allreduce", checkAllreduce},
		{"bcast", checkBcast},
		{"barrier", func(c collective.Comm) error { return c.Barrier() }},
		{"all-to-all isend/irecv", checkAllToAll},
		{"non-overtaking order", checkOrder},
		{"gathered isend (IsendParts)", checkIsendParts},
		{"requests dropped before WaitAll", checkDroppedRequests},
		{"invalid rank", checkInvalidRank},
		{"dup: concurrent collectives", checkDup},
	}
	for _, ch := range checks {
		if log != nil {
			fmt.Fprintf(log, "rank %d: %s\n", c.Rank(), ch.name)
		}
		if err := ch.f(c); err != nil {
			return fmt.Errorf("rank %d/%d: %s: %w", c.Rank(), c.Size(), ch.name, err)
		}
		// Keep ranks in step so a failure is reported by the check
		// where it happened.
		if err := c.Barrier(); err != nil {
			return fmt.Errorf("rank %d/%d: barrier after %s: %w", c.Rank(), c.Size(), ch.name, err)
		}
	}
	return nil
}

// pattern fills a buffer with bytes that depend on who sent it, to whom,
// and the position, so that misplaced or stale data is caught.
func pattern(n, src, dst, salt int) []byte {
	b := make([]byte, (n+7)/8*8)
	x := uint64(src*7919+dst*104729+salt*31) + 0x9e3779b97f4a7c15
	for i := 0; i < len(b); i += 8 {
		// splitmix64
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		binary.LittleEndian.PutUint64(b[i:], z^(z>>31))
	}
	return b[:n]
}

func checkRankSize(c collective.Comm) error {
	if c.Size() < 1 || c.Rank() < 0 || c.Rank() >= c.Size() {
		return fmt.Errorf("rank %d size %d", c.Rank(), c.Size())
	}
	send := binary.LittleEndian.AppendUint64(nil, uint64(c.Rank()))
	recv := make([]byte, 8*c.Size())
	if err := c.Allgather(send, recv); err != nil {
		return err
	}
	for r := 0; r < c.Size(); r++ {
		if got := binary.LittleEndian.Uint64(recv[8*r:]); got != uint64(r) {
			return fmt.Errorf("slot %d holds rank %d", r, got)
		}
	}
	return nil
}

func checkAllgather(c collective.Comm) error {
	for _, n := range []int{0, 1, 1024, BigMessage} {
		send := pattern(n, c.Rank(), -1, n)
		recv := make([]byte, n*c.Size())
		if err := c.Allgather(send, recv); err != nil {
			return fmt.Errorf("%d-byte blocks: %w", n, err)
		}
		for r := 0; r < c.Size(); r++ {
			if !bytes.Equal(recv[r*n:(r+1)*n], pattern(n, r, -1, n)) {
				return fmt.Errorf("%d-byte blocks: block of rank %d differs", n, r)
			}
		}
	}
	return nil
}

func checkAllgatherMismatch(c collective.Comm) error {
	err := c.Allgather(make([]byte, 4), make([]byte, 4*c.Size()+1))
	if !errors.Is(err, collective.ErrSize) {
		return fmt.Errorf("got %v, want an error wrapping ErrSize", err)
	}
	return nil
}

func checkAllgatherVar(c collective.Comm) error {
	sizes := func(round, r int) int {
		switch {
		case round == 0:
			return (r * 4099) % 10007 // rank 0 sends nothing
		case round == 1 && r == c.Size()-1:
			return BigMessage
		case round == 2:
			return 0
		}
		return r + 1
	}
	for round := 0; round < 3; round++ {
		send := pattern(sizes(round, c.Rank()), c.Rank(), -2, round)
		got, err := c.AllgatherVar(send)
		if err != nil {
			return fmt.Errorf("round %d: %w", round, err)
		}
		if len(got) != c.Size() {
			return fmt.Errorf("round %d: got %d blocks, want %d", round, len(got), c.Size())
		}
		for r, b := range got {
			if want := pattern(sizes(round, r), r, -2, round); !bytes.Equal(b, want) {
				return fmt.Errorf("round %d: block of rank %d: %d bytes, want %d (or content differs)", round, r, len(b), len(want))
			}
		}
	}
	return nil
}

func checkAllreduce(c collective.Comm) error {
	n := int64(c.Size())
	r := int64(c.Rank())
	vals := func() []int64 { return []int64{r, -r * 1000, math.MaxInt64 / 1024 * (r % 2), 1 << 40} }
	want := map[collective.Op][]int64{
		collective.OpSum: {n * (n - 1) / 2, -1000 * n * (n - 1) / 2, math.MaxInt64 / 1024 * (n / 2), n << 40},
		collective.OpMin: {0, -1000 * (n - 1), 0, 1 << 40},
		collective.OpMax: {n - 1, 0, math.MaxInt64 / 1024 * min(n-1, 1), 1 << 40},
	}
	for _, op := range []collective.Op{collective.OpSum, collective.OpMin, collective.OpMax} {
		buf := vals()
		if err := c.AllreduceInt64(buf, op); err != nil {
			return fmt.Errorf("%v: %w", op, err)
		}
		for i := range buf {
			if buf[i] != want[op][i] {
				return fmt.Errorf("%v: element %d: got %d, want %d", op, i, buf[i], want[op][i])
			}
		}
	}
	if err := c.AllreduceInt64(nil, collective.OpSum); err != nil {
		return fmt.Errorf("empty: %w", err)
	}
	return nil
}

func checkBcast(c collective.Comm) error {
	for root := 0; root < c.Size(); root++ {
		for _, n := range []int{0, 3, 1 << 16} {
			buf := make([]byte, n)
			if c.Rank() == root {
				copy(buf, pattern(n, root, -3, n))
			}
			if err := c.Bcast(buf, root); err != nil {
				return fmt.Errorf("root %d, %d bytes: %w", root, n, err)
			}
			if !bytes.Equal(buf, pattern(n, root, -3, n)) {
				return fmt.Errorf("root %d, %d bytes: content differs", root, n)
			}
		}
	}
	if err := c.Bcast(nil, c.Size()); !errors.Is(err, collective.ErrRank) {
		return fmt.Errorf("root out of range: got %v, want ErrRank", err)
	}
	return nil
}

// a2aSize is the length of the message from src to dst: zero-length,
// small and one 16 MiB pair.
func a2aSize(src, dst, size int) int {
	switch {
	case src == dst:
		return 0
	case src == 0 && dst == size-1:
		return BigMessage
	}
	return 100*src + dst + 1
}

func checkAllToAll(c collective.Comm) error {
	const tag = 11
	n, me := c.Size(), c.Rank()
	bufs := make([][]byte, n)
	var reqs []*collective.Request
	for src := 0; src < n; src++ {
		bufs[src] = make([]byte, a2aSize(src, me, n))
		r, err := c.Irecv(bufs[src], src, tag)
		if err != nil {
			return fmt.Errorf("irecv from %d: %w", src, err)
		}
		reqs = append(reqs, r)
	}
	for k := 0; k < n; k++ {
		dst := (me + k) % n
		r, err := c.Isend(pattern(a2aSize(me, dst, n), me, dst, tag), dst, tag)
		if err != nil {
			return fmt.Errorf("isend to %d: %w", dst, err)
		}
		reqs = append(reqs, r)
	}
	if err := c.WaitAll(reqs); err != nil {
		return err
	}
	for src := 0; src < n; src++ {
		if want := pattern(a2aSize(src, me, n), src, me, tag); !bytes.Equal(bufs[src], want) {
			return fmt.Errorf("message from rank %d differs", src)
		}
		if got := reqs[src].Len(); got != len(bufs[src]) {
			return fmt.Errorf("message from rank %d: Len %d, want %d", src, got, len(bufs[src]))
		}
		if !reqs[src].Done() {
			return fmt.Errorf("request from rank %d not done after WaitAll", src)
		}
	}
	// Waiting again on completed requests is a no-op.
	return c.WaitAll(reqs)
}

// partsMessages returns the parts of the messages checkIsendParts sends
// from rank src to rank dst: no parts; empty parts; one part; many small
// parts; a large message in uneven parts, each its own allocation; and
// slices of one buffer out of address order, large and small (the loader's
// shape: headers and data of several samples cut from a few buffers), the
// buffer shared by three messages pending at once.
func partsMessages(src, dst int) [][][]byte {
	salt := 0
	own := func(cut ...int) [][]byte {
		parts := make([][]byte, len(cut))
		for k, l := range cut {
			// Each part its own allocation, as a sample's data is.
			parts[k] = pattern(l, src, dst, 100+salt)
			salt++
		}
		return parts
	}
	const k = 64 << 10
	shared := pattern(4*k, src, dst, 99)
	return [][][]byte{
		nil,
		own(0, 0),
		own(0, 5, 0),
		own(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16),
		own(40, BigMessage/2, 3, 0, BigMessage/2-100, 57),
		{shared[2*k : 3*k], shared[:k], shared[3*k:], shared[k : 2*k]},
		{shared[k+7 : 3*k], own(9)[0], shared[:k+7]},
		{shared[3:10], shared[1:2], shared[:1]},
	}
}

// checkIsendParts sends each rank's right-hand neighbour every message of
// partsMessages, between plain Isends on the same tag: each must arrive
// whole, in order, in one exact-length Irecv.
func checkIsendParts(c collective.Comm) error {
	const tag = 14
	n, me := c.Size(), c.Rank()
	next, prev := (me+1)%n, (me+n-1)%n
	in, out := partsMessages(prev, me), partsMessages(me, next)
	var reqs []*collective.Request
	var got [][]byte
	for _, parts := range in {
		for _, size := range []int{len(bytes.Join(parts, nil)), 3} {
			b := make([]byte, size)
			r, err := c.Irecv(b, prev, tag)
			if err != nil {
				return err
			}
			got = append(got, b)
			reqs = append(reqs, r)
		}
	}
	sent := make([]int, len(out))
	for i, parts := range out {
		sent[i] = len(bytes.Join(parts, nil))
		r, err := c.IsendParts(parts, next, tag)
		if err != nil {
			return fmt.Errorf("message %d: %w", i, err)
		}
		// The list may be reused at once; the bytes may not.
		clear(parts)
		plain, err := c.Isend(pattern(3, me, next, 200+i), next, tag)
		if err != nil {
			return err
		}
		reqs = append(reqs, r, plain)
	}
	if err := c.WaitAll(reqs); err != nil {
		return err
	}
	for i, parts := range in {
		want := bytes.Join(parts, nil)
		if !bytes.Equal(got[2*i], want) {
			return fmt.Errorf("message %d (%d parts, %d bytes) from rank %d differs", i, len(parts), len(want), prev)
		}
		if l := reqs[2*i].Len(); l != len(want) {
			return fmt.Errorf("message %d from rank %d: Len %d, want %d", i, prev, l, len(want))
		}
		if !bytes.Equal(got[2*i+1], pattern(3, prev, me, 200+i)) {
			return fmt.Errorf("the plain message after message %d from rank %d differs: order lost", i, prev)
		}
		// The sends report the bytes they sent.
		if l := reqs[2*len(in)+2*i].Len(); l != sent[i] {
			return fmt.Errorf("message %d: send Len %d, want %d", i, l, sent[i])
		}
	}
	// Both ways of sending, joined and in place, check the rank.
	for _, parts := range [][][]byte{{{1}, {2}}, partsMessages(me, next)[4]} {
		if _, err := c.IsendParts(parts, n, tag); !errors.Is(err, collective.ErrRank) {
			return fmt.Errorf("IsendParts of %d parts to rank %d: got %v, want an error wrapping ErrRank", len(parts), n, err)
		}
	}
	return nil
}

// checkDroppedRequests drops a receive and a gathered send to itself
// without waiting for them, as a caller that fails midway does, runs the
// garbage collector, and then completes both transfers from the other
// side: the buffers MPI still uses must stay in place (a World keeps such
// requests; a pinned buffer whose request is collected makes the Go
// runtime panic), and the gathered send must arrive whole.
func checkDroppedRequests(c collective.Comm) error {
	const tag, size = 15, 1 << 20
	me := c.Rank()
	gc := func() {
		for range 3 {
			runtime.GC()
			time.Sleep(5 * time.Millisecond) // finalizers run meanwhile
		}
	}
	start := func() error { // its requests are dropped when it returns
		if _, err := c.Irecv(make([]byte, size), me, tag); err != nil {
			return err
		}
		whole := pattern(size, me, me, 2)
		parts := [][]byte{append([]byte(nil), whole[:size/2]...), append([]byte(nil), whole[size/2:]...)}
		_, err := c.IsendParts(parts, me, tag+1)
		return err
	}
	if err := start(); err != nil {
		return err
	}
	gc()
	send, err := c.Isend(pattern(size, me, me, 1), me, tag)
	if err != nil {
		return err
	}
	got := make([]byte, size)
	recv, err := c.Irecv(got, me, tag+1)
	if err != nil {
		return err
	}
	if err := c.WaitAll([]*collective.Request{send, recv}); err != nil {
		return err
	}
	gc()
	if !bytes.Equal(got, pattern(size, me, me, 2)) {
		return errors.New("the dropped gathered send delivered other bytes")
	}
	return nil
}

func checkOrder(c collective.Comm) error {
	const tag, count = 12, 8
	n, me := c.Size(), c.Rank()
	next, prev := (me+1)%n, (me+n-1)%n
	var reqs []*collective.Request
	got := make([][]byte, count)
	for i := range got {
		got[i] = make([]byte, 1+i)
		r, err := c.Irecv(got[i], prev, tag)
		if err != nil {
			return err
		}
		reqs = append(reqs, r)
	}
	for i := 0; i < count; i++ {
		r, err := c.Isend(pattern(1+i, me, next, i), next, tag)
		if err != nil {
			return err
		}
		reqs = append(reqs, r)
	}
	if err := c.WaitAll(reqs); err != nil {
		return err
	}
	for i := range got {
		if !bytes.Equal(got[i], pattern(1+i, prev, me, i)) {
			return fmt.Errorf("message %d from rank %d out of order", i, prev)
		}
	}
	return nil
}

func checkInvalidRank(c collective.Comm) error {
	if _, err := c.Isend([]byte{1}, c.Size(), 1); !errors.Is(err, collective.ErrRank) {
		return fmt.Errorf("isend to rank %d: got %v, want ErrRank", c.Size(), err)
	}
	if _, err := c.Irecv(make([]byte, 1), -1, 1); !errors.Is(err, collective.ErrRank) {
		return fmt.Errorf("irecv from rank -1: got %v, want ErrRank", err)
	}
	return nil
}

// checkDup runs collectives on the communicator and a duplicate at the
// same time from two goroutines; neither may see the other's data.
func checkDup(c collective.Comm) error {
	d, err := c.Dup()
	if err != nil {
		return err
	}
	errs := make(chan error, 2)
	for i, cm := range []collective.Comm{c, d} {
		go func() {
			for round := 0; round < 50; round++ {
				send := pattern(64, cm.Rank(), -4-i, round)
				recv := make([]byte, 64*cm.Size())
				if err := cm.Allgather(send, recv); err != nil {
					errs <- err
					return
				}
				for r := 0; r < cm.Size(); r++ {
					if !bytes.Equal(recv[64*r:64*(r+1)], pattern(64, r, -4-i, round)) {
						errs <- fmt.Errorf("communicator %d round %d: block of rank %d mixed up", i, round, r)
						return
					}
				}
			}
			errs <- nil
		}()
	}
	for i := 0; i < 2; i++ {
		if err := <-errs; err != nil {
			return err
		}
	}
	return nil
}
