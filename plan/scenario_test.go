package plan

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected plans of testdata/*.txt")

const planMarker = "-- plan --"

// TestScenarios plans every testdata/*.txt input and compares the plan
// with the one written below its "-- plan --" line. Run with -rewrite to
// refresh the expected plans after a deliberate change.
func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			head, want, ok := strings.Cut(string(data), planMarker+"\n")
			if !ok {
				t.Fatalf("%s: no %q line", file, planMarker)
			}
			in, err := parseScenario(head)
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			p, err := Compute(in)
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			checkPlan(t, in, p)
			got := formatPlan(in, p)
			if *rewrite {
				if err := os.WriteFile(file, []byte(head+planMarker+"\n"+got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if got != want {
				t.Errorf("%s: plan differs (run go test -run TestScenarios -rewrite to accept)\ngot:\n%s\nwant:\n%s", file, got, want)
			}
		})
	}
}

// parseScenario reads the input part of a scenario file.
func parseScenario(text string) (*Input, error) {
	in := &Input{}
	sc := bufio.NewScanner(strings.NewReader(text))
	line := 0
	for sc.Scan() {
		line++
		f := strings.Fields(sc.Text())
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		kv, err := keyValues(f[1:])
		if err != nil {
			return nil, fmt.Errorf("line %d: %v", line, err)
		}
		switch f[0] {
		case "mode":
			in.Mode, err = parseMode(f[1])
		case "step":
			in.Step, err = strconv.ParseInt(f[1], 10, 64)
		case "batch":
			in.Batch, err = strconv.Atoi(f[1])
		case "margin":
			in.Margin, err = strconv.ParseInt(f[1], 10, 64)
		case "seed":
			in.Seed, err = strconv.ParseUint(f[1], 10, 64)
		case "rank":
			in.Ranks = append(in.Ranks, Progress{Deadline: kv["deadline"], Backlog: kv["backlog"],
				Capacity: kv["capacity"], Bandwidth: kv["bandwidth"], Latency: kv["latency"]})
		case "sample":
			if len(in.Ranks) == 0 {
				return nil, fmt.Errorf("line %d: sample before any rank", line)
			}
			in.Samples = append(in.Samples, Sample{ID: uint64(kv["id"]), Owner: len(in.Ranks) - 1, Bytes: kv["bytes"], Cost: kv["cost"]})
		default:
			return nil, fmt.Errorf("line %d: unknown keyword %q", line, f[0])
		}
		if err != nil {
			return nil, fmt.Errorf("line %d: %v", line, err)
		}
	}
	return in, nil
}

// keyValues parses key=value fields with integer values; other fields are
// ignored.
func keyValues(fields []string) (map[string]int64, error) {
	kv := map[string]int64{}
	for _, f := range fields {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", k, err)
		}
		kv[k] = n
	}
	return kv, nil
}

// formatPlan renders a plan for a scenario file, naming samples by id.
func formatPlan(in *Input, p *Plan) string {
	var b strings.Builder
	ids := func(ks []int32) string {
		s := make([]string, len(ks))
		for i, k := range ks {
			s[i] = strconv.FormatUint(in.Samples[k].ID, 10)
		}
		return strings.Join(s, ",")
	}
	for r := range p.Ranks {
		fmt.Fprintf(&b, "rank %d finish=%d lateness=%d decode=%s\n", r, p.Finish[r], p.Lateness[r], ids(p.DecodeOrder(r)))
	}
	for _, m := range p.Moves {
		fmt.Fprintf(&b, "move %d->%d bytes=%d samples=%s\n", m.Src, m.Dst, m.Bytes, ids(m.Samples))
	}
	fmt.Fprintf(&b, "late=%d max_lateness=%d makespan=%d moved=%d bytes_moved=%d exchanges=%d\n",
		p.LateRanks, p.MaxLateness, p.Makespan, p.Moved, p.BytesMoved, len(p.Exchanges))
	fmt.Fprintf(&b, "hash=%#016x\n", p.Hash)
	return b.String()
}

// TestEvenTrainOnTime: two ranks on time, one holding four samples of
// 10 ms of GPU work, the other four of 1 ms. Lockstep training waits for
// the first; exchanging two samples leaves 22 ms on each. Under ModeHelix
// the exchange is made when the transfer fits in the receiving rank's
// slack, and not when a 1 byte/µs link would make it late; without the
// gate, transfers are free.
func TestEvenTrainOnTime(t *testing.T) {
	mk := func(mode Mode, bandwidth int64) *Input {
		in := &Input{Params: Params{Mode: mode, Margin: 100}, Step: 3, Batch: 4}
		for r := range 2 {
			in.Ranks = append(in.Ranks, Progress{Deadline: 100_000, Capacity: 8 * One, Bandwidth: bandwidth, Latency: 5})
			for i := range 4 {
				s := Sample{ID: uint64(10*r + i), Owner: r, Bytes: 200_000, Cost: 4_000, Train: 10_000_000}
				if r == 1 {
					s.Train = 1_000_000
				}
				in.Samples = append(in.Samples, s)
			}
		}
		return in
	}
	load := func(in *Input, p *Plan) [2]int64 {
		var l [2]int64
		for k, r := range p.Assign {
			l[r] += in.Samples[k].Train
		}
		return l
	}
	for _, c := range []struct {
		mode      Mode
		bandwidth int64
		want      [2]int64
	}{
		{ModeHelix, 10_000 * One, [2]int64{22e6, 22e6}},
		{ModeHelix, One, [2]int64{40e6, 4e6}}, // 200 ms per sample: no room
		{ModeHelixNoGate, One, [2]int64{22e6, 22e6}},
		{ModeOracle, One, [2]int64{22e6, 22e6}},
		{ModeStatic, 10_000 * One, [2]int64{40e6, 4e6}}, // a sampler balancing CPU cost only
		{ModeLocal, 10_000 * One, [2]int64{40e6, 4e6}},
	} {
		in := mk(c.mode, c.bandwidth)
		p, err := Compute(in)
		if err != nil {
			t.Fatal(err)
		}
		checkPlan(t, in, p)
		if got := load(in, p); got != c.want || p.LateRanks != 0 && c.mode != ModeStatic {
			t.Errorf("%s at %d B/µs: GPU work %v, %d late; want %v, none late", c.mode, c.bandwidth/One, got, p.LateRanks, c.want)
		}
	}
}
