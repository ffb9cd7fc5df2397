//go:build !nompi

package communicator

/*
#include "mpi_shim.h"
*/
import "C"

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// World is the communicator of the MPI job, a duplicate of
// MPI_COMM_WORLD with MPI_ERRORS_RETURN set, so that MPI errors come back
// as Go errors. Open it with Init and close it with Finalize.
//
// If MPI grants MPI_THREAD_MULTIPLE, operations call the library directly
// from the calling goroutine. Otherwise every call runs on the one OS
// thread that initialized MPI, through a channel.
type World struct {
	comm     C.MPI_Comm
	tByte    C.MPI_Datatype // predefined handles, fetched once from the shim
	tInt64   C.MPI_Datatype
	opSum    C.MPI_Op
	opMin    C.MPI_Op
	opMax    C.MPI_Op
	rank     int
	size     int
	info     Info
	multiple bool

	calls     chan func()   // to the MPI thread when !multiple
	finalized chan error    // result of MPI_Finalize on the MPI thread
	finalize  chan struct{} // asks the MPI thread to finalize
	closed    atomic.Bool
	mu        sync.Mutex
	root      *World       // the World Init returned; nil for itself
	dups      []*World     // communicators duplicated from root, freed at Finalize
	lastYield atomic.Int64 // monotonic ns of the last scheduling point, see enter
	policy    atomic.Int32 // a waitPolicy
	joins     joinBufs     // the buffers IsendParts joins messages into

	// live holds the requests started and not yet completed by WaitAll.
	// MPI may still read or write their buffers, so they must stay pinned
	// and reachable even when a failing caller drops a request: a
	// collected Pinner that still pins makes the Go runtime panic.
	liveMu sync.Mutex
	live   map[*mpiReq]struct{}
}

// yieldEvery bounds the time between scheduling points of a goroutine that
// calls MPI back to back. Go 1.26's sysmon treats a goroutine that has not
// been rescheduled for 10 ms as running too long; when it is inside a cgo
// call it takes its P away and hands it to another thread, every 20 µs,
// for as long as the goroutine stays unscheduled. On an oversubscribed
// node (ranks > cores) that thread churn made a 4-rank allgather loop 4x
// slower than the same loop in C. A runtime.Gosched every millisecond
// resets the clock.
const yieldEvery = int64(time.Millisecond)

// monoStart anchors enter's monotonic clock.
var monoStart = time.Now()

// enter runs before every MPI call: it fails on a finalized world and
// yields the processor once per yieldEvery.
func (w *World) enter() error {
	if w.closed.Load() {
		return ErrClosed
	}
	if now := int64(time.Since(monoStart)); now-w.lastYield.Load() > yieldEvery {
		w.lastYield.Store(now)
		runtime.Gosched()
	}
	return nil
}

var _ Comm = (*World)(nil)

var (
	initOnce  sync.Once
	initWorld *World
	initErr   error
)

// Init initializes MPI once per process and returns the job's world. A
// process started without mpirun or srun becomes a one-rank world (MPI
// singleton). Later calls return the same World.
func Init() (*World, error) {
	initOnce.Do(func() { initWorld, initErr = initMPI() })
	return initWorld, initErr
}

func initMPI() (*World, error) {
	// OpenMPI installs handlers for SIGSEGV, SIGBUS, SIGFPE and SIGABRT
	// that would replace the Go runtime's (nil dereferences become
	// crashes). Ask it not to, unless the user chose otherwise.
	if _, set := os.LookupEnv("OMPI_MCA_opal_signal"); !set {
		os.Setenv("OMPI_MCA_opal_signal", "")
	}
	w := &World{
		calls:     make(chan func()),
		finalize:  make(chan struct{}),
		finalized: make(chan error, 1),
	}
	ready := make(chan error)
	go w.mpiThread(ready)
	if err := <-ready; err != nil {
		return nil, err
	}
	return w, nil
}

// mpiThread initializes MPI on a locked OS thread, serves calls when MPI
// did not grant MPI_THREAD_MULTIPLE, and finalizes MPI on the same thread
// that initialized it, as the MPI standard asks.
func (w *World) mpiThread(ready chan<- error) {
	runtime.LockOSThread()
	var provided C.int
	if rc := C.dhmpi_init(&provided); rc != C.MPI_SUCCESS {
		ready <- fmt.Errorf("collective: MPI_Init_thread: %w", mpiError(rc))
		return
	}
	w.multiple = provided == C.MPI_THREAD_MULTIPLE
	if err := w.setup(); err != nil {
		ready <- err
		return
	}
	ready <- nil
	for {
		select {
		case f := <-w.calls:
			f()
		case <-w.finalize:
			var err error
			for _, d := range w.dups {
				C.MPI_Comm_free(&d.comm)
			}
			C.MPI_Comm_free(&w.comm)
			if rc := C.MPI_Finalize(); rc != C.MPI_SUCCESS {
				err = fmt.Errorf("collective: MPI_Finalize: %w", mpiError(rc))
			}
			w.finalized <- err
			return
		}
	}
}

