package agree

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
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
	// Hashed settings (a list, a dataset) are compared by their hash.
	// When they differ, the message shows each group's Text, or just
	// that the groups differ when Text is empty.
	Hashed bool
	Text   string
}

// agreeVersion names the shape of Agree's records; it changes whenever
// that shape does, so that ranks running builds with different records
// say so instead of exchanging blocks that do not match.
const agreeVersion = "agree/1"

// Agree allgathers every rank's settings, which every rank lists in the
// same order (the same binary builds them), and returns the same
// AllRanks error on every rank, naming the first setting that differs
// and which ranks hold which value; nil when all agree.
//
// The names of the settings are compared first, in a block of one size
// for every build: nodes running different datahelix builds may compare
// different settings, and an allgather of blocks of different sizes
// fails in MPI or reads garbage.
func Agree(c collective.Comm, settings []Setting) error {
	names := []string{agreeVersion}
	for _, s := range settings {
		names = append(names, s.Name)
	}
	recv, err := allgatherUint64s(c, []uint64{HashStrings(names)})
	if err != nil {
		return err
	}
	if values, holders := GroupRanks(recv, 1, 0); len(values) > 1 {
		groups := make([]string, len(values))
		for k, v := range values {
			groups[k] = RankSet(holders[v])
		}
		return collective.AllRanks(fmt.Errorf("the ranks run different datahelix builds (%s compare different settings at start-up); every node must run the same datahelix binary",
			strings.Join(groups, "; ")))
	}
	n := len(settings)
	send := make([]uint64, n)
	for i, s := range settings {
		send[i] = s.Value
	}
	if recv, err = allgatherUint64s(c, send); err != nil {
		return err
	}
	for i, s := range settings {
		values, holders := GroupRanks(recv, n, i)
		if len(values) == 1 {
			continue
		}
		// Every rank sees the same groups and the same Hashed flags (the
		// names compared above say the builds agree), so all of them
		// gather the texts, or none does.
		var texts [][]byte
		if s.Hashed {
			if texts, err = c.AllgatherVar([]byte(s.Text)); err != nil {
				return fmt.Errorf("compare settings across ranks: %w", err)
			}
			if len(texts[0]) == 0 {
				texts = nil // a setting without texts
			}
		}
		return collective.AllRanks(mismatchError{fmt.Errorf("%s differs across ranks: %s; every rank of a job must be started with the same settings and data",
			s.Name, describeGroups(s, values, holders, texts))})
	}
	return nil
}

// mismatchError is Agree's error when the ranks hold different values of
// a setting, an outcome every rank reaches alike.
type mismatchError struct{ err error }

func (e mismatchError) Error() string { return e.err.Error() }
func (e mismatchError) Unwrap() error { return e.err }

// allgatherUint64s allgathers every rank's values, little-endian, in
// blocks of 8*len(values) bytes, one per rank in rank order.
func allgatherUint64s(c collective.Comm, values []uint64) ([]byte, error) {
	send := make([]byte, 8*len(values))
	for i, v := range values {
		binary.LittleEndian.PutUint64(send[8*i:], v)
	}
	recv := make([]byte, len(send)*c.Size())
	if err := c.Allgather(send, recv); err != nil {
		return nil, fmt.Errorf("compare settings across ranks: %w", err)
	}
	return recv, nil
}

// describeGroups says which ranks hold which value of s: "ranks 0-2
// have 20, rank 3 has 10"; for a hashed setting, the first holder's
// text ("ranks 0-2 have helix,torch, rank 3 has helix"), or without
// texts "ranks 0-2 have one, rank 3 has another" and, for more groups,
// "3 different ones: ranks 0-1; rank 2; rank 3".
func describeGroups(s Setting, values []uint64, holders map[uint64][]int, texts [][]byte) string {
	if s.Hashed && texts == nil {
		if len(values) == 2 {
			a, b := holders[values[0]], holders[values[1]]
			return fmt.Sprintf("%s %s one, %s %s another", RankSet(a), have(a), RankSet(b), have(b))
		}
		groups := make([]string, len(values))
		for k, v := range values {
			groups[k] = RankSet(holders[v])
		}
		return fmt.Sprintf("%d different ones: %s", len(values), strings.Join(groups, "; "))
	}
	parts := make([]string, len(values))
	for k, v := range values {
		rs := holders[v]
		val := strconv.FormatUint(v, 10)
		if s.Hashed {
			val = string(texts[rs[0]])
		}
		parts[k] = fmt.Sprintf("%s %s %s", RankSet(rs), have(rs), val)
	}
	return strings.Join(parts, ", ")
}

// have is the verb for a set of ranks: "rank 3 has", "ranks 0-2 have".
func have(ranks []int) string {
	if len(ranks) == 1 {
		return "has"
	}
	return "have"
}

