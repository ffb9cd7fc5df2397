package realrun

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/internal/bench/workload"
)

func TestEnsureRealDataset(t *testing.T) {
	if testing.Short() {
		t.Skip("generates a dataset (fast: text only)")
	}
	re := RealEnv{CacheDir: t.TempDir(), Scale: RealScale{ShardsPerRank: 3, SamplesPerShard: 2}.withDefaults(), Log: nil}
	re.Log = os.Stderr
	w := &workload.Workload{Name: "twotexts", Sources: []workload.Source{{Preset: "text", Weight: 2}, {Preset: "text", Weight: 1}}}
	rd, err := ensureRealDataset(t.Context(), re, w, 2, 7)
	if err != nil {
		t.Fatal(err)
	}
	if rd.Shards != 6 || rd.Samples != 12 || rd.Sources["text"] != 6 {
		t.Errorf("dataset %+v", rd)
	}
	order := workload.SourceOrder(w.Sources, 6)
	next := map[int]int{}
	for k, s := range order {
		target, err := os.Readlink(filepath.Join(rd.Dir, "shard-"+strings.Repeat("0", 5)+string(rune('0'+k))+".tar"))
		if err != nil {
			t.Fatal(err)
		}
		gc := realSourceConfig(w.Sources[s], map[int]int{0: 4, 1: 2}[s], re.Scale, 7+uint64(s))
		if want := filepath.Join(realSourceDir(re.CacheDir, gc), "text-00000"+string(rune('0'+next[s]))+".tar"); target != want {
			t.Errorf("shard %d -> %s, want %s (source %d)", k, target, want, s)
		}
		next[s]++
	}
	ds, err := decode.OpenDataset(rd.Dir, filepath.Join(re.CacheDir, "index"))
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	if ds.Len() != 12 {
		t.Errorf("dataset holds %d samples, want 12", ds.Len())
	}
	mc, err := measureDataset(t.Context(), ds, 8, 224, 2)
	if err != nil || mc.Failed != 0 || !(mc.MeanUS >= 1) || len(mc.US) != 6 || len(mc.US[5]) != 2 {
		t.Errorf("measured %+v, %v", mc, err)
	}
	// A second call finds it.
	if again, err := ensureRealDataset(t.Context(), re, w, 2, 7); err != nil || again.Dir != rd.Dir {
		t.Errorf("second call: %+v, %v", again, err)
	}
	// Two evaluations of one process making the links at once both get
	// them: a scratch directory named by process id alone was removed by
	// the second while the first filled it.
	if err := os.RemoveAll(rd.Dir); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() { _, errs[i] = ensureRealDataset(t.Context(), re, w, 2, 7) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("concurrent call %d: %v", i, err)
		}
	}
	if links, err := filepath.Glob(filepath.Join(rd.Dir, "shard-*.tar")); err != nil || len(links) != 6 {
		t.Errorf("after concurrent calls: %d links, %v; want 6", len(links), err)
	}
	if scratch, _ := filepath.Glob(rd.Dir + ".tmp-*"); len(scratch) != 0 {
		t.Errorf("scratch directories left: %v", scratch)
	}
}

func TestMedian(t *testing.T) {
	for _, tt := range []struct {
		xs   []int64
		want int64
	}{{[]int64{5}, 5}, {[]int64{9, 1}, 5}, {[]int64{3, 100, 1}, 3}, {[]int64{4, 1, 3, 2}, 2}, {[]int64{7, 7, 7}, 7}} {
		if got := median(slices.Clone(tt.xs)); got != tt.want {
			t.Errorf("median(%v) = %d, want %d", tt.xs, got, tt.want)
		}
	}
}
