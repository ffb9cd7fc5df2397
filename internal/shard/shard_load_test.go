package shard

import (
	"archive/tar"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/datahelix/datahelix/internal/shardindex"
	"github.com/datahelix/datahelix/internal/tartest"
)

// loadWatch counts the loads of one shard (its load hook) and the reads
// that wait for them, and holds every load up until release.
type loadWatch struct {
	t      *testing.T
	loads  atomic.Int32
	waits  atomic.Int32
	events chan struct{} // one per load or wait begun
	gate   chan struct{} // closed by release
	once   sync.Once
	wg     sync.WaitGroup // the goroutines of spawn
	// onLoad, when set before the first load, runs in each load once
	// the gate opens, with the load's number from 1.
	onLoad func(n int32)
}

// watchLoads sets s's load hook to watch its loads until the test ends,
// when its goroutines are released and waited for.
func watchLoads(t *testing.T, s *Shard) *loadWatch {
	w := &loadWatch{t: t, events: make(chan struct{}, 256), gate: make(chan struct{})}
	s.loadHook = func(wait bool) {
		if wait {
			w.waits.Add(1)
			w.events <- struct{}{}
			return
		}
		n := w.loads.Add(1)
		w.events <- struct{}{}
		<-w.gate
		if w.onLoad != nil {
			w.onLoad(n)
		}
	}
	t.Cleanup(func() {
		w.release()
		w.wg.Wait()
		s.loadHook = nil
	})
	return w
}

// release lets the loads held up and all later ones go on.
func (w *loadWatch) release() { w.once.Do(func() { close(w.gate) }) }

// spawn runs f in a goroutine that the test's end waits for.
func (w *loadWatch) spawn(f func()) {
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		f()
	}()
}

// await waits until loads loads and waits waiting reads have begun.
func (w *loadWatch) await(loads, waits int32) {
	w.t.Helper()
	timeout := time.After(10 * time.Second)
	for w.loads.Load() < loads || w.waits.Load() < waits {
		select {
		case <-w.events:
		case <-timeout:
			w.t.Fatalf("after 10s %d loads and %d waiting reads began, want %d and %d", w.loads.Load(), w.waits.Load(), loads, waits)
		}
	}
}

// loadTestShard writes a shard of samples "a" ("A") and "b" ("B") and
// opens it, its index cached in a directory of its own: nothing is
// loaded until it is read.
func loadTestShard(t *testing.T) (*Shard, string) {
	t.Helper()
	p := tartest.WriteFile(t, t.TempDir(), "s.tar", tartest.Write(t, tar.FormatPAX, []tartest.File{{Name: "a.txt", Data: "A"}, {Name: "b.txt", Data: "B"}}))
	s, err := Open(p, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, p
}

// checkSample checks that sample j of s ("a", "b") holds "A", "B".
func checkSample(s *Shard, j int) error {
	smp, err := s.ReadSample(j)
	if err != nil {
		return err
	}
	if want := string(rune('A' + j)); string(smp.Members[0].Data) != want {
		return fmt.Errorf("sample %d holds %q, want %q", j, smp.Members[0].Data, want)
	}
	return nil
}

// filesOpen counts the file descriptors of this process open on the
// file p.
func filesOpen(t *testing.T, p string) int {
	t.Helper()
	p, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot list open files: %v", err)
	}
	n := 0
	for _, fd := range fds {
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name())); err == nil && l == p {
			n++
		}
	}
	return n
}

const concurrentReaders = 8

// readConcurrently reads a sample of s from concurrentReaders goroutines
// while its first load is held up until they all wait for it, and returns
// their errors.
func readConcurrently(t *testing.T, s *Shard, w *loadWatch) []error {
	t.Helper()
	errs := make([]error, concurrentReaders)
	var wg sync.WaitGroup
	for g := range concurrentReaders {
		wg.Add(1)
		w.spawn(func() {
			defer wg.Done()
			defer func() {
				if r := recover(); r != nil {
					errs[g] = fmt.Errorf("panic: %v", r)
				}
			}()
			errs[g] = checkSample(s, g%2)
		})
	}
	w.await(1, concurrentReaders-1)
	w.release()
	wg.Wait()
	return errs
}

// TestShardLoadShared reads a shard that is not loaded from many
// goroutines at once: one loads its file and index, the others wait for
// that load and use it.
func TestShardLoadShared(t *testing.T) {
	s, p := loadTestShard(t)
	w := watchLoads(t, s)
	for g, err := range readConcurrently(t, s, w) {
		if err != nil {
			t.Errorf("reader %d: %v", g, err)
		}
	}
	if n := w.loads.Load(); n != 1 {
		t.Errorf("%d readers of a shard not loaded loaded it %d times, want once", concurrentReaders, n)
	}
	if n := filesOpen(t, p); n != 1 {
		t.Errorf("%d files open on the shard after the reads, want 1 (kept for the next read)", n)
	}
}

