package loader

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/datahelix/datahelix/collective"
	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/internal/decoding"
	"github.com/datahelix/datahelix/internal/gen/gentest"
	"github.com/datahelix/datahelix/internal/shardindex"
)

// withExtraMembers copies the dataset's shards into a new directory and
// appends members with the given names (and one byte each) to the first
// shard; when only is set, the first shard holds those members alone.
func withExtraMembers(t *testing.T, data string, only bool, names ...string) (dir, first string) {
	t.Helper()
	dir = t.TempDir()
	shards, _ := filepath.Glob(filepath.Join(data, "*.tar"))
	for i, p := range shards {
		in, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, filepath.Base(p))
		if i == 0 {
			var buf bytes.Buffer
			tw := tar.NewWriter(&buf)
			if !only {
				copyMembers(t, tw, in, nil)
			}
			for _, name := range names {
				tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: 1, Typeflag: tar.TypeReg})
				tw.Write([]byte{'x'})
			}
			tw.Close()
			in, first = buf.Bytes(), out
		}
		if err := os.WriteFile(out, in, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir, first
}

// TestIndexWarningsAreLoggedOnce checks that the members a shard's index
// skipped are logged by rank 0 only, once per shard, capped.
func TestIndexWarningsAreLoggedOnce(t *testing.T) {
	names := []string{"README", "a1", "a2", "a3", "a4", "a5", "a6"}
	data, first := withExtraMembers(t, gentest.Tiny(t), false, names...)
	var log syncBuffer
	cfg := testConfig(KindLocal)
	cfg.Log = &log
	_, errs := runInProcess(t, 4, data, cfg)
	requireOK(t, errs)
	got := log.String()
	want := "datahelix: warning: shard " + first + `: member "README" at offset `
	if strings.Count(got, want) != 1 || strings.Count(got, "skipped: its name has no WebDataset key") != shardindex.MaxWarningLines ||
		strings.Count(got, first+": and 2 more warnings\n") != 1 {
		t.Errorf("log:\n%s\nwant one line %q..., %d warnings in all and a count of 2 more", got, want, shardindex.MaxWarningLines)
	}
}

// TestRunLogsWarningsOncePerDataset checks that the loaders of one job,
// each a Run over the same dataset sharing the job's SampleLog, log its
// warnings once.
func TestRunLogsWarningsOncePerDataset(t *testing.T) {
	// Two Runs (two loaders) on every rank over the dataset it opened.
	data, first := withExtraMembers(t, gentest.Tiny(t), false, "README", "a1")
	var log syncBuffer
	cfg := testConfig(KindLocal)
	cfg.Log = &log
	indexDir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	errs := collective.RunLocal(ctx, 2, func(ctx context.Context, c collective.Comm) error {
		ds, err := decode.OpenDataset(data, indexDir)
		if err != nil {
			return err
		}
		defer ds.Close()
		cfg := cfg
		cfg.SampleLog = NewSampleLog()
		for range 2 {
			if _, err := Run(ctx, c, ds, cfg); err != nil {
				return err
			}
		}
		return nil
	})
	requireOK(t, errs)
	got := log.String()
	for _, name := range []string{`"README"`, `"a1"`} {
		if n := strings.Count(got, "datahelix: warning: shard "+first+": member "+name); n != 1 {
			t.Errorf("two runs logged member %s's warning %d times, want once:\n%s", name, n, got)
		}
	}
}

// TestShardWithoutSamplesSaysWhy checks that a shard whose members were
// all skipped fails the job saying why, on every rank.
func TestShardWithoutSamplesSaysWhy(t *testing.T) {
	data, first := withExtraMembers(t, gentest.Tiny(t), true, "000001", "000002")
	_, errs := runInProcess(t, 4, data, testConfig(KindLocal))
	want := "spmd: shard " + first + ` has no samples (member "000001" at offset 512 skipped: its name has no WebDataset key.extension, and 1 more warning)`
	for r, err := range errs {
		if err == nil || !collective.IsAllRanks(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("rank %d: got %v, want the every-rank error %q", r, err, want)
		}
	}
}