// GroupRanks reads gathered blocks of n little-endian uint64 values, one
// block per rank, and groups the ranks by their value i: the distinct
// values in order of first appearance, and the ranks holding each, in
// increasing order.
func GroupRanks(gathered []byte, n, i int) (values []uint64, holders map[uint64][]int) {
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

// RankSet names the ranks, given in increasing order, compactly:
// "rank 3", "ranks 0-2", "ranks 0, 2, 5-7".
func RankSet(ranks []int) string {
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

// DatasetHash is a hash of each shard's file name and sample count.
func DatasetHash(ds decode.Source) uint64 {
	return HashStrings(ShardList(ds))
}

// ShardList names each shard of ds by file name and sample count,
// "000003.tar/32": what DatasetHash hashes, and what a saved state keeps
// to say which shard changed.
func ShardList(ds decode.Source) []string {
	list := make([]string, ds.NumShards())
	for i := range list {
		list[i] = fmt.Sprintf("%s/%d", ds.ShardName(i), ds.ShardLen(i))
	}
	return list
}

// SourceName names ds in messages: what its String method says (a
// dataset's path or glob), else its first shard.
func SourceName(ds decode.Source) string {
	if s, ok := ds.(fmt.Stringer); ok {
		return s.String()
	}
	return ds.ShardName(0)
}

// AgreeDataset is Agree on the settings that make two ranks' datasets
// the same one: the shard count, and a hash of each shard's file name
// and sample count (not its directory: nodes may keep their copies in
// different places). When the datasets differ, the ranks then find
// where: rank 0 sends its list of shards, and the error names the lowest
// rank whose list differs and its first differing shard on both sides
// ("shard 3: 000003.tar with 32 samples on rank 0, 000003.tar with 30
// samples on rank 2"), which points at the copy to fix (a truncated
// shard on one node). Every rank must call it.
func AgreeDataset(c collective.Comm, ds decode.Source) error {
	list := ShardList(ds)
	err := Agree(c, []Setting{
		{Name: "the dataset's shard count", Value: uint64(ds.NumShards())},
		{Name: "the dataset (shard names and sample counts)", Value: HashStrings(list), Hashed: true},
	})
	// Only when the ranks know alike that the datasets differ: an error
	// of the allgather itself may have reached some ranks only.
	var m mismatchError
	if !errors.As(err, &m) {
		return err
	}
	where, derr := datasetDifference(c, list)
	if derr != nil {
		return derr
	}
	if where == "" {
		return err
	}
	return collective.AllRanks(fmt.Errorf("%w (%s)", err, where))
}

// datasetDifference compares every rank's shard list with rank 0's and
// describes the first difference of the lowest rank that has one, or
// returns "" when all lists are alike. Every rank must call it.
func datasetDifference(c collective.Comm, mine []string) (string, error) {
	// Rank 0's list to every rank: an allgather to which only rank 0
	// brings bytes, which carries their length too.
	var text []byte
	if c.Rank() == 0 {
		text = []byte(strings.Join(mine, "\n"))
	}
	lists, err := c.AllgatherVar(text)
	if err != nil {
		return "", err
	}
	var theirs []string
	if len(lists[0]) > 0 {
		theirs = strings.Split(string(lists[0]), "\n")
	}
	// This rank's first difference with rank 0's list, if any.
	var diff []byte
	for i := range max(len(mine), len(theirs)) {
		a, b := "", ""
		if i < len(theirs) {
			a = theirs[i]
		}
		if i < len(mine) {
			b = mine[i]
		}
		if a != b {
			diff = []byte(fmt.Sprintf("shard %d: %s on rank 0, %s on rank %d", i, describeShard(a), describeShard(b), c.Rank()))
			break
		}
	}
	diffs, err := c.AllgatherVar(diff)
	if err != nil {
		return "", err
	}
	for _, d := range diffs {
		if len(d) > 0 {
			return string(d), nil
		}
	}
	return "", nil
}

// FirstDifference describes the first shard where the list saved differs
// from the list now (ShardList's entries), as "shard 3: 000003.tar with 32
// samples when saved, 000003.tar with 30 samples now"; "" when they are
// alike.
func FirstDifference(saved, now []string) string {
	for i := range max(len(saved), len(now)) {
		a, b := "", ""
		if i < len(saved) {
			a = saved[i]
		}
		if i < len(now) {
			b = now[i]
		}
		if a != b {
			return fmt.Sprintf("shard %d: %s when saved, %s now", i, describeShard(a), describeShard(b))
		}
	}
	return ""
}

// describeShard turns a ShardList entry, "000003.tar/32", into
// "000003.tar with 32 samples", and "" (past the end of a list) into "no
// shard".
func describeShard(entry string) string {
	if entry == "" {
		return "no shard"
	}
	i := strings.LastIndexByte(entry, '/')
	if i < 0 {
		return entry
	}
	if n := entry[i+1:]; n != "1" {
		return fmt.Sprintf("%s with %s samples", entry[:i], n)
	}
	return entry[:i] + " with 1 sample"
}
