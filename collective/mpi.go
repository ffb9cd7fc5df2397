//go:build !nompi

package collective

/*
#include <stdlib.h>
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
	policy    atomic.Int32 // a WaitPolicy
	parts     partsMode    // DATAHELIX_MPI_PARTS, read once at Init
	joins     joinBufs     // the buffers IsendParts joins messages into

	// live holds the requests started and not yet completed by WaitAll.
	// MPI may still read or write their buffers, so they must stay pinned
	// and reachable even when a failing caller drops a request: a
	// collected Pinner that still pins makes the Go runtime panic.
	liveMu sync.Mutex
	live   map[*mpiReq]struct{}
}

// hold keeps r's buffers pinned and reachable until WaitAll completes it.
func (w *World) hold(r *mpiReq) {
	r.owner = w
	w.liveMu.Lock()
	if w.live == nil {
		w.live = make(map[*mpiReq]struct{})
	}
	w.live[r] = struct{}{}
	w.liveMu.Unlock()
}

// release ends hold for a completed request, on the World that started
// it, and gives back the buffer IsendParts joined its message into.
func (r *mpiReq) release() {
	r.owner.liveMu.Lock()
	delete(r.owner.live, r)
	r.owner.liveMu.Unlock()
	if r.joined != nil {
		r.owner.joins.put(r.joined)
		r.joined = nil
	}
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

// Available reports whether this binary was built with MPI support.
func Available() bool { return true }

// Flavor names the MPI library the binary was built against: "openmpi" or
// "mpich".
func Flavor() string { return mpiFlavor }

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
	if w.parts, err = partsModeFromEnv(); err != nil {
		return err
	}
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
	d.parts = w.parts
	root := d.root
	root.mu.Lock()
	root.dups = append(root.dups, d)
	root.mu.Unlock()
	return d, nil
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

// mpiReq is the MPI side of a Request: the handle and the pin that keeps
// the buffer in place until the request completes.
type mpiReq struct {
	// handle is its own allocation: cgo may only be handed pointers to
	// memory that holds no Go pointers, and pin holds some.
	handle *C.MPI_Request
	pin    runtime.Pinner
	recv   bool
	owner  *World // that started it and holds it until it completes
	joined []byte // the buffer IsendParts joined the message into, if any
}

// Isend starts MPI_Isend; buf stays pinned until WaitAll completes it.
func (w *World) Isend(buf []byte, dest, tag int) (*Request, error) {
	return w.start(buf, dest, tag, false)
}

// Irecv starts MPI_Irecv; buf stays pinned until WaitAll completes it.
func (w *World) Irecv(buf []byte, src, tag int) (*Request, error) {
	return w.start(buf, src, tag, true)
}

// Messages whose parts are few and large go out where they lie; small or
// finely cut ones are joined first, where a copy costs less than building
// a datatype and having the library walk its blocks. Measured with Open MPI
// on one node: 16 parts of 300 KB took 130 µs as an hindexed send and 215
// µs joined; 256 parts of 500 B took 19 µs hindexed and 6 µs joined.
const (
	joinTotalBelow = 64 << 10 // bytes in the message
	joinPartBelow  = 8 << 10  // mean bytes per part
)

// partsMode is how IsendParts sends a message of several parts, from
// DATAHELIX_MPI_PARTS.
type partsMode int32

const (
	partsAuto    partsMode = iota // in place when large, by the sizes above
	partsJoin                     // always joined into one buffer
	partsInPlace                  // always in place
)

// PartsMode names how IsendParts sends a message of several parts, as
// DATAHELIX_MPI_PARTS spells it: auto, join or inplace.
func (w *World) PartsMode() string { return w.parts.String() }

// String names the mode as DATAHELIX_MPI_PARTS spells it.
func (m partsMode) String() string {
	return [...]string{"auto", "join", "inplace"}[m]
}

// partsModeFromEnv reads DATAHELIX_MPI_PARTS: auto (or unset), join or
// inplace. Transports differ in how they send a derived datatype (a
// network library may pack it where it would send a contiguous buffer
// without a copy), so a cluster can measure both with datahelix bench
// exchange and pick.
func partsModeFromEnv() (partsMode, error) {
	switch v := os.Getenv("DATAHELIX_MPI_PARTS"); v {
	case "", "auto":
		return partsAuto, nil
	case "join":
		return partsJoin, nil
	case "inplace":
		return partsInPlace, nil
	default:
		return partsAuto, fmt.Errorf("collective: DATAHELIX_MPI_PARTS=%q: want auto, join or inplace", v)
	}
}

// IsendParts starts one MPI_Isend of the concatenation of parts. A
// message of at least joinTotalBelow bytes in parts of at least
// joinPartBelow bytes on average is not copied: an hindexed datatype
// points at each part where it lies, and the parts stay pinned until
// WaitAll completes the request. A smaller or more finely cut one is
// joined into a buffer, reused once WaitAll has completed its send, and
// sent. A single non-empty part is sent as it is, whatever its size.
// DATAHELIX_MPI_PARTS=join or inplace makes every message of several
// parts go one way.
func (w *World) IsendParts(parts [][]byte, dest, tag int) (*Request, error) {
	var total, n int
	for _, p := range parts {
		total += len(p)
		if len(p) > 0 {
			n++
		}
	}
	if _, err := count(total); err != nil {
		return nil, err
	}
	if n <= 1 {
		for _, p := range parts {
			if len(p) > 0 {
				return w.Isend(p, dest, tag)
			}
		}
		return w.Isend(nil, dest, tag)
	}
	if w.parts == partsJoin || w.parts == partsAuto && (total < joinTotalBelow || total < n*joinPartBelow) {
		buf := w.joins.join(parts)
		r, err := w.Isend(buf, dest, tag)
		if err != nil {
			w.joins.put(buf) // MPI did not take it
			return nil, err
		}
		r.mpi.joined = buf
		return r, nil
	}
	if err := w.checkPeer(dest); err != nil {
		return nil, err
	}
	// The block table is C memory: it holds the parts' addresses, which
	// cgo allows only for pinned Go memory.
	var (
		l C.int
		a C.MPI_Aint
	)
	lens := (*C.int)(C.malloc(C.size_t(n) * C.size_t(unsafe.Sizeof(l))))
	defer C.free(unsafe.Pointer(lens))
	addrs := (*C.MPI_Aint)(C.malloc(C.size_t(n) * C.size_t(unsafe.Sizeof(a))))
	defer C.free(unsafe.Pointer(addrs))
	ls, as := unsafe.Slice(lens, n), unsafe.Slice(addrs, n)
	r := &Request{mpi: &mpiReq{handle: new(C.MPI_Request)}, n: total}
	i := 0
	for _, p := range parts {
		if len(p) == 0 {
			continue
		}
		r.mpi.pin.Pin(&p[0])
		// The address as an integer is what MPI_Get_address returns on
		// every flat-memory target MPI runs on.
		ls[i], as[i] = C.int(len(p)), C.MPI_Aint(uintptr(unsafe.Pointer(&p[0])))
		i++
	}
	handle := r.mpi.handle
	var rc, failed C.int
	if err := w.do(func() {
		rc = C.dhmpi_isend_parts(C.int(n), lens, addrs, C.int(dest), C.int(tag), w.comm, handle, &failed)
	}); err != nil {
		r.mpi.pin.Unpin()
		return nil, err
	}
	if err := check([]string{"MPI_Type_create_hindexed", "MPI_Type_commit", "MPI_Isend"}[failed], rc); err != nil {
		r.mpi.pin.Unpin()
		return nil, err
	}
	w.hold(r.mpi)
	return r, nil
}

// checkPeer reports a point-to-point peer outside the world.
func (w *World) checkPeer(peer int) error {
	if peer < 0 || peer >= w.size {
		return fmt.Errorf("%w: peer rank %d not in [0,%d)", ErrRank, peer, w.size)
	}
	return nil
}

func (w *World) start(buf []byte, peer, tag int, recv bool) (*Request, error) {
	if err := w.checkPeer(peer); err != nil {
		return nil, err
	}
	n, err := count(len(buf))
	if err != nil {
		return nil, err
	}
	r := &Request{mpi: &mpiReq{recv: recv, handle: new(C.MPI_Request)}}
	p := ptr(buf)
	if p != nil {
		r.mpi.pin.Pin(p)
	}
	handle := r.mpi.handle
	var rc C.int
	if err := w.do(func() {
		if recv {
			rc = C.MPI_Irecv(p, n, w.tByte, C.int(peer), C.int(tag), w.comm, handle)
		} else {
			rc = C.MPI_Isend(p, n, w.tByte, C.int(peer), C.int(tag), w.comm, handle)
		}
	}); err != nil {
		r.mpi.pin.Unpin()
		return nil, err
	}
	name := "MPI_Isend"
	if recv {
		name = "MPI_Irecv"
	}
	if err := check(name, rc); err != nil {
		r.mpi.pin.Unpin()
		return nil, err
	}
	if !recv {
		r.n = len(buf)
	}
	w.hold(r.mpi)
	return r, nil
}

// WaitAll completes the requests with MPI_Waitall, unpins their buffers
// and ends the World's hold on them.
func (w *World) WaitAll(reqs []*Request) error {
	var pending []*Request
	for _, r := range reqs {
		if r != nil && !r.done && r.mpi != nil {
			pending = append(pending, r)
		}
	}
	if len(pending) == 0 {
		return firstErr(reqs)
	}
	var h C.MPI_Request
	handles := (*C.MPI_Request)(C.malloc(C.size_t(len(pending)) * C.size_t(unsafe.Sizeof(h))))
	defer C.free(unsafe.Pointer(handles))
	statuses := (*C.MPI_Status)(C.malloc(C.size_t(len(pending)) * C.size_t(unsafe.Sizeof(C.MPI_Status{}))))
	defer C.free(unsafe.Pointer(statuses))
	hs := unsafe.Slice(handles, len(pending))
	ss := unsafe.Slice(statuses, len(pending))
	for i, r := range pending {
		hs[i] = *r.mpi.handle
	}
	var rc C.int
	if w.sleeping() {
		var err error
		rc, err = w.pollBackoff(func() (bool, C.int) {
			var flag C.int
			rc := C.MPI_Testall(C.int(len(pending)), handles, &flag, statuses)
			return flag != 0, rc
		})
		if err != nil {
			return err
		}
	} else if err := w.do(func() {
		rc = C.MPI_Waitall(C.int(len(pending)), handles, statuses)
	}); err != nil {
		return err
	}
	for i, r := range pending {
		*r.mpi.handle = hs[i]
		r.done = true
		code := C.int(C.MPI_SUCCESS)
		if rc == C.MPI_ERR_IN_STATUS {
			code = C.dhmpi_status_error(&ss[i])
		} else if rc != C.MPI_SUCCESS {
			code = rc
		}
		if code != C.MPI_SUCCESS {
			r.err = mpiOpError("MPI_Waitall", code)
		}
		if r.mpi.recv && code == C.MPI_SUCCESS {
			var n C.int
			C.MPI_Get_count(&ss[i], w.tByte, &n)
			r.n = int(n)
		}
		r.mpi.pin.Unpin()
		r.mpi.release()
	}
	return firstErr(reqs)
}

func firstErr(reqs []*Request) error {
	for _, r := range reqs {
		if r != nil && r.err != nil {
			return r.err
		}
	}
	return nil
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
