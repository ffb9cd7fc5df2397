package bench

import (
	"errors"
	"strings"
	"testing"

	"github.com/datahelix/datahelix/internal/bench/realrun"
)

// infoOutput is what datahelix info printed under mpirun -np 4 here.
const infoOutput = `rank 1/4 local 1 host vm mpi "Open MPI v4.1.4, package: Debian OpenMPI"
rank 0/4 local 0 host vm mpi "Open MPI v4.1.4, package: Debian OpenMPI"
rank 3/4 local 3 host vm mpi "Open MPI v4.1.4, package: Debian OpenMPI"
allgather latency: 4 ranks, 1024 B per rank, p50 53.4 µs, p99 5120.0 µs over 2000 rounds (thread multiple: true)
rank 2/4 local 2 host vm mpi "Open MPI v4.1.4, package: Debian OpenMPI"
`

func TestParseAllgatherLatency(t *testing.T) {
	for _, tt := range []struct {
		name string
		out  string
		want AllgatherLatency
		err  string
	}{
		{"mpirun output", infoOutput, AllgatherLatency{Ranks: 4, Bytes: 1024, P50US: 53.4, P99US: 5120, Rounds: 2000}, ""},
		{"one line", "allgather latency: 2 ranks, 0 B per rank, p50 1.3 µs, p99 1.3 µs over 1 rounds (thread multiple: false)\n",
			AllgatherLatency{Ranks: 2, Bytes: 0, P50US: 1.3, P99US: 1.3, Rounds: 1}, ""},
		{"no line", "rank 0/1 local 0 host vm\n", AllgatherLatency{}, "no \"allgather latency:\" line"},
		{"empty", "", AllgatherLatency{}, "no \"allgather latency:\" line"},
		{"p99 below p50", "allgather latency: 2 ranks, 8 B per rank, p50 9 µs, p99 1 µs over 5 rounds", AllgatherLatency{}, "inconsistent"},
		{"zero ranks", "allgather latency: 0 ranks, 8 B per rank, p50 1 µs, p99 1 µs over 5 rounds", AllgatherLatency{}, "inconsistent"},
		{"huge ranks", "allgather latency: 99999999999999999999 ranks, 8 B per rank, p50 1 µs, p99 1 µs over 5 rounds", AllgatherLatency{}, "out of range"},
	} {
		got, err := ParseAllgatherLatency([]byte(tt.out))
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) || !errors.Is(err, realrun.ErrReal) {
				t.Errorf("%s: got %+v, %v; want an ErrReal error containing %q", tt.name, got, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%s: got %+v, %v; want %+v", tt.name, got, err, tt.want)
		}
	}
}

func FuzzParseAllgatherLatency(f *testing.F) {
	f.Add([]byte(infoOutput))
	f.Add([]byte("allgather latency: 8 ranks, 1024 B per rank, p50 166.3 µs, p99 5232.0 µs over 2000 rounds"))
	f.Add([]byte("allgather latency: 1 ranks, 1 B per rank, p50 1e309 µs, p99 1e309 µs over 1 rounds"))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := ParseAllgatherLatency(data)
		if err != nil {
			if !errors.Is(err, realrun.ErrReal) {
				t.Fatalf("error %v does not wrap ErrReal", err)
			}
			return
		}
		if a.Ranks < 1 || a.Rounds < 1 || a.P50US < 0 || a.P99US < a.P50US {
			t.Fatalf("accepted inconsistent figures %+v", a)
		}
	})
}

func TestAutoWaitPolicy(t *testing.T) {
	for _, tt := range []struct {
		np, cores int
		want      string
	}{{2, 2, "block"}, {3, 2, "sleep"}, {8, 2, "sleep"}, {8, 8, "block"}, {1, 1, "block"}} {
		if got := autoWaitPolicy(tt.np, tt.cores); got != tt.want {
			t.Errorf("autoWaitPolicy(%d, %d) = %s, want %s", tt.np, tt.cores, got, tt.want)
		}
		if otherPolicy(tt.want) == tt.want {
			t.Errorf("otherPolicy(%s) is itself", tt.want)
		}
	}
}

func TestAllgatherTable(t *testing.T) {
	lat := []AllgatherLatency{{Ranks: 2, Bytes: 1024, P50US: 2, P99US: 4}, {Ranks: 4, Bytes: 1024, P50US: 50, P99US: 90}, {Ranks: 8, Bytes: 1024, P50US: 160, P99US: 900}}
	other := []AllgatherLatency{{Ranks: 2, Bytes: 1024, P50US: 3, P99US: 5}, {Ranks: 4, Bytes: 1024, P50US: 60, P99US: 70}}
	s := allgatherTable(lat, other, []string{"block", "sleep", "sleep"}, 2)
	if len(s.Rows) != 3 {
		t.Fatalf("%d rows, want 3", len(s.Rows))
	}
	for i, want := range []float64{1, 25, 80} {
		row := s.Rows[i]
		if len(row) != len(s.Columns) {
			t.Fatalf("row %d has %d cells for %d columns", i, len(row), len(s.Columns))
		}
		if got := row[5].(float64); got != want {
			t.Errorf("row %d: p50 vs 2 ranks = %v, want %v", i, got, want)
		}
	}
	if row := s.Rows[1]; row[2] != "sleep" || row[6] != "block" || row[7] != 60.0 {
		t.Errorf("row 1 = %v: want default sleep, other block at 60 µs", row)
	}
	if row := s.Rows[2]; row[6] != "-" {
		t.Errorf("row 2 = %v: the other policy was not measured", row)
	}
	if !strings.Contains(s.Note, "OVERSUBSCRIBED at 4, 8 ranks") {
		t.Errorf("note %q does not say which runs were oversubscribed", s.Note)
	}
	if want := "8 ranks: p50 160.0 µs, 80.0x the 2-rank latency (wait policy sleep), oversubscribed 8 ranks on 2 cores"; s.Headline != want {
		t.Errorf("headline %q, want %q", s.Headline, want)
	}
}
