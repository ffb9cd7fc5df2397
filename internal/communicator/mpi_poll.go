//go:build !nompi

package communicator

/*
#include "mpi_shim.h"
*/
import "C"

import (
	"fmt"
	"runtime"
)

// Test reports whether r completed, without waiting (MPI_Test); once it
// has, r is finished as WaitAll finishes it. A caller that must not wait
// past a deadline on a peer that may be gone polls it.
func (w *World) Test(r *Request) (bool, error) {
	if r == nil || r.done || r.mpi == nil {
		return true, firstErr([]*Request{r})
	}
	var flag, rc C.int
	var st C.MPI_Status
	if err := w.do(func() { rc = C.MPI_Test(r.mpi.handle, &flag, &st) }); err != nil {
		return false, err
	}
	if rc == C.MPI_SUCCESS && flag == 0 {
		return false, nil
	}
	r.done = true
	if rc != C.MPI_SUCCESS {
		r.err = mpiOpError("MPI_Test", rc)
	} else if r.mpi.recv {
		var n C.int
		C.MPI_Get_count(&st, w.tByte, &n)
		r.n = int(n)
	}
	r.mpi.pin.Unpin()
	r.mpi.release()
	return true, r.err
}

// TryRecv receives a message of tag from any rank into buf if one has
// arrived (MPI_Iprobe, then MPI_Recv of what it found), without waiting
// for one: ok is false when none has. It returns the sender and the
// message's length; a message longer than buf is an error.
func (w *World) TryRecv(buf []byte, tag int) (src, n int, ok bool, err error) {
	var flag, rc C.int
	var st C.MPI_Status
	if err := w.do(func() {
		rc = C.MPI_Iprobe(C.dhmpi_any_source(), C.int(tag), w.comm, &flag, &st)
	}); err != nil {
		return 0, 0, false, err
	}
	if err := check("MPI_Iprobe", rc); err != nil || flag == 0 {
		return 0, 0, false, err
	}
	src = int(C.dhmpi_status_source(&st))
	var count C.int
	C.MPI_Get_count(&st, w.tByte, &count)
	if int(count) > len(buf) {
		return src, 0, false, fmt.Errorf("collective: a message of %d bytes from rank %d for a buffer of %d", count, src, len(buf))
	}
	p := ptr(buf)
	var pin runtime.Pinner
	if p != nil {
		pin.Pin(p)
	}
	defer pin.Unpin()
	if err := w.do(func() {
		rc = C.MPI_Recv(p, count, w.tByte, C.int(src), C.int(tag), w.comm, C.dhmpi_status_ignore())
	}); err != nil {
		return src, 0, false, err
	}
	return src, int(count), true, check("MPI_Recv", rc)
}
