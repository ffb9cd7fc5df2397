package shardindex

import "testing"

// TestIsShardName checks which names are shards: *.tar and every
// compressed-tar suffix in any case, not media files or names that only
// contain a suffix.
func TestIsShardName(t *testing.T) {
	for _, name := range []string{"a.tar", "dir/A.TAR", "a.tar.gz", "a.tgz", "a.tar.zst", "a.tar.zstd", "a.tzst",
		"a.tar.xz", "a.TXZ", "a.tar.bz2", "a.tbz2", "a.tbz"} {
		if !IsShardName(name) {
			t.Errorf("IsShardName(%q) = false, want true", name)
		}
	}
	for _, name := range []string{"a.jpg", "a.mp4", "a.tar.jpg", "tar", "a.gz", "a.zst", "a.tarx", ""} {
		if IsShardName(name) {
			t.Errorf("IsShardName(%q) = true, want false", name)
		}
	}
}
