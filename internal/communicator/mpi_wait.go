//go:build !nompi

package communicator

/*
#include "mpi_shim.h"
*/
import "C"

import (
	"fmt"
	"os"
	"runtime"
	"time"
	"unsafe"

	"github.com/datahelix/datahelix/internal/mpinode"
)

// defaultWaitPolicy chooses from DATAHELIX_MPI_WAIT (block, sleep or
// auto) and, for auto, sleeps when the node holds more ranks than it has
// cores. (Not the cores this process may use: mpirun binds each rank to
// one core when they fit, and that is exactly when spinning is right.)
func defaultWaitPolicy(localSize int) (waitPolicy, error) {
	switch v := os.Getenv("DATAHELIX_MPI_WAIT"); v {
	case "block":
		return waitBlock, nil
	case "sleep":
		return waitSleep, nil
	case "", "auto":
		if localSize > mpinode.NodeCPUs() {
			return waitSleep, nil
		}
		return waitBlock, nil
	default:
		return waitBlock, fmt.Errorf("collective: DATAHELIX_MPI_WAIT=%q: want block, sleep or auto", v)
	}
}

// agreeWaitPolicy returns the policy every rank of comm is to use: sleep
// when any rank chose it. Blocking and non-blocking collectives do not
// match (MPI-3.1, section 5.12), so ranks that chose apart (nodes with and
// without spare CPUs, or DATAHELIX_MPI_WAIT set differently) would hang
// in their first collective. It is a blocking MPI_Allreduce whatever the
// policy, which every rank of comm calls where MPI may be called.
func agreeWaitPolicy(comm C.MPI_Comm, tInt64 C.MPI_Datatype, opMax C.MPI_Op, p waitPolicy) (waitPolicy, error) {
	v := [1]int64{int64(p)}
	rc := C.MPI_Allreduce(C.dhmpi_in_place(), unsafe.Pointer(&v[0]), 1, tInt64, opMax, comm)
	if err := check("MPI_Allreduce", rc); err != nil {
		return p, fmt.Errorf("collective: agreeing on the wait policy: %w", err)
	}
	return waitPolicy(v[0]), nil
}

// ShareCores chooses the wait policy again for ranks that each keep
// threads threads busy (a rank's decode workers, its trainer process)
// rather than one: with DATAHELIX_MPI_WAIT auto or unset, the ranks sleep
// in waits when the node's ranks times threads outnumber its cores, since
// a rank spinning in a wait takes a core from them. An explicit
// DATAHELIX_MPI_WAIT is kept. The ranks agree (sleep when any chose it),
// and duplicates made afterwards inherit the policy. Every rank must call
// it with the same threads.
func (w *World) ShareCores(threads int) error {
	p, err := defaultWaitPolicy(w.info.LocalSize * max(threads, 1))
	if err != nil {
		return err
	}
	v := []int64{int64(p)}
	if err := w.AllreduceInt64(v, OpMax); err != nil {
		return err
	}
	w.setWaitPolicy(waitPolicy(v[0]))
	return nil
}

// setWaitPolicy changes how this communicator waits (see waitPolicy).
// Every rank of the communicator must set the same one: a blocking
// collective does not match a non-blocking one.
func (w *World) setWaitPolicy(p waitPolicy) { w.policy.Store(int32(p)) }

// WaitPolicy names how this communicator waits for MPI operations to
// complete, as DATAHELIX_MPI_WAIT spells it: "block" or "sleep".
func (w *World) WaitPolicy() string { return w.currentPolicy().String() }

// currentPolicy returns how this communicator waits.
func (w *World) currentPolicy() waitPolicy { return waitPolicy(w.policy.Load()) }

func (w *World) sleeping() bool { return waitPolicy(w.policy.Load()) == waitSleep }

// pollBackoff calls test until it reports completion or an error code:
// polls back to back for 2 ms (yielding the core between polls), then
// with sleeps growing from 50 µs to 500 µs.
func (w *World) pollBackoff(test func() (bool, C.int)) (C.int, error) {
	sleep := 50 * time.Microsecond
	start := time.Now()
	for {
		var done bool
		var rc C.int
		if err := w.do(func() { done, rc = test() }); err != nil {
			return 0, err
		}
		if rc != C.MPI_SUCCESS || done {
			return rc, nil
		}
		if time.Since(start) < 2*time.Millisecond {
			// Spin, but let any other runnable thread of this core (a
			// decode worker of this or another rank) go first.
			yieldCPU()
			continue
		}
		time.Sleep(sleep)
		if sleep < 500*time.Microsecond {
			sleep *= 2
		}
	}
}

// icoll starts a non-blocking collective with start and waits for it
// under waitSleep. The buffers the collective reads and writes stay
// pinned until it completes.
func (w *World) icoll(name string, pins []unsafe.Pointer, start func(req *C.MPI_Request) C.int) error {
	var pin runtime.Pinner
	defer pin.Unpin()
	for _, p := range pins {
		if p != nil {
			pin.Pin(p)
		}
	}
	req := new(C.MPI_Request)
	var rc C.int
	if err := w.do(func() { rc = start(req) }); err != nil {
		return err
	}
	if err := check(name, rc); err != nil {
		return err
	}
	rc, err := w.pollBackoff(func() (bool, C.int) {
		var flag C.int
		rc := C.MPI_Test(req, &flag, C.dhmpi_status_ignore())
		return flag != 0, rc
	})
	if err != nil {
		return err
	}
	return check(name, rc)
}

// yieldCPU gives this thread's core to any other runnable thread
// (sched_yield): a poll costs little when nothing else wants the core.
func yieldCPU() { C.dhmpi_yield() }
