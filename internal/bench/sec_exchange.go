package bench

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/datahelix/datahelix/internal/bench/realrun"
	"github.com/datahelix/datahelix/internal/bench/report"
	"github.com/datahelix/datahelix/internal/mpinode"
	"github.com/datahelix/datahelix/internal/wire"
)

// exchangeRawC is the raw MPI reference of the exchange section: rank 0
// sends BYTES bytes to rank 1 ROUNDS times, each acknowledged, as the
// bare path of wire.MeasureExchange does, in C.
//
//go:embed mpi/exchange_raw.c
var exchangeRawC []byte

// ExchangeSamples are the message sizes of the exchange section, in
// samples of the default dataset's first shard (video clips).
var ExchangeSamples = []int{1, 4, 16}

// Exchange section settings: messages timed per job (the first ones of a
// job run 10-50x slower, so many are needed) and jobs per path, run
// alternately.
const (
	exchangeRounds = 400
	exchangeRepeat = 3
)

// GoExchange is the JSON line of datahelix bench exchange
// (wire.ExchangeStats.Report).
type GoExchange = wire.ExchangeReport

// NewGoExchange turns what wire.MeasureExchange measured with messages
// of samples samples into the line datahelix bench exchange prints
// (wire.ExchangeStats.Report).
func NewGoExchange(st wire.ExchangeStats, samples int) GoExchange { return st.Report(samples) }

// RawExchange is the JSON line of the C reference.
type RawExchange struct {
	Bytes    int64   `json:"bytes"`
	Messages int     `json:"messages"`
	RawUSPer float64 `json:"raw_us_per_message"`
}

// lastJSONLine decodes the last line of out that starts with '{' into v.
func lastJSONLine(out []byte, what string, v any) error {
	lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
	for i := len(lines) - 1; i >= 0; i-- {
		l := bytes.TrimSpace(lines[i])
		if len(l) > 0 && l[0] == '{' {
			if err := json.Unmarshal(l, v); err != nil {
				return fmt.Errorf("%w: %s printed %q: %v", realrun.ErrReal, what, realrun.Tail(l, 200), err)
			}
			return nil
		}
	}
	return fmt.Errorf("%w: %s printed no JSON line: %s", realrun.ErrReal, what, realrun.Tail(out, 300))
}

// ParseGoExchange reads datahelix bench exchange's output.
func ParseGoExchange(out []byte) (GoExchange, error) {
	var g GoExchange
	if err := lastJSONLine(out, "datahelix bench exchange", &g); err != nil {
		return g, err
	}
	if g.Bytes <= 0 || g.Messages < 1 || !(g.ExchangeUSPer > 0) || !(g.PackedUSPer > 0) || !(g.BareUSPer > 0) {
		return g, fmt.Errorf("%w: datahelix bench exchange: implausible figures %+v", realrun.ErrReal, g)
	}
	return g, nil
}

// ParseRawExchange reads the C reference's output.
func ParseRawExchange(out []byte) (RawExchange, error) {
	var r RawExchange
	if err := lastJSONLine(out, "exchange_raw", &r); err != nil {
		return r, err
	}
	if r.Bytes < 0 || r.Messages < 1 || !(r.RawUSPer > 0) {
		return r, fmt.Errorf("%w: exchange_raw: implausible figures %+v", realrun.ErrReal, r)
	}
	return r, nil
}

// exchangeRow is one message size: the fastest job of each path.
type exchangeRow struct {
	samples int
	g       GoExchange
	raw     RawExchange
}

// compileExchangeRaw writes the C reference into dir and compiles it with
// the mpicc of the MPI library datahelix was built against.
func compileExchangeRaw(ctx context.Context, dir string) (string, error) {
	src := filepath.Join(dir, "exchange_raw.c")
	if err := os.WriteFile(src, exchangeRawC, 0o644); err != nil {
		return "", fmt.Errorf("bench: %w", err)
	}
	cc := "mpicc.openmpi"
	if mpinode.Flavor() == "mpich" {
		cc = "mpicc.mpich"
	}
	if _, err := exec.LookPath(cc); err != nil {
		cc = "mpicc"
	}
	bin := filepath.Join(dir, "exchange_raw")
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if _, err := realrun.RunCommand(ctx, exec.CommandContext(ctx, cc, "-O2", "-o", bin, src)); err != nil {
		return "", err
	}
	return bin, nil
}

