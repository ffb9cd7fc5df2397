package communicator_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/datahelix/datahelix/internal/collectivetest"
	"github.com/datahelix/datahelix/internal/communicator"
)

// runLocal runs f on every rank of an n-rank in-process world and returns
// the errors by rank.
func runLocal(n int, f func(c communicator.Comm) error, opts ...communicator.LocalOption) []error {
	ranks := communicator.NewLocalWith(n, opts...)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, c := range ranks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(c)
		}()
	}
	wg.Wait()
	return errs
}

func TestLocalConformance(t *testing.T) {
	for _, n := range []int{1, 2, 4, 8} {
		if n == 8 && raceEnabled {
			continue // 8 ranks of 16 MiB blocks take a minute under -race
		}
		t.Run(fmt.Sprintf("ranks=%d", n), func(t *testing.T) {
			for r, err := range runLocal(n, collectivetest.Run) {
				if err != nil {
					t.Errorf("rank %d: %v", r, err)
				}
			}
		})
	}
}

func TestLocalDifferentCollectivesFail(t *testing.T) {
	errs := runLocal(3, func(c communicator.Comm) error {
		if c.Rank() == 1 {
			return c.Bcast(make([]byte, 1), 0)
		}
		return c.Barrier()
	})
	for r, err := range errs {
		if err == nil {
			t.Errorf("rank %d: got nil, want an error naming the mismatch", r)
		}
	}
}

func TestLocalAllgatherBlockSizesDiffer(t *testing.T) {
	errs := runLocal(3, func(c communicator.Comm) error {
		n := 4
		if c.Rank() == 2 {
			n = 5
		}
		return c.Allgather(make([]byte, n), make([]byte, 3*n))
	})
	for r, err := range errs {
		if !errors.Is(err, communicator.ErrSize) {
			t.Errorf("rank %d: got %v, want ErrSize", r, err)
		}
	}
}

func TestLocalAbortUnblocksEveryRank(t *testing.T) {
	var mu sync.Mutex
	var calls []string
	hook := communicator.WithAbortHook(func(rank, code int, msg string) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, fmt.Sprintf("%d:%d:%s", rank, code, msg))
	})
	done := make(chan []error)
	go func() {
		done <- runLocal(4, func(c communicator.Comm) error {
			if c.Rank() == 3 {
				c.Abort(5, "disk on fire")
				return nil
			}
			// Blocks forever unless the abort fails it.
			if _, err := c.Irecv(make([]byte, 1), 3, 1); err != nil {
				return err
			}
			return c.Barrier()
		}, hook)
	}()
	select {
	case errs := <-done:
		for r := 0; r < 3; r++ {
			if !errors.Is(errs[r], communicator.ErrAborted) {
				t.Errorf("rank %d: got %v, want ErrAborted", r, errs[r])
			}
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ranks still blocked 10 s after Abort")
	}
	if len(calls) != 1 || calls[0] != "3:5:disk on fire" {
		t.Errorf("abort hook calls = %q, want one call from rank 3 with code 5", calls)
	}
}

// TestLocalTruncatedReceive checks that a message longer than its receive
// buffer fails the receive. The shared suite leaves this out: OpenMPI 4.1
// reports MPI_ERR_TRUNCATE but a job can then hang in its shared-memory
// transport, so the runtime always posts receives with exact sizes.
func TestLocalTruncatedReceive(t *testing.T) {
	errs := runLocal(3, func(c communicator.Comm) error {
		n, me := c.Size(), c.Rank()
		rr, err := c.Irecv(make([]byte, 10), (me+n-1)%n, 13)
		if err != nil {
			return err
		}
		sr, err := c.Isend(make([]byte, 100), (me+1)%n, 13)
		if err != nil {
			return err
		}
		return c.WaitAll([]*communicator.Request{sr, rr})
	})
	for r, err := range errs {
		if !errors.Is(err, communicator.ErrTruncate) {
			t.Errorf("rank %d: got %v, want ErrTruncate", r, err)
		}
	}
}

func TestLocalAbortReachesDuplicates(t *testing.T) {
	done := make(chan []error)
	go func() {
		done <- runLocal(3, func(c communicator.Comm) error {
			d, err := c.Dup()
			if err != nil {
				return err
			}
			if c.Rank() == 0 {
				c.Abort(1, "stop")
				return nil
			}
			return d.Barrier() // on the duplicate, which rank 0 never enters
		}, communicator.WithAbortHook(func(int, int, string) {}))
	}()
	select {
	case errs := <-done:
		for r := 1; r < 3; r++ {
			if !errors.Is(errs[r], communicator.ErrAborted) {
				t.Errorf("rank %d: got %v, want ErrAborted", r, errs[r])
			}
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ranks blocked on a duplicate after Abort")
	}
}
