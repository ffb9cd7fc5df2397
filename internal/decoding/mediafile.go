package decoding

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/datahelix/datahelix/internal/shardindex"
)

// FileSample returns a plain media file (not a tar shard) as a one-member
// sample: its key is the file name up to the first dot, its member's
// extension the rest, lower case. The errors of decoding it name the
// file once ("decode: file PATH: ...") rather than a shard, sample and
// member.
func FileSample(path string, data []byte) *Sample {
	key, ext, _ := strings.Cut(filepath.Base(path), ".")
	// The member is named by the path, as the sample's shard is: that is
	// how the sample is recognised as a file (isFileSample).
	return &Sample{Shard: path, Key: key, Members: []Member{{Name: path, Ext: strings.ToLower(ext), Data: data}}}
}

// isFileSample reports whether s was made by FileSample.
func isFileSample(s *Sample) bool {
	return len(s.Members) == 1 && s.Members[0].Name == s.Shard
}

// IsMediaFile reports whether path names an existing regular file that
// is not a shard (shardindex.IsShardName) and whose extension names a video, image
// or audio format, read or refused: a clip or picture given alone, which inspect
// and decode take as a one-member sample (FileSample).
func IsMediaFile(path string) bool {
	if shardindex.IsShardName(path) {
		return false
	}
	ext := strings.ToLower(strings.TrimPrefix(filepath.Ext(path), "."))
	switch {
	case memberKind(ext) == kindVideo || memberKind(ext) == kindImage:
	case unreadMedia(ext) != "": // refused, or audio read with audio output on
	default:
		return false
	}
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

// ExpandMediaGlob returns the paths a dataset argument stands for when
// clips and pictures may be given alone: the sorted matches of a glob
// that matches a media file (IsMediaFile), each a path of its own, so
// that 'clips/*.mp4' is every clip and 'dir/*' its shards and media
// files; otherwise the argument itself, which OpenDataset takes (a
// directory, a glob of shards, a shard, or a path that names nothing,
// which it reports).
func ExpandMediaGlob(arg string) []string {
	if _, err := os.Stat(arg); err == nil || !shardindex.IsGlob(arg) {
		return []string{arg}
	}
	matches, err := shardindex.Paths(arg)
	if err != nil || !slices.ContainsFunc(matches, IsMediaFile) {
		return []string{arg}
	}
	return matches
}
