package cli

import (
	"fmt"
	"io"

	"github.com/datahelix/datahelix/internal/shardindex"
)

// Plural is "1 file", "2 files": n and the noun that fits it.
func Plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// MiB formats a byte count in MiB with one decimal.
func MiB(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// PrintWarningLines prints to w the warnings of one shard's index, one
// a line, at most shardindex.MaxWarningLines of them and a count of the rest
// (inspect and decode).
func PrintWarningLines(w io.Writer, shard string, warnings []string) {
	for _, line := range shardindex.WarningLines(shard, warnings, shardindex.MaxWarningLines) {
		fmt.Fprintln(w, line)
	}
}
