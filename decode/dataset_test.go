package decode

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// gzipBytes returns data gzip-compressed.
func gzipBytes(t testing.TB, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestOpenDatasetGlobSkipsIndexFiles opens 'DIR/*' twice without a cache
// directory: the first open writes shard.tar.dhidx beside the shard, and
// the second picked it up as a shard ("invalid tar header at offset 0").
func TestOpenDatasetGlobSkipsIndexFiles(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"a.tar", "b.tar"} {
		writeFile(t, dir, name, writeTar(t, tar.FormatPAX, []tarFile{{name: "0.txt", data: name}}))
	}
	writeFile(t, dir, "b.tar.dhidx.tmp123", []byte("a partly written index"))
	glob := filepath.Join(dir, "*")
	for i := range 2 {
		d, err := OpenDataset(glob, "")
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		var names []string
		for _, s := range d.Shards {
			names = append(names, filepath.Base(s.Path()))
		}
		d.Close()
		if strings.Join(names, " ") != "a.tar b.tar" {
			t.Errorf("open %d: shards %v, want [a.tar b.tar]", i, names)
		}
		if i == 1 && !d.Shards[0].FromCache() {
			t.Errorf("open %d: index not loaded from the cache beside the shard", i)
		}
	}
	_, err := OpenDataset(filepath.Join(dir, "*.dhidx"), "")
	if !errors.Is(err, ErrNoShards) || !strings.Contains(err.Error(), "matches only index cache files (*.dhidx)") {
		t.Errorf("glob of index files only: err %v", err)
	}
}

// TestOpenDatasetCompressedDir lists directories holding compressed tar
// files: alone they gave "has no *.tar files" without saying why, beside
// *.tar shards they were skipped without a word.
func TestOpenDatasetCompressedDir(t *testing.T) {
	tarData := writeTar(t, tar.FormatPAX, []tarFile{{name: "0.txt", data: "t"}})
	only := t.TempDir()
	writeFile(t, only, "a.tar.gz", gzipBytes(t, tarData))
	writeFile(t, only, "b.tgz", gzipBytes(t, tarData))
	writeFile(t, only, "c.tar.zst", []byte("\x28\xb5\x2f\xfd not really"))
	writeFile(t, only, "notes.md", []byte("not a shard"))
	_, err := OpenDataset(only, t.TempDir())
	want := "directory " + only + " has no *.tar files; 3 compressed shards (*.tar.gz, *.tar.zst, *.tgz) must be decompressed first"
	if !errors.Is(err, ErrNoShards) || !errors.Is(err, ErrCompressedShard) || !strings.Contains(err.Error(), want) {
		t.Errorf("only compressed: err %v\nwant ErrNoShards and ErrCompressedShard, saying %q", err, want)
	}

	mixed := t.TempDir()
	writeFile(t, mixed, "a.tar", tarData)
	writeFile(t, mixed, "b.tar.gz", gzipBytes(t, tarData))
	_, err = OpenDataset(mixed, t.TempDir())
	want = "directory " + mixed + " mixes 1 *.tar shard with 1 compressed shard (*.tar.gz) such as " + filepath.Join(mixed, "b.tar.gz")
	if !errors.Is(err, ErrCompressedShard) || !strings.Contains(err.Error(), want) {
		t.Errorf("mixed: err %v\nwant ErrCompressedShard, saying %q", err, want)
	}
}

// TestBuildIndexCompressed indexes shards that are compressed tar files
// named *.tar (or given by glob): the error said "invalid tar header" (or
// "truncated" for one under 512 bytes) instead of naming the compression.
func TestBuildIndexCompressed(t *testing.T) {
	tarData := writeTar(t, tar.FormatPAX, []tarFile{{name: "000001.txt", data: strings.Repeat("caption ", 200)}})
	tests := []struct {
		name, format string
		data         []byte
	}{
		{"gzip", "gzip", gzipBytes(t, tarData)},
		{"tiny gzip", "gzip", gzipBytes(t, []byte("x"))}, // under one tar block
		{"zstd", "zstd", append([]byte{0x28, 0xb5, 0x2f, 0xfd}, make([]byte, 600)...)},
		{"xz", "xz", append([]byte{0xfd, '7', 'z', 'X', 'Z', 0}, make([]byte, 600)...)},
		{"bzip2", "bzip2", append([]byte("BZh91AY&SY"), make([]byte, 600)...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, t.TempDir(), "shard.tar", tt.data)
			_, err := OpenShard(path, t.TempDir())
			var se *ShardError
			if !errors.As(err, &se) || se.Path != path || !errors.Is(err, ErrCorruptShard) || !errors.Is(err, ErrCompressedShard) {
				t.Fatalf("got %v, want a *ShardError for %s matching ErrCorruptShard and ErrCompressedShard", err, path)
			}
			for _, want := range []string{tt.format + "-compressed", "shards must be uncompressed tar", tt.format + " -dc " + path} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
	// Garbage that is no compression format keeps the tar error, and a
	// tar whose first member is named like the bzip2 signature is a tar.
	_, err := buildIndex("garbage.tar", bytes.NewReader(bytes.Repeat([]byte("garbage!"), 128)), 1024)
	if !errors.Is(err, ErrCorruptShard) || errors.Is(err, ErrCompressedShard) || !strings.Contains(err.Error(), "invalid tar header") {
		t.Errorf("garbage: err %v, want an invalid tar header", err)
	}
	bz := writeTar(t, tar.FormatUSTAR, []tarFile{{name: "BZh91.txt", data: "t"}})
	if idx, err := buildIndex("bz.tar", bytes.NewReader(bz), int64(len(bz))); err != nil || len(idx.entries) != 1 {
		t.Errorf("tar with a member named BZh91.txt: %v", err)
	}
}

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
