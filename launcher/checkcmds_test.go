package launcher

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"testing"

	"github.com/datahelix/datahelix/internal/cli/clitest"
	"github.com/datahelix/datahelix/internal/gen/gentest"
)

// tarOf returns a tar of the named members.
func tarOf(t *testing.T, members map[string][]byte, names ...string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range names {
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(members[n])), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write(members[n])
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func writeTestFile(t *testing.T, path string, data []byte) string {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestDecodeGoesOnPastBadFiles checks that decode counts and skips a file
// that is not a tar like a bad sample, decodes the files after it, and
// ends with a total and exit 1; that a compressed shard is opened as a
// shard; and that an empty or bad plain file is called a file. What
// decode prints is pinned in testdata/decode_bad_files.golden.
func TestDecodeGoesOnPastBadFiles(t *testing.T) {
	jpg, err := os.ReadFile(filepath.Join("..", "decode", "testdata", "media", "image420.jpg"))
	if err != nil {
		t.Fatal(err)
	}
	dir, cache := t.TempDir(), t.TempDir()
	tr := clitest.NewTranscript(dir, "DIR", cache, "CACHE").Replace(`\t[0-9.]+ ms\n`, "\tT ms\n")
	a := writeTestFile(t, filepath.Join(dir, "a.jpg"), jpg)
	bad := writeTestFile(t, filepath.Join(dir, "z.tar"), bytes.Repeat([]byte("not a tar "), 200))
	b := writeTestFile(t, filepath.Join(dir, "b.jpg"), jpg)
	if code, _, _ := tr.Run(runMain, "decode", "--cache", cache, a, bad, b); code != 1 {
		t.Errorf("a bad shard among good files: exit %d, want 1", code)
	}

	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(tarOf(t, map[string][]byte{"k.jpg": jpg}, "k.jpg"))
	zw.Close()
	empty := writeTestFile(t, filepath.Join(dir, "empty.jpg"), nil)
	for _, name := range []string{"z.tar.gz", "z.tgz", "Z.TAR.ZST", "z.tzst", "z.tar.zstd", "z.txz", "z.TBZ2", "z.tbz"} {
		p := writeTestFile(t, filepath.Join(dir, name), gz.Bytes())
		if code, _, _ := tr.Run(runMain, "decode", "--cache", cache, p, empty); code != 1 {
			t.Errorf("%s: exit %d, want 1", name, code)
		}
	}
	clitest.Golden(t, "decode_bad_files.golden", tr.String())
}

// TestCheckingCommandsWriteNothingBesideShards checks that inspect,
// decode and costmodel keep shard indexes where run does, in the cache,
// not in the dataset's directory.
func TestCheckingCommandsWriteNothingBesideShards(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("DATAHELIX_CACHE", cache)
	shards, _ := filepath.Glob(filepath.Join(gentest.Tiny(t), "*.tar"))
	data := t.TempDir()
	for _, p := range shards[:2] {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		writeTestFile(t, filepath.Join(data, filepath.Base(p)), raw)
	}
	for _, args := range [][]string{
		{"inspect", data},
		{"decode", filepath.Join(data, filepath.Base(shards[0]))},
		{"costmodel", "--data", data, "--limit", "3", "--warmup", "1", "--repeat", "1"},
	} {
		if code, _, stderr := runMain(args...); code != 0 {
			t.Fatalf("%s: exit %d: %s", args[0], code, stderr)
		}
		if beside, _ := filepath.Glob(filepath.Join(data, "*.dhidx")); len(beside) > 0 {
			t.Fatalf("%s wrote %v beside the shards", args[0], beside)
		}
	}
	if cached, _ := filepath.Glob(filepath.Join(cache, "index", "*.dhidx")); len(cached) != 2 {
		t.Errorf("cache holds %v, want the 2 shards' indexes in %s", cached, filepath.Join(cache, "index"))
	}
}

// TestInspectPrintsSkippedMembers checks that inspect prints the members
// a shard's index skipped, capped, and fails a shard left without
// samples.
func TestInspectPrintsSkippedMembers(t *testing.T) {
	dir := t.TempDir()
	members := map[string][]byte{"k.txt": []byte("a caption")}
	noext := []string{"000001", "000002", "000003", "000004", "000005", "000006", "000007"}
	for _, n := range noext {
		members[n] = []byte("x")
	}
	mixed := writeTestFile(t, filepath.Join(dir, "mixed.tar"), tarOf(t, members, "k.txt", "README"))
	none := writeTestFile(t, filepath.Join(dir, "noext.tar"), tarOf(t, members, noext...))
	cache := t.TempDir()
	// The table's columns are as wide as the temporary paths.
	tr := clitest.NewTranscript(dir, "DIR", cache, "CACHE").Replace(` {2,}`, "  ")
	if code, _, _ := tr.Run(runMain, "inspect", "--cache", cache, mixed); code != 0 {
		t.Errorf("mixed: exit %d, want 0", code)
	}
	if code, _, _ := tr.Run(runMain, "inspect", "--cache", cache, none); code != 1 {
		t.Errorf("noext: exit %d, want 1", code)
	}
	clitest.Golden(t, "inspect_skipped_members.golden", tr.String())
}

// TestIndexCacheDirFlag checks that inspect, decode and costmodel take
// run's --cache-dir and keep their shard indexes in its index directory,
// where run keeps them, and refuse --cache and --cache-dir together
// (testdata/index_cache_dir_refused.golden).
func TestIndexCacheDirFlag(t *testing.T) {
	data := gentest.Tiny(t)
	shards, _ := filepath.Glob(filepath.Join(data, "*.tar"))
	tr := clitest.NewTranscript()
	for _, args := range [][]string{
		{"inspect", shards[0]},
		{"decode", shards[0]},
		{"costmodel", "--data", shards[0], "--warmup", "1", "--repeat", "1", "--limit", "2"},
	} {
		root := t.TempDir()
		code, _, stderr := runMain(append([]string{args[0], "--cache-dir", root}, args[1:]...)...)
		indexes, _ := filepath.Glob(filepath.Join(root, "index", "*"))
		if code != 0 || len(indexes) == 0 {
			t.Errorf("%s --cache-dir: exit %d, indexes %q under %s/index; want exit 0 and the shard's index there\n%s", args[0], code, indexes, root, stderr)
		}
		cache := t.TempDir()
		tr.SetNames(data, "DATA", cache, "CACHE", root, "ROOT")
		both := append([]string{args[0], "--cache", cache, "--cache-dir", root}, args[1:]...)
		tr.Add(both, usageLine(t, both...))
	}
	clitest.Golden(t, "index_cache_dir_refused.golden", tr.String())
}
