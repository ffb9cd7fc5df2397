package launcher

import (
	"archive/tar"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/fnv"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/datahelix/datahelix/internal/gen"
)

// TestCacheCommand checks that datahelix cache lists the cached datasets
// by state and size, removes nothing without --prune, and with it removes
// exactly the older-format ones.
func TestCacheCommand(t *testing.T) {
	root := t.TempDir()
	dataset := func(name string, size int) string {
		dir := filepath.Join(root, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for f, n := range map[string]int{"shard-000000.tar": size, "DONE": 0} {
			if err := os.WriteFile(filepath.Join(dir, f), make([]byte, n), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	current := filepath.Join(root, gen.CacheName("default-seed1"))
	if _, err := gen.Install(current, func(tmp string) error {
		return os.WriteFile(filepath.Join(tmp, "shard-000000.tar"), make([]byte, 3<<20), 0o644)
	}); err != nil {
		t.Fatal(err)
	}
	old := dataset("default-v1-seed1", 1<<20)

	code, stdout, stderr := runMain("cache", "--cache-dir", root)
	wantLines := []string{
		"current         3.0 MiB  " + filepath.Base(current),
		"older format    1.0 MiB  default-v1-seed1",
		root + ": 2 datasets, 4.0 MiB; 1.0 MiB of older formats or abandoned",
		"(datahelix cache --prune removes them)",
	}
	if code != 0 || stderr != "" || stdout != strings.Join(wantLines, "\n")+"\n" {
		t.Fatalf("cache: exit %d, stderr %q, stdout:\n%s\nwant:\n%s", code, stderr, stdout, strings.Join(wantLines, "\n"))
	}
	if _, err := os.Stat(old); err != nil {
		t.Fatalf("cache without --prune removed %s: %v", old, err)
	}

	code, stdout, _ = runMain("cache", "--cache-dir", root, "--prune")
	if code != 0 || !strings.HasSuffix(stdout, "pruned 1.0 MiB\n") {
		t.Errorf("cache --prune: exit %d, stdout:\n%s", code, stdout)
	}
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Errorf("cache --prune kept %s: %v", old, err)
	}
	if _, err := os.Stat(filepath.Join(current, "shard-000000.tar")); err != nil {
		t.Errorf("cache --prune removed the current dataset: %v", err)
	}
}

// TestCacheCommandMissingDir checks that cache tells a mistyped
// --cache-dir, or a file, from a cache that holds nothing yet, and
// counts one dataset in the singular.
func TestCacheCommandMissingDir(t *testing.T) {
	root := t.TempDir()
	missing := filepath.Join(root, "nope")
	var fe flagError
	if err := commandErr(t, "cache", "--cache-dir", missing); !errors.As(err, &fe) || fe.flag != "cache-dir" || fe.value != missing {
		t.Errorf("cache --cache-dir MISSING: %#v; want a flagError naming the directory", err)
	}
	tr := newTranscript(root, "ROOT")
	tr.add([]string{"cache", "--cache-dir", missing}, usageLine(t, "cache", "--cache-dir", missing))
	file := filepath.Join(root, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := commandErr(t, "cache", "--cache-dir", file); !errors.As(err, &fe) || fe.flag != "cache-dir" || fe.value != file {
		t.Errorf("cache --cache-dir FILE: %#v; want a flagError naming the file", err)
	}
	tr.add([]string{"cache", "--cache-dir", file}, usageLine(t, "cache", "--cache-dir", file))
	golden(t, "cache_missing_dir.golden", tr.String())
	t.Setenv("DATAHELIX_CACHE", missing)
	if code, stdout, stderr := runMain("cache"); code != 0 || stdout != missing+": empty (no dataset generated yet)\n" {
		t.Errorf("cache with no cache yet: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if _, err := gen.Install(filepath.Join(root, gen.CacheName("default-seed1")), func(tmp string) error {
		return os.WriteFile(filepath.Join(tmp, "shard-000000.tar"), make([]byte, 1<<20), 0o644)
	}); err != nil {
		t.Fatal(err)
	}
	if code, stdout, _ := runMain("cache", "--cache-dir", root); code != 0 || !strings.Contains(stdout, root+": 1 dataset, 1.0 MiB;") {
		t.Errorf("cache with one dataset: exit %d, stdout:\n%s", code, stdout)
	}
}

// TestCacheCommandIndexes checks that datahelix cache lists the shard
// indexes of the cache's index directory by shard directory and state,
// counts the stale ones, and that --prune removes those (the index of a
// deleted shard, one named by an older datahelix) and keeps the index of
// a shard that exists and matches.
func TestCacheCommandIndexes(t *testing.T) {
	root, data := t.TempDir(), t.TempDir()
	for _, name := range []string{"a.tar", "b.tar"} {
		var buf bytes.Buffer
		w := tar.NewWriter(&buf)
		if err := w.WriteHeader(&tar.Header{Name: "000001.txt", Mode: 0o644, Size: 3}); err != nil {
			t.Fatal(err)
		}
		w.Write([]byte("one"))
		w.Close()
		writeTestFile(t, filepath.Join(data, name), buf.Bytes())
	}
	if code, _, stderr := runMain("inspect", "--cache-dir", root, data); code != 0 {
		t.Fatalf("inspect: exit %d: %s", code, stderr)
	}
	indexDir := filepath.Join(root, "index")
	live, _ := filepath.Glob(filepath.Join(indexDir, "a.tar.*.dhidx"))
	dead, _ := filepath.Glob(filepath.Join(indexDir, "b.tar.*.dhidx"))
	if len(live) != 1 || len(dead) != 1 {
		t.Fatalf("indexes %v and %v, want one each", live, dead)
	}
	if err := os.Remove(filepath.Join(data, "b.tar")); err != nil {
		t.Fatal(err)
	}
	legacy := writeTestFile(t, filepath.Join(indexDir, "c.tar.0123456789abcdef.dhidx"), []byte("an older datahelix's index"))
	size := func(p string) int64 {
		info, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		return info.Size()
	}
	wantLines := []string{
		root + ": 0 datasets, 0.0 MiB; 0.0 MiB of older formats or abandoned",
		"current         0.0 MiB  1 shard index of " + data,
		"shard gone      0.0 MiB  1 shard index of " + data,
		"older format    0.0 MiB  1 shard index",
		fmt.Sprintf("%s: 3 shard indexes, 0.0 MiB; 2 (0.0 MiB) stale (shard gone or changed), superseded, of older formats or abandoned", indexDir),
		"(datahelix cache --prune removes them)",
	}
	code, stdout, stderr := runMain("cache", "--cache-dir", root)
	if code != 0 || stderr != "" || stdout != strings.Join(wantLines, "\n")+"\n" {
		t.Fatalf("cache: exit %d, stderr %q, stdout:\n%s\nwant:\n%s", code, stderr, stdout, strings.Join(wantLines, "\n"))
	}
	if _, err := os.Stat(dead[0]); err != nil {
		t.Fatalf("cache without --prune removed %s: %v", dead[0], err)
	}

	freed := size(dead[0]) + size(legacy)
	code, stdout, _ = runMain("cache", "--cache-dir", root, "--prune")
	if want := fmt.Sprintf("pruned %s (2 shard indexes)\n", mib(freed)); code != 0 || !strings.HasSuffix(stdout, want) {
		t.Errorf("cache --prune: exit %d, stdout:\n%s\nwant it to end %q", code, stdout, want)
	}
	for _, p := range []string{dead[0], legacy} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("cache --prune kept %s: %v", p, err)
		}
	}
	if _, err := os.Stat(live[0]); err != nil {
		t.Errorf("cache --prune removed the index of a shard in use: %v", err)
	}
	code, stdout, _ = runMain("cache", "--cache-dir", root)
	if want := indexDir + ": 1 shard index, 0.0 MiB; 0 (0.0 MiB) stale"; code != 0 || !strings.Contains(stdout, want) || strings.Contains(stdout, "--prune") {
		t.Errorf("cache after --prune: exit %d, stdout:\n%s\nwant %q and no hint", code, stdout, want)
	}
}

// TestCacheCommandSupersededIndex checks that datahelix cache calls an
// index named after a path through a symbolic link, as binaries before
// links were resolved named it, superseded once this binary has the index
// of the resolved path, and that --prune removes it and keeps that one.
func TestCacheCommandSupersededIndex(t *testing.T) {
	root, base := t.TempDir(), t.TempDir()
	real := filepath.Join(base, "real")
	if err := os.MkdirAll(real, 0o755); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w := tar.NewWriter(&buf)
	if err := w.WriteHeader(&tar.Header{Name: "000001.txt", Mode: 0o644, Size: 3}); err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("one"))
	w.Close()
	writeTestFile(t, filepath.Join(real, "a.tar"), buf.Bytes())
	link := filepath.Join(base, "link")
	if err := os.Symlink(real, link); err != nil {
		t.Skipf("symlink: %v", err)
	}
	if code, _, stderr := runMain("inspect", "--cache-dir", root, filepath.Join(link, "a.tar")); code != 0 {
		t.Fatalf("inspect: exit %d: %s", code, stderr)
	}
	indexDir := filepath.Join(root, "index")
	resolved, _ := filepath.Glob(filepath.Join(indexDir, "a.tar.*.v3.dhidx"))
	if len(resolved) != 1 {
		t.Fatalf("indexes %v, want one", resolved)
	}
	// The index an older binary wrote: the same, recording and named
	// after the path through the link (format 3: magic, size, mtime, the
	// path, the entries, CRC-32C).
	data, err := os.ReadFile(resolved[0])
	if err != nil {
		t.Fatal(err)
	}
	plen, n := binary.Uvarint(data[24:])
	viaLink := filepath.Join(link, "a.tar")
	if n <= 0 || string(data[24+n:24+n+int(plen)]) != filepath.Join(real, "a.tar") {
		t.Fatalf("%s does not record %s", resolved[0], filepath.Join(real, "a.tar"))
	}
	old := binary.AppendUvarint(append([]byte(nil), data[:24]...), uint64(len(viaLink)))
	old = append(append(old, viaLink...), data[24+n+int(plen):len(data)-4]...)
	old = binary.LittleEndian.AppendUint32(old, crc32.Checksum(old, crc32.MakeTable(crc32.Castagnoli)))
	h := fnv.New64a()
	h.Write([]byte(viaLink))
	unresolved := writeTestFile(t, filepath.Join(indexDir, fmt.Sprintf("a.tar.%016x.v3.dhidx", h.Sum64())), old)

	wantLines := []string{
		root + ": 0 datasets, 0.0 MiB; 0.0 MiB of older formats or abandoned",
		"superseded      0.0 MiB  1 shard index of " + link + ", named through a symbolic link (the index of the resolved path is read)",
		"current         0.0 MiB  1 shard index of " + real,
		fmt.Sprintf("%s: 2 shard indexes, 0.0 MiB; 1 (0.0 MiB) stale (shard gone or changed), superseded, of older formats or abandoned", indexDir),
		"(datahelix cache --prune removes them)",
	}
	code, stdout, stderr := runMain("cache", "--cache-dir", root)
	if code != 0 || stderr != "" || stdout != strings.Join(wantLines, "\n")+"\n" {
		t.Fatalf("cache: exit %d, stderr %q, stdout:\n%s\nwant:\n%s", code, stderr, stdout, strings.Join(wantLines, "\n"))
	}
	if code, stdout, _ = runMain("cache", "--cache-dir", root, "--prune"); code != 0 || !strings.HasSuffix(stdout, "(1 shard index)\n") {
		t.Errorf("cache --prune: exit %d, stdout:\n%s\nwant one shard index pruned", code, stdout)
	}
	if _, err := os.Stat(unresolved); !os.IsNotExist(err) {
		t.Errorf("cache --prune kept %s: %v", unresolved, err)
	}
	if _, err := os.Stat(resolved[0]); err != nil {
		t.Errorf("cache --prune removed the index of the resolved path: %v", err)
	}
}
