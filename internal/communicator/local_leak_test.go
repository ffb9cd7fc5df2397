package communicator

import (
	"runtime"
	"sync"
	"testing"
)

// TestLocalMailboxesDoNotKeepMessages checks that the in-process world
// lets go of point-to-point messages once they are received. A job sends
// with a new tag every step, and 'run --ranks N' exchanges about a
// megabyte a step: a mailbox kept per tag, its queue's array still
// holding the last message, grew the process by that much a step (343 MiB
// at 100 steps, 1055 MiB at 800). Half the messages here arrive before
// their receive is posted, half after.
func TestLocalMailboxesDoNotKeepMessages(t *testing.T) {
	const steps, size = 64, 1 << 20
	ranks := newLocal(2)
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, c := range ranks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := range steps {
				sendFirst := s%2 == 0
				var r *Request
				var err error
				if i == 1 && !sendFirst {
					if r, err = c.Irecv(make([]byte, size), 0, s); err != nil {
						errs[i] = err
						return
					}
				}
				if i == 0 && sendFirst {
					_, err = c.IsendParts([][]byte{make([]byte, size/2), make([]byte, size/2)}, 1, s)
				}
				if err == nil {
					err = c.Barrier()
				}
				if err == nil && i == 0 && !sendFirst {
					_, err = c.Isend(make([]byte, size), 1, s)
				}
				if err == nil && i == 1 {
					if sendFirst {
						r, err = c.Irecv(make([]byte, size), 0, s)
					}
					if err == nil {
						err = c.WaitAll([]*Request{r})
					}
				}
				if err != nil {
					errs[i] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", i, err)
		}
	}
	grown := int64(heap()) - int64(before)
	runtime.KeepAlive(ranks)
	w := ranks[0].w
	w.mu.Lock()
	boxes := len(w.boxes)
	w.mu.Unlock()
	if boxes != 0 || grown > steps*size/4 {
		t.Errorf("after %d messages of %d KiB received: %d mailboxes kept, heap grown by %d KiB; want none, well under the %d KiB sent",
			steps, size>>10, boxes, grown>>10, steps*size>>10)
	}
}