// TestDropLineNamesEachOnce checks that a dropped sample's log line names
// its shard, sample and member once each.
func TestDropLineNamesEachOnce(t *testing.T) {
	data := corruptCopy(t, gentest.Tiny(t), "000000")
	var log syncBuffer
	cfg := testConfig(KindLocal)
	cfg.Log = &log
	_, errs := runInProcess(t, 4, data, cfg)
	requireOK(t, errs)
	var line string
	for _, l := range strings.Split(log.String(), "\n") {
		if strings.Contains(l, "dropping sample") {
			line = l
		}
	}
	want := `dropping sample: decode: shard ` + filepath.Join(data, "mixed-000000.tar") + `: sample "000000": member 000000.`
	if !strings.Contains(line, want) || strings.Count(line, "mixed-000000.tar") != 1 || strings.Count(line, `000000"`) != 1 {
		t.Errorf("drop line %q, want %q... naming each once", line, want)
	}
}

// TestDropLineOfOtherErrors checks the drop line of a sample dropped for
// an error that is not a *decode.SampleError: the loader names the shard
// and sample itself, without passing the error off as decode's, while a
// *decode.SampleError keeps its own wording.
func TestDropLineOfOtherErrors(t *testing.T) {
	var log bytes.Buffer
	l := logLoader(&log)
	l.logDrop(3, &decode.Sample{Shard: "a.tar", Key: "k"}, errors.New("spmd: task 2 of 3 failed"))
	bad := &decode.Sample{Shard: "b.tar", Key: "n", Members: []decode.Member{{Name: "n.npy", Ext: "npy", Data: []byte{1}}}}
	_, err := decoding.ParseRecord(bad, decoding.Limits{})
	l.logDrop(4, bad, err)
	want := `datahelix: rank 0: step 3: dropping sample: shard a.tar: sample "k": spmd: task 2 of 3 failed` + "\n" +
		"datahelix: rank 0: step 4: dropping sample: " + err.Error() + "\n"
	if got := log.String(); got != want {
		t.Errorf("drop lines:\n%s\nwant:\n%s", got, want)
	}
}

// TestDropLinesOncePerJob checks that the loaders of one job, each a Run
// over the same dataset, log a sample they all drop once, while each
// loader's summary still counts its drops.
func TestDropLinesOncePerJob(t *testing.T) {
	data := corruptCopy(t, gentest.Tiny(t), "000000")
	var log syncBuffer
	indexDir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dropped := map[Kind]int{}
	errs := collective.RunLocal(ctx, 4, func(ctx context.Context, c collective.Comm) error {
		ds, err := decode.OpenDataset(data, indexDir)
		if err != nil {
			return err
		}
		defer ds.Close()
		samples := NewSampleLog() // this rank's, for the job's loaders
		for _, k := range []Kind{KindLocal, KindTorch} {
			cfg := testConfig(k)
			cfg.Log, cfg.SampleLog = &log, samples
			res, err := Run(ctx, c, ds, cfg)
			if err != nil {
				return err
			}
			if c.Rank() == 0 {
				dropped[k] = res.Summary.DroppedSamples
			}
		}
		return nil
	})
	requireOK(t, errs)
	if dropped[KindLocal] == 0 || dropped[KindTorch] == 0 {
		t.Fatalf("dropped samples %v: want each loader to drop the corrupt one", dropped)
	}
	if n := strings.Count(log.String(), "dropping sample"); n != 1 {
		t.Errorf("two loaders logged %d drop lines, want 1:\n%s", n, log.String())
	}
}

