package loader

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/datahelix/datahelix/collective"
	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/internal/gen/gentest"
)

// TestLoaderStallTimeout: a loader with Config.StallTimeout aborts the
// world when its rank delivers nothing (the training loop never asks),
// naming the timeout, instead of leaving every rank waiting.
func TestLoaderStallTimeout(t *testing.T) {
	data := gentest.Tiny(t)
	cfg := Config{Loader: KindHelix, Batch: 2, Steps: 30, Horizon: 2, Workers: 1, Seed: 1, Decode: decode.Options{Frames: 2, Size: 32}, StallTimeout: time.Second}
	start := time.Now()
	errs := collective.RunLocal(context.Background(), 2, func(ctx context.Context, c collective.Comm) error {
		ds, err := decode.OpenDatasetPart(data, "", c.Rank(), c.Size())
		if err != nil {
			return err
		}
		defer ds.Close()
		l, err := NewLoader(ctx, c, ds, cfg)
		if err != nil {
			return err
		}
		defer l.Close()
		if c.Rank() == 0 {
			for { // rank 1 never asks: rank 0 soon waits for its plans
				if _, err := l.Next(ctx); err != nil {
					return err
				}
			}
		}
		<-ctx.Done()
		return context.Cause(ctx)
	})
	took := time.Since(start)
	aborted := false
	for _, err := range errs {
		// The rank that aborted fails with the watch's error; the other
		// may see the abort itself, or the cancellation naming it.
		var failed collective.RankFailedError
		if err != nil && (strings.Contains(err.Error(), "no step delivered for 1s") ||
			errors.As(err, &failed) && strings.Contains(failed.Reason, "no step delivered for 1s")) {
			aborted = true
		}
	}
	if !aborted || took > 20*time.Second || took < time.Second {
		t.Errorf("after %v: errors %v, want the watch to abort the world naming the timeout", took, errs)
	}
}
