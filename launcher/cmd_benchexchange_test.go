package launcher

import (
	"encoding/json"
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/internal/bench"
	"github.com/datahelix/datahelix/internal/cli"
	"github.com/datahelix/datahelix/internal/cli/clitest"
	"github.com/datahelix/datahelix/internal/gen/gentest"
)

func TestBenchExchangeRanks(t *testing.T) {
	// Its message is in testdata/bench_exchange_usage_errors.golden.
	for _, n := range []string{"1", "3"} {
		var fe cli.FlagError
		if err := commandErr(t, "bench", "exchange", "--ranks", n); !errors.As(err, &fe) || fe.Flag != "ranks" || cli.ExitStatus(err) != cli.ExitUsage {
			t.Errorf("bench exchange --ranks %s: %v; want a usage error about --ranks", n, err)
		}
	}
}

// TestBenchExchangeUnderMPIRun runs the exchange measurement on 2 real
// MPI ranks and checks the line rank 0 prints; one rank is a clear error.
func TestBenchExchangeUnderMPIRun(t *testing.T) {
	data := gentest.Tiny(t)
	out, err := mpirunMain(t, 2, "bench", "exchange", "--data", data, "--samples", "3", "--rounds", "5", "--cache-dir", t.TempDir())
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var r bench.GoExchange
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &r); err != nil {
		t.Fatalf("last line is not the result: %v\n%s", err, out)
	}
	// Three samples of the tiny dataset's first shard: more than their
	// member names and some media bytes.
	if r.Samples != 3 || r.Messages != 5 || r.Bytes < 3*100 || r.ExchangeUSPer <= 0 || r.PackedUSPer <= 0 || r.BareUSPer <= 0 {
		t.Errorf("result %+v", r)
	}
	// The figures are rounded (µs to 0.01, MB/s to 0.1, the ratio to
	// 0.001), the rates and the ratio computed from the rounded times: a
	// printed figure is within half its last digit of the exact one. (A
	// relative bound failed on a slow MPICH run: 5.7 MB/s printed for
	// 5.735.)
	near := func(got, want, digit float64) bool { return math.Abs(got-want) <= digit/2*(1+1e-9) }
	for _, c := range []struct {
		what      string
		got, want float64
		digit     float64
	}{
		{"exchange MB/s", r.ExchangeMBps, float64(r.Bytes) / r.ExchangeUSPer, 0.1},
		{"packed MB/s", r.PackedMBps, float64(r.Bytes) / r.PackedUSPer, 0.1},
		{"bare MB/s", r.BareMBps, float64(r.Bytes) / r.BareUSPer, 0.1},
		{"exchange over bare", r.ExchangeOnBare, r.ExchangeUSPer / r.BareUSPer, 0.001},
		{"exchange over packed", r.ExchangeOnPacked, r.ExchangeUSPer / r.PackedUSPer, 0.001},
	} {
		if !near(c.got, c.want, c.digit) {
			t.Errorf("%s %v does not follow from %d bytes in %v, %v and %v µs (exchange, packed, bare): want %v",
				c.what, c.got, r.Bytes, r.ExchangeUSPer, r.PackedUSPer, r.BareUSPer, c.want)
		}
	}
	// The rounding itself is bench's (TestNewGoExchangeRounds); here,
	// that the printed line carries it.
	for _, v := range []float64{r.ExchangeUSPer * 100, r.PackedUSPer * 100, r.BareUSPer * 100, r.ExchangeMBps * 10, r.PackedMBps * 10, r.BareMBps * 10,
		r.ExchangeOnBare * 1000, r.ExchangeOnPacked * 1000} {
		if math.Abs(v-math.Round(v)) > 1e-6 {
			t.Errorf("JSON line %s: figures are not rounded", lines[len(lines)-1])
			break
		}
	}
	if g, err := bench.ParseGoExchange([]byte(out)); err != nil || g != r {
		t.Errorf("bench.ParseGoExchange: %+v, %v; want %+v", g, err, r)
	}
}

// TestBenchExchangeChecksDataFirst checks that --samples beyond what
// the --data dataset's first shard holds is a bad flag (exit 2) found
// before the world starts.
func TestBenchExchangeChecksDataFirst(t *testing.T) {
	data := gentest.Tiny(t)
	var fe cli.FlagError
	if err := commandErr(t, "bench", "exchange", "--ranks", "2", "--data", data, "--samples", "100000", "--cache-dir", t.TempDir()); !errors.As(err, &fe) || fe.Flag != "samples" || cli.ExitStatus(err) != cli.ExitUsage {
		t.Errorf("--samples 100000: %v; want a usage error about --samples", err)
	}
	if err := commandErr(t, "bench", "exchange", "--ranks", "2", "--data", filepath.Join(t.TempDir(), "none")); !errors.Is(err, decode.ErrNoShards) || cli.ExitStatus(err) != cli.ExitUsage {
		t.Errorf("--data of nothing: %v; want a usage error wrapping decode.ErrNoShards", err)
	}
}

// TestBenchExchangeUsageErrors checks bench exchange's bad flags: usage
// errors, with the command's prefix, that read as
// testdata/bench_exchange_usage_errors.golden says.
func TestBenchExchangeUsageErrors(t *testing.T) {
	tr := clitest.NewTranscript()
	for _, args := range [][]string{
		{"bench", "exchange", "--samples", "0"},
		{"bench", "exchange", "--rounds", "0"},
		{"bench", "exchange"},
		{"bench", "exchange", "--ranks", "3"},
	} {
		tr.Add(args, usageLine(t, args...))
	}
	clitest.Golden(t, "bench_exchange_usage_errors.golden", tr.String())
}

// TestBenchSubcommandSlips checks that a mistyped or misplaced
// subcommand points at bench's subcommands (bench -h lists them, as
// testdata/help.golden pins).
func TestBenchSubcommandSlips(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "calibrat"}, `datahelix: bench: unknown subcommand "calibrat" (have calibrate, exchange, plan; see datahelix bench -h)`},
		{[]string{"bench", "--real", "kinetics", "laion"}, `datahelix: bench: kinetics is a workload, not a subcommand: use --workloads kinetics,laion`},
		{[]string{"bench", "my.json"}, `datahelix: bench: my.json is a workload, not a subcommand: use --workloads my.json`},
		{[]string{"bench", "--steps", "x", "kinetics"}, `datahelix: bench: invalid value "x" for flag -steps: parse error (see datahelix bench -h)`},
		{[]string{"bench", "--steps", "3", "plan"}, "datahelix: bench: the subcommand plan comes before the flags: datahelix bench plan [flags]"},
		{[]string{"bench", "plan", "extra"}, `datahelix: bench plan: unexpected argument "extra" (see datahelix bench plan -h)`},
	} {
		code, _, stderr := runMain(tt.args...)
		if code != 2 || strings.TrimSpace(stderr) != tt.want {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", tt.args, code, stderr, tt.want)
		}
	}
}