// setup duplicates the world communicator and reads rank, size, the local
// rank on this node, the host and the library version.
func (w *World) setup() error {
	if rc := C.MPI_Comm_dup(C.dhmpi_comm_world(), &w.comm); rc != C.MPI_SUCCESS {
		return fmt.Errorf("collective: MPI_Comm_dup: %w", mpiError(rc))
	}
	C.MPI_Comm_set_errhandler(w.comm, C.dhmpi_errors_return())
	w.tByte, w.tInt64 = C.dhmpi_byte(), C.dhmpi_int64()
	w.opSum, w.opMin, w.opMax = C.dhmpi_op_sum(), C.dhmpi_op_min(), C.dhmpi_op_max()
	var rank, size C.int
	C.MPI_Comm_rank(w.comm, &rank)
	C.MPI_Comm_size(w.comm, &size)
	w.rank, w.size = int(rank), int(size)

	var node C.MPI_Comm
	if rc := C.MPI_Comm_split_type(w.comm, C.MPI_COMM_TYPE_SHARED, rank, C.dhmpi_info_null(), &node); rc != C.MPI_SUCCESS {
		return fmt.Errorf("collective: MPI_Comm_split_type(MPI_COMM_TYPE_SHARED): %w", mpiError(rc))
	}
	var lrank, lsize C.int
	C.MPI_Comm_rank(node, &lrank)
	C.MPI_Comm_size(node, &lsize)
	C.MPI_Comm_free(&node)

	var name [C.MPI_MAX_PROCESSOR_NAME]C.char
	var nlen C.int
	C.MPI_Get_processor_name(&name[0], &nlen)
	var ver [C.MPI_MAX_LIBRARY_VERSION_STRING]C.char
	var vlen C.int
	C.MPI_Get_library_version(&ver[0], &vlen)
	lib := strings.TrimSpace(C.GoStringN(&ver[0], vlen))
	if i := strings.IndexByte(lib, '\n'); i >= 0 {
		lib = strings.TrimSpace(lib[:i]) // MPICH's version string spans lines
	}
	lib = strings.Join(strings.Fields(strings.TrimRight(lib, "\x00")), " ")
	policy, err := defaultWaitPolicy(int(lsize))
	if err != nil {
		return err
	}
	if policy, err = agreeWaitPolicy(w.comm, w.tInt64, w.opMax, policy); err != nil {
		return err
	}
	w.policy.Store(int32(policy))
	w.info = Info{
		LocalRank:      int(lrank),
		LocalSize:      int(lsize),
		Host:           C.GoStringN(&name[0], nlen),
		Library:        lib,
		ThreadMultiple: w.multiple,
	}
	return nil
}

// do runs f where MPI may be called: directly with MPI_THREAD_MULTIPLE,
// otherwise on the MPI thread.
func (w *World) do(f func()) error {
	if err := w.enter(); err != nil {
		return err
	}
	if w.multiple {
		f()
		return nil
	}
	done := make(chan struct{})
	w.calls <- func() { f(); close(done) }
	<-done
	return nil
}

// sub returns a World for comm, a communicator derived from w's, in which
// this process has the given rank and size. It shares w's MPI thread, info
// and predefined handles, and its root is the World Init returned.
func (w *World) sub(comm C.MPI_Comm, rank, size int) *World {
	root := w
	if w.root != nil {
		root = w.root
	}
	return &World{
		comm: comm, rank: rank, size: size, info: w.info, multiple: w.multiple,
		tByte: w.tByte, tInt64: w.tInt64, opSum: w.opSum, opMin: w.opMin, opMax: w.opMax,
		calls: root.calls, root: root,
	}
}

// Dup duplicates the communicator with MPI_Comm_dup. The duplicate shares
// the MPI thread and is freed by the root World's Finalize.
func (w *World) Dup() (Comm, error) {
	var rc C.int
	comm := new(C.MPI_Comm)
	if err := w.do(func() {
		if rc = C.MPI_Comm_dup(w.comm, comm); rc == C.MPI_SUCCESS {
			C.MPI_Comm_set_errhandler(*comm, C.dhmpi_errors_return())
		}
	}); err != nil {
		return nil, err
	}
	if err := check("MPI_Comm_dup", rc); err != nil {
		return nil, err
	}
	d := w.sub(*comm, w.rank, w.size)
	d.policy.Store(w.policy.Load())
	root := d.root
	root.mu.Lock()
	root.dups = append(root.dups, d)
	root.mu.Unlock()
	return d, nil
}