// exchangeSection times moving K samples of the default dataset's first
// shard from rank 0 to rank 1 through the loader's exchange path, the
// same path packing the samples first, and bare Go sends (datahelix bench
// exchange, one mpirun job), and
// the same bytes through the raw C reference (another job), alternating
// the jobs and keeping each path's fastest.
func exchangeSection(ctx context.Context, _ *report.SectionEnv) (*report.Section, error) {
	re, err := realrun.CurrentRealEnv()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "datahelix-exchange-")
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer os.RemoveAll(dir)
	raw, err := compileExchangeRaw(ctx, dir)
	if err != nil {
		return nil, err
	}
	var rows []exchangeRow
	for _, k := range ExchangeSamples {
		var row exchangeRow
		row.samples = k
		for i := range exchangeRepeat {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			re.Logf("exchange: %d samples, run %d of %d", k, i+1, exchangeRepeat)
			// The first job may generate the default dataset (once, into
			// the cache): a generous timeout.
			out, err := re.MPIRun(ctx, 10*time.Minute, 2, nil, "bench", "exchange", "--cache-dir", re.CacheDir,
				"--samples", strconv.Itoa(k), "--rounds", strconv.Itoa(exchangeRounds))
			if err != nil {
				return nil, err
			}
			g, err := ParseGoExchange(out)
			if err != nil {
				return nil, err
			}
			out, err = re.MPIRunProgram(ctx, 2*time.Minute, 2, nil, raw, strconv.FormatInt(g.Bytes, 10), strconv.Itoa(exchangeRounds))
			if err != nil {
				return nil, err
			}
			r, err := ParseRawExchange(out)
			if err != nil {
				return nil, err
			}
			if r.Bytes != g.Bytes {
				return nil, fmt.Errorf("%w: exchange_raw sent %d B, want %d", realrun.ErrReal, r.Bytes, g.Bytes)
			}
			if i == 0 || g.ExchangeUSPer < row.g.ExchangeUSPer {
				row.g.ExchangeUSPer, row.g.ExchangeMBps = g.ExchangeUSPer, g.ExchangeMBps
			}
			if i == 0 || g.PackedUSPer < row.g.PackedUSPer {
				row.g.PackedUSPer, row.g.PackedMBps = g.PackedUSPer, g.PackedMBps
			}
			if i == 0 || g.BareUSPer < row.g.BareUSPer {
				row.g.BareUSPer, row.g.BareMBps = g.BareUSPer, g.BareMBps
			}
			row.g.Bytes, row.g.Samples, row.g.Messages = g.Bytes, g.Samples, g.Messages
			if i == 0 || r.RawUSPer < row.raw.RawUSPer {
				row.raw = r
			}
		}
		rows = append(rows, row)
	}
	return exchangeTable(rows, re.Cores), nil
}

// exchangeTable builds the section; the ratios to the raw C reference are
// the headline.
func exchangeTable(rows []exchangeRow, cores int) *report.Section {
	s := &report.Section{Columns: []string{"samples", "bytes", "exchange_us", "exchange_mb_s", "bare_go_us", "bare_go_mb_s", "raw_c_us", "raw_c_mb_s",
		"exchange_over_raw", "bare_over_raw", "exchange_over_bare", "packed_us", "packed_mb_s", "exchange_over_packed"}}
	for _, r := range rows {
		b := float64(r.g.Bytes)
		s.Rows = append(s.Rows, []any{r.samples, r.g.Bytes, r.g.ExchangeUSPer, b / r.g.ExchangeUSPer, r.g.BareUSPer, b / r.g.BareUSPer,
			r.raw.RawUSPer, b / r.raw.RawUSPer, r.g.ExchangeUSPer / r.raw.RawUSPer, r.g.BareUSPer / r.raw.RawUSPer, r.g.ExchangeUSPer / r.g.BareUSPer,
			r.g.PackedUSPer, b / r.g.PackedUSPer, r.g.ExchangeUSPer / r.g.PackedUSPer})
	}
	s.Note = fmt.Sprintf("2 ranks on one node of %d cores (shared memory); per message: rank 0 sends K samples to rank 1, which acknowledges; "+
		"exchange = spmd's path (wire-format headers around the samples' data, sent where it lies as one message by IsendParts, exact-length pre-posted receive into a buffer of the loader's pool, unpacking), "+
		"packed = the same path with the samples packed into one reused send buffer first (the exchange before it sent in place), bare_go = the same bytes by bare Isend/Irecv "+
		"from Go (datahelix bench exchange takes the three in turn), raw_c = bench/mpi/exchange_raw.c compiled with mpicc, the same bytes, "+
		"in its own mpirun job; %d messages per job after 2 warm-up rounds, the fastest of %d jobs per path, jobs alternated",
		cores, exchangeRounds, exchangeRepeat)
	if n := len(s.Rows); n > 0 {
		var hi, bare float64
		for _, r := range s.Rows {
			hi = max(hi, r[8].(float64))
			bare = max(bare, r[9].(float64))
		}
		last := rows[n-1]
		s.Headline = fmt.Sprintf("Go exchange path %.2fx and bare Go sends %.2fx the time of raw C MPI at %d samples (%.2f MB); worst over sizes %.2fx and %.2fx; "+
			"the exchange path takes %.2fx the time of packing first",
			s.Rows[n-1][8], s.Rows[n-1][9], last.samples, float64(last.g.Bytes)/1e6, hi, bare, s.Rows[n-1][13])
	}
	return s
}
