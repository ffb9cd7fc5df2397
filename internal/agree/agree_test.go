package agree

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/datahelix/datahelix/collective"
	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/internal/gen/gentest"
)

func TestRankSet(t *testing.T) {
	for _, tt := range []struct {
		ranks []int
		want  string
	}{
		{[]int{3}, "rank 3"},
		{[]int{0, 1, 2}, "ranks 0-2"},
		{[]int{0, 2, 5, 6, 7}, "ranks 0, 2, 5-7"},
		{[]int{1, 2, 4, 5}, "ranks 1-2, 4-5"},
	} {
		if got := RankSet(tt.ranks); got != tt.want {
			t.Errorf("RankSet(%v) = %q, want %q", tt.ranks, got, tt.want)
		}
	}
}

// TestAgree gives 4 in-process ranks settings that differ on some ranks:
// every rank must return the same AllRanks error, naming the first
// setting that differs and who holds what; alike settings pass.
func TestAgree(t *testing.T) {
	settings := func(steps, list uint64) []Setting {
		return []Setting{{Name: "--batch", Value: 4}, {Name: "--steps", Value: steps}, {Name: "--loader", Value: list, Hashed: true}}
	}
	for _, tt := range []struct {
		name  string
		steps func(rank int) uint64
		list  func(rank int) uint64
		want  string
	}{
		{"alike", func(int) uint64 { return 20 }, func(int) uint64 { return 7 }, ""},
		{"steps on the last rank", func(r int) uint64 { return map[bool]uint64{true: 10, false: 20}[r == 3] }, func(int) uint64 { return 7 },
			"--steps differs across ranks: ranks 0-2 have 20, rank 3 has 10; every rank of a job must be started with the same settings and data"},
		{"two settings differ: the first is named", func(r int) uint64 { return uint64(r % 2) }, func(r int) uint64 { return uint64(r) },
			"--steps differs across ranks: ranks 0, 2 have 0, ranks 1, 3 have 1;"},
		{"a hashed list", func(int) uint64 { return 20 }, func(r int) uint64 { return uint64(r / 2) },
			"--loader differs across ranks: ranks 0-1 have one, ranks 2-3 have another;"},
		{"three hashed lists", func(int) uint64 { return 20 }, func(r int) uint64 { return uint64(min(r, 2)) },
			"--loader differs across ranks: 3 different ones: rank 0; rank 1; ranks 2-3;"},
	} {
		errs := collective.RunLocal(context.Background(), 4, func(ctx context.Context, c collective.Comm) error {
			return Agree(c, settings(tt.steps(c.Rank()), tt.list(c.Rank())))
		})
		for r, err := range errs {
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("%s: rank %d: %v", tt.name, r, err)
			case tt.want != "" && (err == nil || !collective.IsAllRanks(err) || !strings.HasPrefix(err.Error(), tt.want) || err.Error() != errs[0].Error()):
				t.Errorf("%s: rank %d: got %v, want an AllRanks error starting %q, as rank 0's", tt.name, r, err, tt.want)
			}
		}
	}
}

// TestAgreeShowsTexts checks that a hashed setting with a text shows each
// group's text: a --loader mismatch said only "one" and "another".
func TestAgreeShowsTexts(t *testing.T) {
	lists := []string{"helix", "helix,torch", "helix", "torch"}
	errs := collective.RunLocal(context.Background(), 4, func(ctx context.Context, c collective.Comm) error {
		l := lists[c.Rank()]
		return Agree(c, []Setting{{Name: "--loader", Value: HashStrings([]string{l}), Hashed: true, Text: l}})
	})
	want := "--loader differs across ranks: ranks 0, 2 have helix, rank 1 has helix,torch, rank 3 has torch;"
	for r, err := range errs {
		if err == nil || !collective.IsAllRanks(err) || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("rank %d: got %v, want an AllRanks error starting %q", r, err, want)
		}
	}
}

// TestAgreeDifferentBuilds gives the ranks different lists of settings,
// as nodes running different datahelix builds would: their blocks of
// values differ in size, which failed in MPI or read garbage. Every rank
// must say the builds differ, and the job must not hang.
func TestAgreeDifferentBuilds(t *testing.T) {
	errs := collective.RunLocal(context.Background(), 4, func(ctx context.Context, c collective.Comm) error {
		settings := []Setting{{Name: "--batch", Value: 4}, {Name: "--steps", Value: 20}}
		if c.Rank() == 3 {
			settings = append(settings, Setting{Name: "--new-flag", Value: 1})
		}
		return Agree(c, settings)
	})
	want := "the ranks run different datahelix builds (ranks 0-2; rank 3 compare different settings at start-up)"
	for r, err := range errs {
		if err == nil || !collective.IsAllRanks(err) || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("rank %d: got %v, want an AllRanks error starting %q", r, err, want)
		}
	}
}

// TestAgreeDatasetNamesTheShard gives rank 2 a copy of the dataset whose
// shard 3 lost samples at a member boundary (a truncated node-local
// copy): the job used to say only that the datasets differ. Every rank
// must name the shard, its sample count on rank 0 and on rank 2.
func TestAgreeDatasetNamesTheShard(t *testing.T) {
	data := gentest.Tiny(t)
	short := t.TempDir()
	shards, _ := filepath.Glob(filepath.Join(data, "*.tar"))
	for i, p := range shards {
		dst := filepath.Join(short, filepath.Base(p))
		if i != 3 {
			if err := os.Symlink(p, dst); err != nil {
				t.Fatal(err)
			}
			continue
		}
		gentest.WriteFirstSample(t, p, dst)
	}
	open := func(dir string) *decode.Dataset {
		ds, err := decode.OpenDataset(dir, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ds.Close() })
		return ds
	}
	full, cut := open(data), open(short)
	name := filepath.Base(shards[3])
	want := fmt.Sprintf("the dataset (shard names and sample counts) differs across ranks: ranks 0-1, 3 have one, rank 2 has another;"+
		" every rank of a job must be started with the same settings and data (shard 3: %s with %d samples on rank 0, %s with 1 sample on rank 2)",
		name, full.ShardLen(3), name)
	errs := collective.RunLocal(context.Background(), 4, func(ctx context.Context, c collective.Comm) error {
		if c.Rank() == 2 {
			return AgreeDataset(c, cut)
		}
		return AgreeDataset(c, full)
	})
	for r, err := range errs {
		if err == nil || !collective.IsAllRanks(err) || err.Error() != want {
			t.Errorf("rank %d: got %v, want an AllRanks %q", r, err, want)
		}
	}
	for r, err := range collective.RunLocal(context.Background(), 2, func(ctx context.Context, c collective.Comm) error {
		return AgreeDataset(c, full)
	}) {
		if err != nil {
			t.Errorf("the same dataset: rank %d: %v", r, err)
		}
	}
}
