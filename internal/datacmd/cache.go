package datacmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/datahelix/datahelix/internal/cli"
	"github.com/datahelix/datahelix/internal/gen"
	"github.com/datahelix/datahelix/internal/shardindex"
)

// Cache is datahelix cache.
var Cache = cli.Command{
	Name:    "cache",
	Summary: "list the generated datasets in the cache (the default dataset, bench's) and its shard indexes with their sizes; --prune removes datasets of older generator formats, abandoned scratch, and stale indexes (shard gone or changed, older format)",
	Run:     runCache,
}

func runCache(ctx context.Context, stdout, stderr io.Writer, args []string) error {
	fs := cli.NewFlags("cache", "[--cache-dir DIR] [--prune]")
	cacheDir := fs.String("cache-dir", "", "cache `dir`ectory"+cli.CacheDirDefault)
	prune := fs.Bool("prune", false, "remove the datasets of older generator formats, which this binary never reads (a job of an older datahelix may), scratch directories unchanged for a day, and the stale shard indexes: whose shard is gone or changed, of an older format, or abandoned while written (a job that needs one again rebuilds it)")
	if err := cli.ParseFlags(fs, args, stdout); err != nil {
		return err
	}
	root := cli.CacheRoot(*cacheDir)
	switch info, err := os.Stat(root); {
	case err == nil && !info.IsDir():
		return cli.FlagErrorf("cache", "cache-dir", root, "a file, not a cache directory")
	case errors.Is(err, os.ErrNotExist) && *cacheDir != "":
		return cli.FlagErrorf("cache", "cache-dir", root, "no such directory")
	case errors.Is(err, os.ErrNotExist):
		fmt.Fprintf(stdout, "%s: empty (no dataset generated yet)\n", root)
		return nil
	}
	ds, err := gen.ScanCache(root)
	if err != nil {
		return err
	}
	var total, removable int64
	for _, d := range ds {
		rel, err := filepath.Rel(root, d.Dir)
		if err != nil {
			rel = d.Dir
		}
		fmt.Fprintf(stdout, "%-13s %9s  %s\n", d.State, cli.MiB(d.Bytes), rel)
		total += d.Bytes
		if d.State.Removable() {
			removable += d.Bytes
		}
	}
	fmt.Fprintf(stdout, "%s: %s, %s; %s of older formats or abandoned\n", root, cli.Plural(len(ds), "dataset", "datasets"), cli.MiB(total), cli.MiB(removable))
	// The shard indexes run, inspect, decode and costmodel keep here
	// (listed once a job made the directory).
	indexDir := shardindex.Dir(root)
	var ix []shardindex.File
	stale := 0
	if _, err := os.Stat(indexDir); err == nil {
		if ix, err = shardindex.Scan(indexDir); err != nil {
			return err
		}
		stale = listIndexes(stdout, indexDir, ix)
	}
	if !*prune {
		if removable > 0 || stale > 0 {
			fmt.Fprintln(stdout, "(datahelix cache --prune removes them)")
		}
		return nil
	}
	freed, err := gen.Prune(ds)
	n, freedIx, ixErr := shardindex.Prune(ix)
	if n > 0 {
		fmt.Fprintf(stdout, "pruned %s (%s)\n", cli.MiB(freed+freedIx), cli.Plural(n, "shard index", "shard indexes"))
	} else {
		fmt.Fprintf(stdout, "pruned %s\n", cli.MiB(freed))
	}
	return errors.Join(err, ixErr)
}

// listIndexes prints the index files of the cache's index directory dir,
// a line per shard directory, current ones first, then a summary, and
// returns how many Prune would remove.
func listIndexes(stdout io.Writer, dir string, ix []shardindex.File) int {
	type group struct {
		dir   string // of the shards, "" when not recorded
		stale bool
	}
	count, size := map[group]int{}, map[group]int64{}
	var total, staleBytes int64
	stale := 0
	for _, x := range ix {
		g := group{stale: x.Stale}
		if x.Shard != "" {
			g.dir = filepath.Dir(x.Shard)
		}
		count[g]++
		size[g] += x.Bytes
		total += x.Bytes
		if x.Stale {
			stale++
			staleBytes += x.Bytes
		}
	}
	groups := make([]group, 0, len(count))
	for g := range count {
		groups = append(groups, g)
	}
	sort.Slice(groups, func(i, j int) bool {
		a, b := groups[i], groups[j]
		if (a.dir == "") != (b.dir == "") {
			return b.dir == ""
		}
		if a.dir != b.dir {
			return a.dir < b.dir
		}
		return !a.stale && b.stale
	})
	for _, g := range groups {
		what := cli.Plural(count[g], "shard index", "shard indexes")
		if g.dir != "" {
			what += " of " + g.dir
		}
		state := "current"
		if g.stale {
			state = "stale"
		}
		fmt.Fprintf(stdout, "%-13s %9s  %s\n", state, cli.MiB(size[g]), what)
	}
	fmt.Fprintf(stdout, "%s: %s, %s; %d (%s) stale (shard gone or changed, of an older format, or abandoned)\n",
		dir, cli.Plural(len(ix), "shard index", "shard indexes"), cli.MiB(total), stale, cli.MiB(staleBytes))
	return stale
}