// Finalize finalizes the World Init returned, if Init opened one, as
// World.Finalize does; with no World it does nothing.
func Finalize() error {
	if initWorld == nil {
		return nil
	}
	return initWorld.Finalize()
}

// Finalize frees the communicator and calls MPI_Finalize. Every rank must
// call it before a clean exit; no operation may follow.
func (w *World) Finalize() error {
	if w.root != nil {
		return fmt.Errorf("collective: Finalize called on a duplicate; call it on the World Init returned")
	}
	if !w.closed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	w.mu.Lock()
	for _, d := range w.dups {
		d.closed.Store(true)
	}
	w.mu.Unlock()
	close(w.finalize)
	return <-w.finalized
}

// Rank returns this process's rank.
func (w *World) Rank() int { return w.rank }

// Size returns the number of processes in the job.
func (w *World) Size() int { return w.size }

// Info describes where this rank runs.
func (w *World) Info() Info { return w.info }

// ptr returns the address of b's first byte, or nil for an empty slice
// (which MPI accepts with a zero count).
func ptr(b []byte) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Pointer(&b[0])
}

// count converts a length to MPI's int count.
func count(n int) (C.int, error) {
	if n < 0 || n > math.MaxInt32 {
		return 0, fmt.Errorf("%w: %d bytes exceed MPI's int count", ErrSize, n)
	}
	return C.int(n), nil
}

// Abort prints msg and ends every process of the job with MPI_Abort. It
// does not return.
func (w *World) Abort(code int, msg string) {
	// The node too: on a cluster, where to look is the first question.
	who := fmt.Sprintf("rank %d", w.rank)
	if w.info.Host != "" {
		who += " on " + w.info.Host
	}
	fmt.Fprintf(os.Stderr, "datahelix: %s aborting the job: %s\n", who, msg)
	// The launcher must read that line before the abort reaches it.
	awaitPipeRead(2, abortFallback/6)
	// If MPI_Abort neither returns nor ends the job, a rank that exits
	// without MPI_Finalize also ends it under both launchers, so that is
	// the fall-back; not when Open MPI is asked to hold an aborting rank
	// for a debugger to attach (mpi_abort_delay).
	if os.Getenv("OMPI_MCA_mpi_abort_delay") == "" {
		time.AfterFunc(abortFallback, func() {
			fmt.Fprintf(os.Stderr, "datahelix: %s: MPI_Abort did not end the job within %v; exiting with code %d\n", who, abortFallback, code)
			os.Exit(code)
		})
	}
	// Called directly, not through the MPI thread: the thread may be
	// blocked in a collective that will never complete. On
	// MPI_COMM_WORLD, not the duplicate the ranks talk on: MPICH 4.0
	// aborts any other communicator by messaging its members, which
	// spins on the lock of a thread blocked in a collective, and the
	// job then ended by the fall-back with whichever exit code the
	// launcher saw first (1 or 9 in 2 runs of 15, not the abort's). On
	// the world communicator it goes straight to the process manager.
	C.MPI_Abort(C.dhmpi_comm_world(), C.int(code))
	os.Exit(code)
}

// abortFallback is how long Abort lets MPI_Abort end the job before the
// rank exits by itself.
const abortFallback = 3 * time.Second

// check turns an MPI return code into an error naming the call.
func check(call string, rc C.int) error {
	if rc == C.MPI_SUCCESS {
		return nil
	}
	return mpiOpError(call, rc)
}

func mpiOpError(call string, rc C.int) error {
	return fmt.Errorf("collective: %s: %w", call, mpiError(rc))
}

// mpiError is an error code from the MPI library with its message.
type mpiError C.int

func (e mpiError) Error() string {
	var buf [512]C.char
	C.dhmpi_error_string(C.int(e), &buf[0], C.int(len(buf)))
	return C.GoString(&buf[0])
}

// Is maps MPI error classes onto the package's sentinel errors.
func (e mpiError) Is(target error) bool {
	switch C.dhmpi_error_class(C.int(e)) {
	case C.MPI_ERR_TRUNCATE:
		return target == ErrTruncate
	case C.MPI_ERR_RANK:
		return target == ErrRank
	case C.MPI_ERR_COUNT, C.MPI_ERR_BUFFER:
		return target == ErrSize
	}
	return false
}
