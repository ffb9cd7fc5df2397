package bench

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/datahelix/datahelix/internal/bench/realrun"
	"github.com/datahelix/datahelix/internal/bench/report"
)

// AllgatherRanks are the world sizes of the allgather section.
var AllgatherRanks = []int{2, 4, 8}

// Allgather section settings: the block a rank contributes (a rank's
// progress record and B sample records are about this size) and the
// rounds datahelix info times.
const (
	allgatherBytes  = 1024
	allgatherRounds = 2000
)

// AllgatherLatency is one line of datahelix info: the allgather latency
// rank 0 measured.
type AllgatherLatency struct {
	Ranks  int
	Bytes  int
	P50US  float64
	P99US  float64
	Rounds int
}

// allgatherRE matches the line datahelix info prints on rank 0.
var allgatherRE = regexp.MustCompile(`allgather latency: (\d+) ranks, (\d+) B per rank, p50 ([0-9.eE+-]+) µs, p99 ([0-9.eE+-]+) µs over (\d+) rounds`)

// ParseAllgatherLatency finds datahelix info's latency line in its output.
func ParseAllgatherLatency(out []byte) (AllgatherLatency, error) {
	m := allgatherRE.FindSubmatch(out)
	if m == nil {
		return AllgatherLatency{}, fmt.Errorf("%w: no \"allgather latency:\" line in datahelix info's output: %s", realrun.ErrReal, realrun.Tail(out, 300))
	}
	var a AllgatherLatency
	var errs [5]error
	a.Ranks, errs[0] = strconv.Atoi(string(m[1]))
	a.Bytes, errs[1] = strconv.Atoi(string(m[2]))
	a.P50US, errs[2] = strconv.ParseFloat(string(m[3]), 64)
	a.P99US, errs[3] = strconv.ParseFloat(string(m[4]), 64)
	a.Rounds, errs[4] = strconv.Atoi(string(m[5]))
	for _, err := range errs {
		if err != nil {
			return AllgatherLatency{}, fmt.Errorf("%w: datahelix info's latency line %q: %v", realrun.ErrReal, m[0], err)
		}
	}
	if a.Ranks < 1 || a.Rounds < 1 || !(a.P50US >= 0) || !(a.P99US >= a.P50US) {
		return AllgatherLatency{}, fmt.Errorf("%w: datahelix info's latency line %q is inconsistent", realrun.ErrReal, m[0])
	}
	return a, nil
}

// autoWaitPolicy is the wait policy DATAHELIX_MPI_WAIT=auto (the
// default) picks for np ranks on one node of cores CPUs: ranks that
// outnumber the cores sleep between polls instead of spinning (README,
// "MPI waits on oversubscribed nodes").
func autoWaitPolicy(np, cores int) string {
	if np > cores {
		return "sleep"
	}
	return "block"
}

// otherPolicy is the wait policy that is not p.
func otherPolicy(p string) string {
	if p == "sleep" {
		return "block"
	}
	return "sleep"
}

// allgatherSection runs datahelix info under mpirun at 2, 4 and 8 ranks
// and reads rank 0's allgather latency: with the default wait policy,
// then with the other one (alternating, so that the shared machine
// disturbs both alike).
func allgatherSection(ctx context.Context, _ *report.SectionEnv) (*report.Section, error) {
	re, err := realrun.CurrentRealEnv()
	if err != nil {
		return nil, err
	}
	set, userSet := os.LookupEnv("DATAHELIX_MPI_WAIT")
	var lat, other []AllgatherLatency
	var policies []string
	for _, n := range AllgatherRanks {
		def := autoWaitPolicy(n, re.Cores)
		if userSet && (set == "block" || set == "sleep") {
			def = set
		}
		for _, p := range []string{def, otherPolicy(def)} {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			env := []string{"DATAHELIX_MPI_WAIT=" + p}
			if p == def && !userSet {
				env = []string{"DATAHELIX_MPI_WAIT=auto"}
			}
			re.Logf("allgather: %d ranks, wait policy %s", n, p)
			out, err := re.MPIRun(ctx, 2*time.Minute, n, env, "info", "--bytes", strconv.Itoa(allgatherBytes), "--rounds", strconv.Itoa(allgatherRounds))
			if err != nil {
				return nil, err
			}
			a, err := ParseAllgatherLatency(out)
			if err != nil {
				return nil, err
			}
			if a.Ranks != n {
				return nil, fmt.Errorf("%w: mpirun -np %d: datahelix info reports %d ranks", realrun.ErrReal, n, a.Ranks)
			}
			if p == def {
				lat = append(lat, a)
				policies = append(policies, def)
			} else {
				other = append(other, a)
			}
		}
	}
	s := allgatherTable(lat, other, policies, re.Cores)
	if userSet {
		s.Note += fmt.Sprintf("; DATAHELIX_MPI_WAIT=%s was set in the environment", set)
	}
	return s, nil
}

// allgatherTable builds the section from the measurements: lat with the
// default policy (policies[i] at lat[i]), other with the other one.
func allgatherTable(lat, other []AllgatherLatency, policies []string, cores int) *report.Section {
	s := &report.Section{Columns: []string{"ranks", "bytes", "default_policy", "p50_us", "p99_us", "p50_vs_2_ranks", "other_policy", "other_p50_us", "other_p99_us"}}
	var base float64
	for i, a := range lat {
		if i == 0 {
			base = a.P50US
		}
		ratio := 0.0
		if base > 0 {
			ratio = a.P50US / base
		}
		row := []any{a.Ranks, a.Bytes, policies[i], a.P50US, a.P99US, ratio}
		if i < len(other) {
			row = append(row, otherPolicy(policies[i]), other[i].P50US, other[i].P99US)
		} else {
			row = append(row, "-", "-", "-")
		}
		s.Rows = append(s.Rows, row)
	}
	var over []string
	for _, a := range lat {
		if a.Ranks > cores {
			over = append(over, strconv.Itoa(a.Ranks))
		}
	}
	s.Note = fmt.Sprintf("datahelix info under mpirun, one node of %d cores: rank 0's latency of MPI_Allgather of %d B per rank over %d rounds after 20 warm-up rounds",
		cores, allgatherBytes, allgatherRounds)
	if len(over) > 0 {
		s.Note += fmt.Sprintf("; OVERSUBSCRIBED at %s ranks (more ranks than cores: a rank waits for others to be scheduled, not for the network)", strings.Join(over, ", "))
	}
	s.Note += "; default_policy is what DATAHELIX_MPI_WAIT=auto picks (sleep between polls when ranks outnumber cores, else block), other_policy the other one measured right after"
	if n := len(lat); n > 0 {
		last := lat[n-1]
		s.Headline = fmt.Sprintf("%d ranks: p50 %.1f µs, %.1fx the 2-rank latency (wait policy %s)", last.Ranks, last.P50US, last.P50US/max(base, 1e-9), policies[n-1])
		if last.Ranks > cores {
			s.Headline += fmt.Sprintf(", oversubscribed %d ranks on %d cores", last.Ranks, cores)
		}
	}
	return s
}
