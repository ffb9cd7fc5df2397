package launcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/datahelix/datahelix/collective"
)

func TestFirstFailedRank(t *testing.T) {
	tests := []struct {
		failing []int
		want    int
	}{
		{nil, -1},
		{[]int{2}, 2},
		{[]int{3, 1}, 1},
		{[]int{0, 1, 2, 3}, 0},
	}
	for _, tt := range tests {
		errs := collective.RunLocal(context.Background(), 4, func(ctx context.Context, c collective.Comm) error {
			got, err := firstFailedRank(c, slices.Contains(tt.failing, c.Rank()))
			if err != nil {
				return err
			}
			if got != tt.want {
				return fmt.Errorf("got %d, want %d", got, tt.want)
			}
			return nil
		})
		for r, err := range errs {
			if err != nil {
				t.Errorf("ranks %v failing: rank %d: %v", tt.failing, r, err)
			}
		}
	}
}

// TestAgreeOnError fails ranks 1 and 3 of 4: every rank must return the
// same AllRanks error carrying rank 1's message (rank 0 prints it, so it
// can no longer come before the failing rank's own line), and rank 1's
// must still wrap its cause.
func TestAgreeOnError(t *testing.T) {
	cause := errors.New("open /data/shard-7.tar: permission denied")
	errs := collective.RunLocal(context.Background(), 4, func(ctx context.Context, c collective.Comm) error {
		var err error
		switch c.Rank() {
		case 1:
			err = cause
		case 3:
			err = errors.New("another")
		}
		return agreeOnError(c, err, "cannot open the dataset")
	})
	want := "rank 1 cannot open the dataset: open /data/shard-7.tar: permission denied (and 1 more rank failed)"
	for r, err := range errs {
		if !collective.IsAllRanks(err) || err.Error() != want {
			t.Errorf("rank %d: got %v, want an AllRanks %q", r, err, want)
		}
	}
	if !errors.Is(errs[1], cause) {
		t.Errorf("rank 1's error does not wrap its cause: %v", errs[1])
	}
	for r, err := range collective.RunLocal(context.Background(), 2, func(ctx context.Context, c collective.Comm) error {
		return agreeOnError(c, nil, "cannot open the dataset")
	}) {
		if err != nil {
			t.Errorf("no rank failed: rank %d: %v", r, err)
		}
	}
	// A rank stopped by a signal: every rank's error must still be a
	// cancellation, so that each reports the signal, not a failure.
	for r, err := range collective.RunLocal(context.Background(), 2, func(ctx context.Context, c collective.Comm) error {
		var err error
		if c.Rank() == 0 {
			err = fmt.Errorf("generate the default dataset: %w", context.Canceled)
		}
		return agreeOnError(c, err, "failed")
	}) {
		if !errors.Is(err, context.Canceled) || err.Error() != "rank 0 failed: generate the default dataset: context canceled" {
			t.Errorf("a cancelled rank 0: rank %d: %v; want a cancellation with rank 0's text", r, err)
		}
	}
}

// TestDefaultDatasetFailsEveryRank fails the default dataset's generation
// on the rank that makes it: every rank must return the same AllRanks
// error carrying that rank's, so that rank 0 prints one line and the job
// ends cleanly (the failing rank used to abort the job while rank 0
// printed that "another node" failed).
func TestDefaultDatasetFailsEveryRank(t *testing.T) {
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r, c := range collective.NewLocal(2) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[r] = defaultDataset(context.Background(), c, "/proc/nope", 1, io.Discard)
		}()
	}
	wg.Wait()
	want := "rank 0 failed: generate the default dataset: "
	for r, err := range errs {
		if !collective.IsAllRanks(err) || !strings.HasPrefix(err.Error(), want) || err.Error() != errs[0].Error() {
			t.Errorf("rank %d: got %v, want an AllRanks error starting %q, as rank 0's", r, err, want)
		}
	}
}
