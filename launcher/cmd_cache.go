package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/datahelix/datahelix/decode/gen"
)

func init() {
	register(command{
		name:    "cache",
		summary: "list the generated datasets in the cache (the default dataset, bench's) with their sizes; --prune removes those of older generator formats and abandoned scratch",
		run:     runCache,
	})
}

func runCache(ctx context.Context, stdout, stderr io.Writer, args []string) error {
	fs := newFlags("cache", "[--cache-dir DIR] [--prune]")
	cacheDir := fs.String("cache-dir", "", "cache `dir`ectory"+cacheDirDefault)
	prune := fs.Bool("prune", false, "remove the datasets of older generator formats, which this binary never reads (a job of an older datahelix may), and scratch directories unchanged for a day")
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	root := cacheRoot(*cacheDir)
	switch info, err := os.Stat(root); {
	case err == nil && !info.IsDir():
		return usagef("cache: %s is a file, not a cache directory", root)
	case errors.Is(err, os.ErrNotExist) && *cacheDir != "":
		return usagef("cache: --cache-dir %s: no such directory", root)
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
		fmt.Fprintf(stdout, "%-13s %9s  %s\n", d.State, mib(d.Bytes), rel)
		total += d.Bytes
		if d.State.Removable() {
			removable += d.Bytes
		}
	}
	fmt.Fprintf(stdout, "%s: %s, %s; %s of older formats or abandoned\n", root, plural(len(ds), "dataset", "datasets"), mib(total), mib(removable))
	if !*prune {
		if removable > 0 {
			fmt.Fprintln(stdout, "(datahelix cache --prune removes them)")
		}
		return nil
	}
	freed, err := gen.Prune(ds)
	fmt.Fprintf(stdout, "pruned %s\n", mib(freed))
	return err
}

// mib formats a byte count in MiB with one decimal.
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
