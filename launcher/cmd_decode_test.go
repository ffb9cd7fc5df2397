package launcher

import (
	"bytes"
	"crypto/md5"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/datahelix/datahelix/internal/cli"
	"github.com/datahelix/datahelix/internal/cli/clitest"
	"github.com/datahelix/datahelix/internal/decoding"
	"github.com/datahelix/datahelix/internal/gen/gentest"
	"github.com/datahelix/datahelix/internal/shard"
)

// TestDecodeMD5MatchesFFmpeg checks `datahelix decode --md5` against the
// md5 column of `ffmpeg -i FILE -f framemd5 -` on clips of several codecs,
// GOP structures, sizes and containers.
func TestDecodeMD5MatchesFFmpeg(t *testing.T) {
	ff, err := exec.LookPath("ffmpeg")
	if err != nil {
		t.Skip("ffmpeg CLI not installed")
	}
	for _, name := range []string{"h264_bframes.mp4", "h264_odd.mp4", "h264_intra444.mp4", "h264_audio.mkv", "hevc.mp4", "vp9.webm", "vp8.webm", "av1.mp4"} {
		path := filepath.Join("..", "decode", "testdata", "media", name)
		out, err := exec.Command(ff, "-nostdin", "-v", "error", "-i", path, "-map", "0:v:0", "-f", "framemd5", "-").Output()
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Split(line, ","); len(f) == 6 && !strings.HasPrefix(line, "#") {
				want = append(want, strings.TrimSpace(f[5]))
			}
		}
		code, stdout, stderr := runMain("decode", "--md5", path)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", name, code, stderr)
		}
		got := strings.Fields(stdout)
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s: got %d md5s, ffmpeg %d; first differing at %d", name, len(got), len(want), firstDiff(got, want))
		}
	}
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestDecodeMD5Images checks --md5 on images: the MD5 of the RGB24
// picture at full size, equal to libjpeg-turbo's own djpeg for JPEG and
// to ffmpeg's RGB24 framemd5 for an RGB PNG.
func TestDecodeMD5Images(t *testing.T) {
	media := filepath.Join("..", "decode", "testdata", "media")
	check := func(name string, want string) {
		t.Helper()
		code, stdout, stderr := runMain("decode", "--md5", filepath.Join(media, name))
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", name, code, stderr)
		}
		if got := strings.TrimSpace(stdout); got != want {
			t.Errorf("%s: got md5 %q, want %q", name, got, want)
		}
	}
	if djpeg, err := exec.LookPath("djpeg"); err == nil {
		for _, name := range []string{"image420.jpg", "image444.jpg"} {
			ppm, err := exec.Command(djpeg, "-ppm", filepath.Join(media, name)).Output()
			if err != nil {
				t.Fatal(err)
			}
			// A binary PPM: "P6", width height, maxval, each followed by one
			// whitespace byte, then the RGB24 pixels.
			for range 3 {
				ppm = ppm[bytes.IndexByte(ppm, '\n')+1:]
			}
			check(name, fmt.Sprintf("%x", md5.Sum(ppm)))
		}
	} else {
		t.Log("djpeg (libjpeg-turbo-progs) not installed: JPEG MD5s not checked")
	}
	if ff, err := exec.LookPath("ffmpeg"); err == nil {
		out, err := exec.Command(ff, "-nostdin", "-v", "error", "-i", filepath.Join(media, "image.png"), "-pix_fmt", "rgb24", "-f", "framemd5", "-").Output()
		if err != nil {
			t.Fatal(err)
		}
		check("image.png", ffmpegMD5s(string(out))[0])
	}
}

// TestDecodeMD5BadFile checks that --md5 on a plain file that fails
// says why as decode without --md5 does: a garbage JPEG is an invalid
// image header, said once, not FFmpeg refusing its jpeg_pipe container;
// and a good file given with it is still hashed, its line naming it
// (PATH<tab>MD5, as with several files).
func TestDecodeMD5BadFile(t *testing.T) {
	dir := t.TempDir()
	bad := writeTestFile(t, filepath.Join(dir, "bad.jpg"), []byte("\xff\xd8\xff\xe0garbage"))
	png := filepath.Join("..", "decode", "testdata", "media", "image.png")
	code, stdout, stderr := runMain("decode", "--md5", bad, png)
	lines := strings.Split(stderr, "\n")
	want := "decode: file " + bad + ": invalid image header: "
	if code != 1 || !strings.HasPrefix(stdout, png+"\t") || strings.Count(stdout, "\n") != 1 || len(lines) != 3 || !strings.HasPrefix(lines[0], want) ||
		strings.Count(lines[0], "decode:") != 1 || !strings.HasSuffix(stderr, "decode: 1 file decoded, 1 failed\n") {
		t.Errorf("got exit %d, stdout %q, stderr %q; want %q... once, the PNG's MD5 and the total", code, stdout, stderr, want)
	}
}