// TestDropLinesAreCapped checks that a rank logs 20 dropped or damaged
// samples (maxSampleLines), then one line saying it logs no more, and
// after it only the first sample of a kind of failure not logged yet.
func TestDropLinesAreCapped(t *testing.T) {
	var log bytes.Buffer
	l := logLoader(&log)
	for i := range 25 {
		s := &decode.Sample{Shard: "a.tar", Key: fmt.Sprint(i)}
		l.logDrop(int64(i), s, errors.New("bad"))
		l.logDrop(int64(i), s, errors.New("bad")) // met again: not logged again
	}
	l.logDamage(99, &decode.Sample{Shard: "a.tar", Key: "d"}, 3)
	l.logDamage(100, &decode.Sample{Shard: "a.tar", Key: "e"}, 3) // a kind logged: not logged
	lines := strings.Split(strings.TrimSuffix(log.String(), "\n"), "\n")
	want := `datahelix: rank 0: 20 dropped or damaged samples logged, not logging more (but the first of each new kind of failure): the summary counts every one, and "datahelix decode SHARD.tar..." lists each sample that fails`
	if len(lines) != 22 || strings.Count(log.String(), "dropping sample") != 20 || lines[20] != want ||
		!strings.Contains(lines[21], `sample "d" of a.tar decoded with damaged data`) {
		t.Errorf("log of %d lines:\n%s\nwant 20 drop lines, then %q, then sample d's damage", len(lines), log.String(), want)
	}
}

// TestDropLineOfNewKindAfterCap checks that the cap does not hide the
// first drop after 20 damaged samples, nor the first drop of a kind of
// decode failure after 20 of another: each is a failure the user has not
// seen yet.
func TestDropLineOfNewKindAfterCap(t *testing.T) {
	var log bytes.Buffer
	l := logLoader(&log)
	for i := range 25 {
		l.logDamage(int64(i), &decode.Sample{Shard: "a.tar", Key: fmt.Sprint(i)}, 1)
	}
	l.logDrop(30, &decode.Sample{Shard: "a.tar", Key: "x"}, errors.New("spmd: task failed"))
	unsupported := &decode.SampleError{Shard: "a.tar", Key: "u", Kind: decode.ErrUnsupported, Err: decode.ErrUnsupported}
	corrupt := &decode.SampleError{Shard: "a.tar", Key: "c", Kind: decode.ErrCorrupt, Err: decode.ErrCorrupt}
	l.logDrop(31, &decode.Sample{Shard: "a.tar", Key: "u"}, unsupported)
	l.logDrop(32, &decode.Sample{Shard: "a.tar", Key: "u2"}, unsupported) // a kind logged
	l.logDrop(33, &decode.Sample{Shard: "a.tar", Key: "c"}, corrupt)
	got := log.String()
	if n := strings.Count(got, "dropping sample"); n != 3 || !strings.Contains(got, `sample "x"`) ||
		!strings.Contains(got, `sample "u"`) || !strings.Contains(got, `sample "c"`) || strings.Count(got, "not logging more") != 1 {
		t.Errorf("got %d drop lines, want samples x, u and c's after one cap line:\n%s", n, got)
	}
}

// TestSampleLogNil checks that a loader built without a SampleLog (as
// tests build one) logs every line rather than panicking.
func TestSampleLogNil(t *testing.T) {
	var log bytes.Buffer
	cfg := testConfig(KindLocal)
	cfg.Log = &log
	l := &Loader{cfg: cfg, comm: collective.NewLocal(1)[0]}
	l.logDamage(1, &decode.Sample{Shard: "a.tar", Key: "k"}, 1)
	if !strings.Contains(log.String(), `sample "k" of a.tar`) {
		t.Errorf("log %q: want sample k's damage line", log.String())
	}
}

// logLoader is a one-rank loader that logs dropped and damaged samples
// to log, with a SampleLog of its own, as NewLoader gives it.
func logLoader(log *bytes.Buffer) *Loader {
	cfg := testConfig(KindLocal)
	cfg.Log = log
	return &Loader{cfg: cfg, comm: collective.NewLocal(1)[0], logged: NewSampleLog()}
}
