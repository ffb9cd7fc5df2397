//go:build !nompi

package communicator

/*
#include "mpi_shim.h"
*/
import "C"

import (
	"fmt"
	"math"
	"unsafe"
)

// Allgather gathers equal-size blocks with MPI_Allgather.
func (w *World) Allgather(send, recv []byte) error {
	if len(recv) != w.size*len(send) {
		return fmt.Errorf("%w: allgather of %d-byte blocks over %d ranks needs a %d-byte receive buffer, got %d",
			ErrSize, len(send), w.size, w.size*len(send), len(recv))
	}
	n, err := count(len(send))
	if err != nil {
		return err
	}
	if w.sleeping() {
		return w.icoll("MPI_Iallgather", []unsafe.Pointer{ptr(send), ptr(recv)}, func(req *C.MPI_Request) C.int {
			return C.MPI_Iallgather(ptr(send), n, w.tByte, ptr(recv), n, w.tByte, w.comm, req)
		})
	}
	var rc C.int
	if w.multiple {
		// The hot path of every step: no closure, one cgo call.
		if err := w.enter(); err != nil {
			return err
		}
		rc = C.MPI_Allgather(ptr(send), n, w.tByte, ptr(recv), n, w.tByte, w.comm)
	} else if err := w.do(func() {
		rc = C.MPI_Allgather(ptr(send), n, w.tByte, ptr(recv), n, w.tByte, w.comm)
	}); err != nil {
		return err
	}
	return check("MPI_Allgather", rc)
}

// AllgatherVar gathers variable-size blocks: one MPI_Allgather of the
// lengths, then MPI_Allgatherv.
func (w *World) AllgatherVar(send []byte) ([][]byte, error) {
	lens := make([]int64, w.size)
	mine := []int64{int64(len(send))}
	if err := w.Allgather(int64Bytes(mine), int64Bytes(lens)); err != nil {
		return nil, err
	}
	counts := make([]C.int, w.size)
	displs := make([]C.int, w.size)
	total := int64(0)
	for r, l := range lens {
		if l < 0 {
			return nil, fmt.Errorf("%w: allgatherv: rank %d sends a length of %d bytes", ErrSize, r, l)
		}
		if total+l > math.MaxInt32 {
			return nil, fmt.Errorf("%w: allgatherv of %d bytes exceeds MPI's int displacement", ErrSize, total+l)
		}
		counts[r] = C.int(l)
		displs[r] = C.int(total)
		total += l
	}
	buf := make([]byte, total)
	n := C.int(len(send))
	if w.sleeping() {
		pins := []unsafe.Pointer{ptr(send), ptr(buf), unsafe.Pointer(&counts[0]), unsafe.Pointer(&displs[0])}
		if err := w.icoll("MPI_Iallgatherv", pins, func(req *C.MPI_Request) C.int {
			return C.MPI_Iallgatherv(ptr(send), n, w.tByte, ptr(buf), &counts[0], &displs[0], w.tByte, w.comm, req)
		}); err != nil {
			return nil, err
		}
		return splitBlocks(buf, counts, displs), nil
	}
	var rc C.int
	if err := w.do(func() {
		rc = C.MPI_Allgatherv(ptr(send), n, w.tByte, ptr(buf), &counts[0], &displs[0], w.tByte, w.comm)
	}); err != nil {
		return nil, err
	}
	if err := check("MPI_Allgatherv", rc); err != nil {
		return nil, err
	}
	return splitBlocks(buf, counts, displs), nil
}

// splitBlocks cuts an allgatherv buffer into its ranks' blocks.
func splitBlocks(buf []byte, counts, displs []C.int) [][]byte {
	out := make([][]byte, len(counts))
	for r := range out {
		lo, hi := int(displs[r]), int(displs[r])+int(counts[r])
		out[r] = buf[lo:hi:hi]
	}
	return out
}

// int64Bytes views v as bytes (native byte order, as MPI_BYTE moves it
// between ranks of one architecture).
func int64Bytes(v []int64) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 8*len(v))
}

// AllreduceInt64 reduces buf in place with MPI_Allreduce.
func (w *World) AllreduceInt64(buf []int64, op Op) error {
	var cop C.MPI_Op
	switch op {
	case OpSum:
		cop = w.opSum
	case OpMin:
		cop = w.opMin
	case OpMax:
		cop = w.opMax
	default:
		return fmt.Errorf("collective: allreduce: unknown operator %v", op)
	}
	n, err := count(len(buf))
	if err != nil {
		return err
	}
	var p unsafe.Pointer
	if len(buf) > 0 {
		p = unsafe.Pointer(&buf[0])
	}
	if w.sleeping() {
		return w.icoll("MPI_Iallreduce", []unsafe.Pointer{p}, func(req *C.MPI_Request) C.int {
			return C.MPI_Iallreduce(C.dhmpi_in_place(), p, n, w.tInt64, cop, w.comm, req)
		})
	}
	var rc C.int
	if err := w.do(func() {
		rc = C.MPI_Allreduce(C.dhmpi_in_place(), p, n, w.tInt64, cop, w.comm)
	}); err != nil {
		return err
	}
	return check("MPI_Allreduce", rc)
}

// Bcast broadcasts root's buf with MPI_Bcast.
func (w *World) Bcast(buf []byte, root int) error {
	if root < 0 || root >= w.size {
		return fmt.Errorf("%w: bcast root %d not in [0,%d)", ErrRank, root, w.size)
	}
	n, err := count(len(buf))
	if err != nil {
		return err
	}
	if w.sleeping() {
		return w.icoll("MPI_Ibcast", []unsafe.Pointer{ptr(buf)}, func(req *C.MPI_Request) C.int {
			return C.MPI_Ibcast(ptr(buf), n, w.tByte, C.int(root), w.comm, req)
		})
	}
	var rc C.int
	if err := w.do(func() {
		rc = C.MPI_Bcast(ptr(buf), n, w.tByte, C.int(root), w.comm)
	}); err != nil {
		return err
	}
	return check("MPI_Bcast", rc)
}

// Barrier calls MPI_Barrier.
func (w *World) Barrier() error {
	if w.sleeping() {
		return w.icoll("MPI_Ibarrier", nil, func(req *C.MPI_Request) C.int {
			return C.MPI_Ibarrier(w.comm, req)
		})
	}
	var rc C.int
	if err := w.do(func() { rc = C.MPI_Barrier(w.comm) }); err != nil {
		return err
	}
	return check("MPI_Barrier", rc)
}