// TestDecodeMD5Text checks that --md5 on a text file, which has no
// pictures, says so instead of printing nothing, and succeeds.
func TestDecodeMD5Text(t *testing.T) {
	txt := writeTestFile(t, filepath.Join(t.TempDir(), "notes.txt"), []byte("hello\n"))
	code, stdout, stderr := runMain("decode", "--md5", txt)
	if want := "decode: file " + txt + " has no pictures to hash\n"; code != 0 || stdout != "" || stderr != want {
		t.Errorf("got exit %d, stdout %q, stderr %q; want exit 0, no output, %q", code, stdout, stderr, want)
	}
}

// TestDecodeMD5Shard checks --md5 on a shard: MEMBER<tab>MD5 lines, the
// video members' per frame as for the bare file, the images' one each.
func TestDecodeMD5Shard(t *testing.T) {
	data := gentest.Tiny(t)
	shards, _ := filepath.Glob(filepath.Join(data, "*.tar"))
	members := map[string]int{}
	for _, sh := range shards[:4] { // clips, images, text, clips
		code, stdout, stderr := runMain("decode", "--md5", "--cache", t.TempDir(), sh)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", sh, code, stderr)
		}
		for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
			if line == "" {
				continue
			}
			name, sum, ok := strings.Cut(line, "\t")
			if !ok || len(sum) != 32 {
				t.Fatalf("%s: line %q, want MEMBER<tab>MD5", sh, line)
			}
			members[name]++
		}
	}
	var videos, images int
	for name, n := range members {
		switch filepath.Ext(name) {
		case ".mp4", ".webm", ".mkv":
			videos++
			if n < 2 {
				t.Errorf("%s: %d MD5s, want one per frame", name, n)
			}
		case ".jpg", ".png", ".webp":
			images++
			if n != 1 {
				t.Errorf("%s: %d MD5s, want 1", name, n)
			}
		default:
			t.Errorf("%s hashed: want only video and image members", name)
		}
	}
	if videos == 0 || images == 0 {
		t.Errorf("got %d video and %d image members hashed, want some of each", videos, images)
	}
	// A video member's lines equal --md5 on the member extracted to a file.
	sh, err := shard.Open(shards[0], t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	s, err := sh.ReadSample(0)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := decoding.ParseRecord(s, decoding.Limits{})
	if err != nil || rec.Video == nil {
		t.Fatalf("first sample of %s: record %+v, err %v; want a clip", shards[0], rec, err)
	}
	m := s.Members[rec.Video.Member]
	file := filepath.Join(t.TempDir(), m.Name)
	if err := os.WriteFile(file, m.Data, 0o644); err != nil {
		t.Fatal(err)
	}
	_, bare, _ := runMain("decode", "--md5", file)
	_, all, _ := runMain("decode", "--md5", "--cache", t.TempDir(), shards[0])
	var fromShard []string
	for _, line := range strings.Split(all, "\n") {
		if name, sum, _ := strings.Cut(line, "\t"); name == m.Name {
			fromShard = append(fromShard, sum)
		}
	}
	if got, want := strings.Join(fromShard, " "), strings.Join(strings.Fields(bare), " "); got != want || got == "" {
		t.Errorf("%s in the shard: got %d MD5s, the bare file %d; want the same", m.Name, len(fromShard), len(strings.Fields(bare)))
	}
}

// ffmpegMD5s returns the md5 column of ffmpeg's framemd5 output.
func ffmpegMD5s(out string) []string {
	var sums []string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Split(line, ","); len(f) == 6 && !strings.HasPrefix(line, "#") {
			sums = append(sums, strings.TrimSpace(f[5]))
		}
	}
	return sums
}

