package spmd

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/datahelix/datahelix/collective"
	"github.com/datahelix/datahelix/decode"
)

// Setting is one setting of a job that every rank must share: ranks
// started with different ones call different collectives (a rank with
// fewer steps leaves while the others wait in the next allgather), which
// hangs the job or fails it with a message about malformed blocks.
type Setting struct {
	Name  string // how the user sets it, e.g. "--steps"
	Value uint64 // the setting, or a hash of it when Hashed
	// Hashed settings (a list, a dataset) are compared but not printed.
	Hashed bool
}

// Agree allgathers every rank's settings, which every rank lists in the
// same order (the same binary builds them), and returns the same
// AllRanks error on every rank, naming the first setting that differs
// and which ranks hold which value; nil when all agree.
func Agree(c collective.Comm, settings []Setting) error {
	n := len(settings)
	send := make([]byte, 8*n)
	for i, s := range settings {
		binary.LittleEndian.PutUint64(send[8*i:], s.Value)
	}
	recv := make([]byte, len(send)*c.Size())
	if err := c.Allgather(send, recv); err != nil {
		return fmt.Errorf("compare settings across ranks: %w", err)
	}
	for i, s := range settings {
		values, holders := groupRanks(recv, n, i)
		if len(values) == 1 {
			continue
		}
		// "ranks 0-2 have 20, rank 3 has 10"; hashed values are not
		// worth printing: "ranks 0-2 have one, rank 3 another".
		parts := make([]string, len(values))
		for k, v := range values {
			rs := holders[v]
			verb := "have"
			if len(rs) == 1 {
				verb = "has"
			}
			val := strconv.FormatUint(v, 10)
			if s.Hashed {
				val = map[bool]string{true: "one", false: "another"}[k == 0]
			}
			parts[k] = fmt.Sprintf("%s %s %s", rankSet(rs), verb, val)
		}
		return collective.AllRanks(fmt.Errorf("%s differs across ranks: %s; every rank of a job must be started with the same settings and data",
			s.Name, strings.Join(parts, ", ")))
	}
	return nil
}

// groupRanks reads gathered blocks of n little-endian uint64 values, one
// block per rank, and groups the ranks by their value i: the distinct
// values in order of first appearance, and the ranks holding each, in
// increasing order.
func groupRanks(gathered []byte, n, i int) (values []uint64, holders map[uint64][]int) {
	holders = map[uint64][]int{}
	for r := range len(gathered) / (8 * n) {
		v := binary.LittleEndian.Uint64(gathered[8*(r*n+i):])
		if _, seen := holders[v]; !seen {
			values = append(values, v)
		}
		holders[v] = append(holders[v], r)
	}
	return values, holders
}

// rankSet names the ranks, given in increasing order, compactly:
// "rank 3", "ranks 0-2", "ranks 0, 2, 5-7".
func rankSet(ranks []int) string {
	var b strings.Builder
	if len(ranks) == 1 {
		b.WriteString("rank ")
	} else {
		b.WriteString("ranks ")
	}
	for i := 0; i < len(ranks); {
		j := i
		for j+1 < len(ranks) && ranks[j+1] == ranks[j]+1 {
			j++
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(ranks[i]))
		if j > i {
			fmt.Fprintf(&b, "-%d", ranks[j])
		}
		i = j + 1
	}
	return b.String()
}

// HashStrings returns a hash of the list, for a Hashed Setting.
func HashStrings(list []string) uint64 {
	h := fnv.New64a()
	for _, s := range list {
		fmt.Fprintf(h, "%d:%s;", len(s), s)
	}
	return h.Sum64()
}

// DatasetSettings are the settings that make two ranks' datasets the
// same one: the shard count, and a hash of each shard's file name and
// sample count (not its directory: nodes may keep their copies in
// different places).
func DatasetSettings(ds *decode.Dataset) []Setting {
	return []Setting{
		{Name: "the dataset's shard count", Value: uint64(len(ds.Shards))},
		{Name: "the dataset (shard names and sample counts)", Value: datasetHash(ds), Hashed: true},
	}
}

// datasetHash is a hash of each shard's file name and sample count.
func datasetHash(ds *decode.Dataset) uint64 {
	list := make([]string, len(ds.Shards))
	for i, s := range ds.Shards {
		list[i] = fmt.Sprintf("%s/%d", filepath.Base(s.Path()), s.Len())
	}
	return HashStrings(list)
}
