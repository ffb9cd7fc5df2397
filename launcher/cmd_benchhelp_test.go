package launcher

import (
	"errors"
	"testing"
)

func TestBenchExchangeRanks(t *testing.T) {
	// Its message is in testdata/bench_usage_errors.golden.
	for _, n := range []string{"1", "3"} {
		var fe flagError
		if err := commandErr(t, "bench", "exchange", "--ranks", n); !errors.As(err, &fe) || fe.flag != "ranks" || exitStatus(err) != exitUsage {
			t.Errorf("bench exchange --ranks %s: %v; want a usage error about --ranks", n, err)
		}
	}
}