// TestDecodeCommand decodes a clip and an image at a size, a file that
// is no media (exit 1, named), no file (a usage error), and an image
// with and without -v, which alone prints the JPEG backend (decode -h is
// in testdata/help.golden), as testdata/decode_command.golden shows.
func TestDecodeCommand(t *testing.T) {
	media := filepath.Join("..", "decode", "testdata", "media")
	img := filepath.Join(media, "image420.jpg")
	tr := clitest.NewTranscript(media, "MEDIA").Replace(`\t[0-9.]+ ms\n`, "\tT ms\n").
		Replace(`JPEG backend \S+`, "JPEG backend NAME") // turbojpeg, or what this build has
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"decode", "--frames", "4", "--size", "32", filepath.Join(media, "h264_bframes.mp4"), img}, 0},
		{[]string{"decode", filepath.Join(media, "make.sh")}, 1},
		{[]string{"decode"}, cli.ExitUsage},
		{[]string{"decode", img}, 0},
		{[]string{"decode", "-v", img}, 0},
	} {
		if code, _, _ := tr.Run(runMain, c.args...); code != c.code {
			t.Errorf("%q: exit %d, want %d", c.args, code, c.code)
		}
	}
	clitest.Golden(t, "decode_command.golden", tr.String())
}

func TestGenCommand(t *testing.T) {
	if _, err := exec.LookPath("ffmpeg"); err != nil {
		t.Skip("ffmpeg CLI not installed")
	}
	dir := t.TempDir()
	code, stdout, stderr := runMain("gen", "--preset", "imagenet", "--samples", "3", "--shards", "2", "--out", dir, "--size-scale", "0.2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if got := strings.Fields(stdout); len(got) != 2 || filepath.Base(got[1]) != "imagenet-000001.tar" {
		t.Errorf("got shards %v, want imagenet-000000.tar and imagenet-000001.tar", got)
	}
	// Every problem with the flags is a usage error: exit 2, one line.
	for _, args := range [][]string{
		{"--preset", "nope", "--samples", "1", "--out", dir},
		{"--preset", "imagenet", "--samples", "2", "--shards", "0", "--out", dir},
		{"--preset", "imagenet", "--samples", "2", "--shards", "3", "--out", dir},
		{"--preset", "imagenet", "--samples", "0", "--out", dir},
		{"--preset", "imagenet", "--samples", "2", "--size-scale", "-1", "--out", dir},
		{"--samples", "1"},
	} {
		if code, _, stderr := runMain(append([]string{"gen"}, args...)...); code != 2 || strings.Count(stderr, "\n") != 1 {
			t.Errorf("gen %q: got exit %d, stderr %q; want 2 and one line", args, code, stderr)
		}
	}
}