// TestShardLoadFailureShared reads a shard that cannot be loaded (it was
// truncated since it was opened) from many goroutines at once: every
// reader gets the error of the one load, rather than each loading the
// shard again in turn. A read after that load ended tries again.
func TestShardLoadFailureShared(t *testing.T) {
	s, p := loadTestShard(t)
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, st.Size()-512); err != nil {
		t.Fatal(err)
	}
	w := watchLoads(t, s)
	errs := readConcurrently(t, s, w)
	for g, err := range errs {
		if !errors.Is(err, shardindex.ErrCorruptShard) || !strings.Contains(err.Error(), p) {
			t.Errorf("reader %d of a truncated shard: %v, want ErrCorruptShard naming %s", g, err, p)
		}
	}
	if n := w.loads.Load(); n != 1 {
		t.Errorf("%d readers of a shard that fails to load loaded it %d times, want once", concurrentReaders, n)
	}
	if n := filesOpen(t, p); n != 0 {
		t.Errorf("%d files open on the shard after its load failed, want 0", n)
	}

	// Put the shard back as it was opened: the next read loads it.
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	if err := checkSample(s, 1); err != nil {
		t.Errorf("read after the shard was restored: %v", err)
	}
	if n := w.loads.Load(); n != 2 {
		t.Errorf("%d loads after the failed one and a read after it, want 2", n)
	}
}

// TestShardLoadPanicShared reads a shard from many goroutines while its
// load panics: the readers that wait for it fail rather than hang, and
// a later read loads the shard.
func TestShardLoadPanicShared(t *testing.T) {
	s, _ := loadTestShard(t)
	w := watchLoads(t, s)
	w.onLoad = func(n int32) {
		if n == 1 {
			panic("load fails")
		}
	}
	errs := readConcurrently(t, s, w)
	panicked, failed := 0, 0
	for _, err := range errs {
		switch {
		case err != nil && strings.HasPrefix(err.Error(), "panic: load fails"):
			panicked++
		case err != nil && strings.Contains(err.Error(), "loading its file and index panicked"):
			failed++
		}
	}
	if panicked != 1 || failed != concurrentReaders-1 {
		t.Errorf("readers during a load that panicked: %d panicked, %d failed (%v); want 1 and %d", panicked, failed, errs, concurrentReaders-1)
	}
	if err := checkSample(s, 0); err != nil {
		t.Errorf("read after the load that panicked: %v", err)
	}
	if n := w.loads.Load(); n != 2 {
		t.Errorf("%d loads, want 2 (the one that panicked, then the later read's)", n)
	}
}

// TestShardCloseDuringLoad closes a shard while its file and index are
// being loaded for a read: that read gets its sample and then closes the
// file, a read that waited for the load loads the shard again (after the
// Close), and nothing stays open after the next Close.
func TestShardCloseDuringLoad(t *testing.T) {
	s, p := loadTestShard(t)
	w := watchLoads(t, s)
	errs := make(chan error, 2)
	w.spawn(func() { errs <- checkSample(s, 0) })
	w.await(1, 0)
	w.spawn(func() { errs <- checkSample(s, 1) })
	w.await(1, 1)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	w.release()
	for range 2 {
		if err := <-errs; err != nil {
			t.Errorf("read during Close: %v", err)
		}
	}
	if n := w.loads.Load(); n != 2 {
		t.Errorf("%d loads, want 2 (the one Close overtook, then the waiting read's)", n)
	}
	if n := filesOpen(t, p); n != 1 {
		t.Errorf("%d files open on the shard, want 1: the load after Close, kept for the next read", n)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if n := filesOpen(t, p); n != 0 {
		t.Errorf("%d files open on the shard after Close, want 0", n)
	}
}

// TestShardCloseDuringLoneLoad closes a shard while its file and index
// are being loaded for a read that nobody waits for: the read gets its
// sample, closes the file when it ends, and a later read loads the shard
// again.
func TestShardCloseDuringLoneLoad(t *testing.T) {
	s, p := loadTestShard(t)
	w := watchLoads(t, s)
	errs := make(chan error, 1)
	w.spawn(func() { errs <- checkSample(s, 1) })
	w.await(1, 0)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	w.release()
	if err := <-errs; err != nil {
		t.Errorf("read during Close: %v", err)
	}
	if n := filesOpen(t, p); n != 0 {
		t.Errorf("%d files open on the shard after a read that Close overtook, want 0", n)
	}
	if err := checkSample(s, 0); err != nil {
		t.Errorf("read after Close: %v", err)
	}
	if n := w.loads.Load(); n != 2 {
		t.Errorf("%d loads, want 2 (the one Close overtook, then the later read's)", n)
	}
	if n := filesOpen(t, p); n != 1 {
		t.Errorf("%d files open on the shard after the later read, want 1 (kept for the next read)", n)
	}
}