// TestDecodeReportsDamage decodes an HEVC clip with picture hashes whose
// middle is damaged: with --check-hashes each line gives the damaged
// packets and a last line on stderr says how many samples had damage;
// without it the hashes go unchecked. The intact clip counts none
// (testdata/decode_damage.golden).
func TestDecodeReportsDamage(t *testing.T) {
	clip, err := os.ReadFile(filepath.Join("..", "decode", "testdata", "media", "hevc_md5.mp4"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	intact, damaged := filepath.Join(dir, "intact.mp4"), filepath.Join(dir, "damaged.mp4")
	bad := bytes.Clone(clip)
	for k := len(bad) / 2; k < len(bad)/2+16; k++ {
		bad[k] ^= 0x5a
	}
	if err := os.WriteFile(intact, clip, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(damaged, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	packets := regexp.MustCompile(`(?m)^(\w+)\t.*\tdamaged packets (\d+)\t`)
	count := func(stdout string) map[string]string {
		got := map[string]string{}
		for _, m := range packets.FindAllStringSubmatch(stdout, -1) {
			got[m[1]] = m[2]
		}
		return got
	}
	// The damaged clip's count of packets depends on the decoder's
	// version: the golden has N, the test checks it is not 0.
	tr := clitest.NewTranscript(dir, "DIR").Replace(`\t[0-9.]+ ms\n`, "\tT ms\n").Replace(`damaged packets [1-9]\d*`, "damaged packets N")
	code, stdout, _ := tr.Run(runMain, "decode", "--check-hashes", intact, damaged)
	if got := count(stdout); code != 0 || got["intact"] != "0" || got["damaged"] == "0" || got["damaged"] == "" {
		t.Errorf("--check-hashes: exit %d, damaged packets %v; want 0 for the intact clip, some for the damaged one", code, got)
	}
	code, stdout, _ = tr.Run(runMain, "decode", damaged)
	if got := count(stdout); code != 0 || got["damaged"] != "0" {
		t.Errorf("without --check-hashes: exit %d, damaged packets %v; want 0, the hashes unchecked", code, got)
	}
	// --md5 counts nothing: the flag would be ignored, so it is refused.
	if code, _, _ := tr.Run(runMain, "decode", "--md5", "--check-hashes", damaged); code != cli.ExitUsage {
		t.Errorf("--md5 --check-hashes: exit %d, want a usage error", code)
	}
	clitest.Golden(t, "decode_damage.golden", tr.String())
}

// TestDecodeShardTotal checks decode's closing line on a shard of which
// some samples fail: it counts the shard's samples, decoded and failed,
// instead of calling the shard one failed file ("0 files decoded, 1
// failed (1 sample failed)", as if nothing decoded), with and without
// --md5, and counts a plain file given with it apart; the failed member
// is named (testdata/decode_shard_total.golden).
func TestDecodeShardTotal(t *testing.T) {
	jpg, err := os.ReadFile(filepath.Join("..", "decode", "testdata", "media", "image420.jpg"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	members := map[string][]byte{"a.jpg": jpg, "b.jpg": []byte("\xff\xd8\xff\xe0garbage"), "c.jpg": jpg}
	shard := writeTestFile(t, filepath.Join(dir, "s.tar"), tarOf(t, members, "a.jpg", "b.jpg", "c.jpg"))
	file := writeTestFile(t, filepath.Join(dir, "f.jpg"), jpg)
	tr := clitest.NewTranscript(dir, "DIR").Replace(`\t[0-9.]+ ms\n`, "\tT ms\n").
		Replace(`\t[0-9a-f]{32}\n`, "\tMD5\n") // of what this build's JPEG decoder made
	for _, args := range [][]string{{shard}, {"--md5", shard}, {file, shard, shard}} {
		cache := t.TempDir()
		tr.SetNames(dir, "DIR", cache, "CACHE")
		if code, _, _ := tr.Run(runMain, append([]string{"decode", "--cache", cache}, args...)...); code != 1 {
			t.Errorf("%v: exit %d, want 1", args, code)
		}
	}
	clitest.Golden(t, "decode_shard_total.golden", tr.String())
}

// TestDecodeDirectoryAndGlob checks that decode takes a directory and a
// glob as run and inspect do: a directory's shards in name order, the
// files a quoted glob matches (--md5 then names each file's lines), and a
// directory without shards counted as a failed argument, the others still
// decoded.
func TestDecodeDirectoryAndGlob(t *testing.T) {
	jpg, err := os.ReadFile(filepath.Join("..", "decode", "testdata", "media", "image420.jpg"))
	if err != nil {
		t.Fatal(err)
	}
	dir, empty := t.TempDir(), t.TempDir()
	writeTestFile(t, filepath.Join(dir, "b.tar"), tarOf(t, map[string][]byte{"x.jpg": jpg}, "x.jpg"))
	writeTestFile(t, filepath.Join(dir, "a.tar"), tarOf(t, map[string][]byte{"y.jpg": jpg, "z.jpg": jpg}, "y.jpg", "z.jpg"))
	pics := t.TempDir()
	writeTestFile(t, filepath.Join(pics, "p.jpg"), jpg)
	writeTestFile(t, filepath.Join(pics, "q.jpg"), jpg)

	code, stdout, stderr := runMain("decode", "--cache", t.TempDir(), dir)
	var keys []string
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		keys = append(keys, strings.Split(line, "\t")[0])
	}
	if code != 0 || strings.Join(keys, " ") != "y z x" {
		t.Errorf("decode DIR: exit %d, keys %q, stderr %q; want exit 0 and y z x (a.tar, then b.tar)", code, keys, stderr)
	}

	code, stdout, stderr = runMain("decode", "--md5", filepath.Join(pics, "*.jpg"))
	want := filepath.Join(pics, "p.jpg") + "\t"
	if code != 0 || strings.Count(stdout, "\n") != 2 || !strings.HasPrefix(stdout, want) {
		t.Errorf("decode --md5 GLOB: exit %d, stdout %q, stderr %q; want 2 lines, the first starting %q", code, stdout, stderr, want)
	}

	cache := t.TempDir()
	tr := clitest.NewTranscript(empty, "EMPTY", dir, "DIR", cache, "CACHE").Replace(`\t[0-9.]+ ms\n`, "\tT ms\n")
	if code, _, _ := tr.Run(runMain, "decode", "--cache", cache, empty, filepath.Join(dir, "a.tar")); code != 1 {
		t.Errorf("decode EMPTYDIR SHARD: exit %d, want 1", code)
	}
	clitest.Golden(t, "decode_empty_dir.golden", tr.String())
}
