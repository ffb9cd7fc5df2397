package datacmd

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/internal/cli/clitest"
	"github.com/datahelix/datahelix/internal/gen/gentest"
	"github.com/datahelix/datahelix/internal/tartest"
)

// TestInspectFailsBeforeTable checks that a missing path or a truncated
// shard fails without printing the table's header first.
func TestInspectFailsBeforeTable(t *testing.T) {
	data := gentest.Tiny(t)
	shards, _ := filepath.Glob(filepath.Join(data, "*.tar"))
	raw, err := os.ReadFile(shards[0])
	if err != nil {
		t.Fatal(err)
	}
	trunc := filepath.Join(t.TempDir(), "cut.tar")
	if err := os.WriteFile(trunc, raw[:len(raw)/3], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := commandErr(t, "inspect", "--cache", t.TempDir(), "/nonexistent/shards"); !errors.Is(err, decode.ErrNoShards) {
		t.Errorf("inspect of a missing path: %v, want decode.ErrNoShards", err)
	}
	var se *decode.ShardError
	if err := commandErr(t, "inspect", "--cache", t.TempDir(), trunc); !errors.As(err, &se) || se.Path != trunc || !errors.Is(err, decode.ErrCorruptShard) {
		t.Errorf("inspect of a truncated shard: %v, want a decode.ShardError of %s, corrupt", err, trunc)
	}
	for _, path := range []string{"/nonexistent/shards", trunc} {
		if code, stdout, stderr := runMain("inspect", "--cache", t.TempDir(), path); code != 1 || stdout != "" {
			t.Errorf("inspect %s: got exit %d, stdout %q, stderr %q; want exit 1 and no output", path, code, stdout, stderr)
		}
	}
	code, stdout, _ := runMain("inspect", "--cache", t.TempDir(), shards[0])
	if code != 0 || !strings.HasPrefix(stdout, "key") {
		t.Errorf("inspect %s: got exit %d, stdout %q; want the table", shards[0], code, stdout)
	}
}

// TestInspectShapeBounds checks that inspect bounds --frames and --size
// as run does: an estimate for a shape run refuses would mislead. Each
// is a usage error naming the flag and its bounds
// (testdata/inspect_shape_bounds.golden).
func TestInspectShapeBounds(t *testing.T) {
	tr := clitest.NewTranscript()
	for _, args := range [][]string{{"--frames", "100000"}, {"--size", "99999999"}, {"--size", "4"}} {
		args = append(append([]string{"inspect"}, args...), "x.tar")
		tr.Add(args, usageLine(t, args...))
	}
	clitest.Golden(t, "inspect_shape_bounds.golden", tr.String())
}

// TestInspectShownFramesAndRotation checks what inspect says of a clip an
// edit list cuts (h264_sscut.mp4: ffprobe -count_frames counts 37 frames,
// FFmpeg decoding 13 more it never shows) and of one a display matrix
// turns (rot90_420.mp4: stored 64x48, ffprobe's side data rotation=90,
// shown 48x64): the table gives the frames shown and the hidden ones, and
// the displayed size with the turn; --json keeps its fields and adds
// frames_shown, rotation and the displayed size.
func TestInspectShownFramesAndRotation(t *testing.T) {
	video := filepath.Join("..", "..", "decode", "testdata", "video")
	var members []tartest.File
	for _, name := range []string{"h264_sscut.mp4", "rot90_420.mp4"} {
		data, err := os.ReadFile(filepath.Join(video, name))
		if err != nil {
			t.Fatal(err)
		}
		members = append(members, tartest.File{Name: name, Data: string(data)})
	}
	shard := tartest.WriteFile(t, t.TempDir(), "v.tar", tartest.Write(t, tar.FormatUnknown, members))
	code, stdout, stderr := runMain("inspect", "--cache", t.TempDir(), shard)
	rows := map[string][]string{}
	for _, line := range strings.Split(stdout, "\n") {
		f := strings.Split(line, "  ") // tabwriter pads cells with 2 spaces at least
		var cells []string
		for _, c := range f {
			if c = strings.TrimSpace(c); c != "" {
				cells = append(cells, c)
			}
		}
		if len(cells) > 0 {
			rows[cells[0]] = cells
		}
	}
	if h := rows["key"]; code != 0 || len(h) != 12 || h[6] != "frames" || h[11] != "display" {
		t.Fatalf("exit %d, header %q, stderr %q; want exit 0 and 12 columns, frames 7th, display last", code, h, stderr)
	}
	if r := rows["h264_sscut"]; len(r) != 11 || r[4] != "128" || r[5] != "96" || r[6] != "37 (+13 hidden)" || r[7] != "1.500" {
		t.Errorf("h264_sscut: row %q; want 128x96, 37 (+13 hidden) frames, 1.500 s, no display cell", r)
	}
	if r := rows["rot90_420"]; len(r) != 12 || r[4] != "64" || r[5] != "48" || r[6] != "10" || r[11] != "48x64 (rotated 90° counterclockwise)" {
		t.Errorf("rot90_420: row %q; want 64x48 stored, 10 frames, shown 48x64 rotated 90° counterclockwise", r)
	}

	code, stdout, stderr = runMain("inspect", "--json", "--cache", t.TempDir(), shard)
	if code != 0 {
		t.Fatalf("--json: exit %d: %s", code, stderr)
	}
	want := map[string]map[string]any{
		"h264_sscut": {"width": 128.0, "height": 96.0, "frames": 50.0, "frames_shown": 37.0, "duration_s": 1.5, "rotation": nil,
			"display_width": 128.0, "display_height": 96.0},
		"rot90_420": {"width": 64.0, "height": 48.0, "frames": 10.0, "frames_shown": 10.0, "duration_s": 0.4, "rotation": 90.0,
			"display_width": 48.0, "display_height": 64.0},
	}
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var got map[string]any
		if err := json.Unmarshal([]byte(line), &got); err != nil {
			t.Fatalf("--json line %q: %v", line, err)
		}
		key, _ := got["key"].(string)
		w, ok := want[key]
		if !ok {
			t.Fatalf("--json: key %q", key)
		}
		delete(want, key)
		for k, v := range w {
			if got[k] != v {
				t.Errorf("--json %s: %s = %v, want %v", key, k, got[k], v)
			}
		}
		for _, k := range []string{"shard", "modality", "bytes", "codec", "keyframes", "tokens", "est_cost_us", "model"} {
			if _, ok := got[k]; !ok {
				t.Errorf("--json %s: no %s field", key, k)
			}
		}
	}
	if len(want) != 0 {
		t.Errorf("--json: no line for %v", want)
	}
}

// firstWriteCancels counts the lines written to it and cancels its
// context at the first write.
type firstWriteCancels struct {
	lines  int
	cancel context.CancelFunc
}

func (w *firstWriteCancels) Write(p []byte) (int, error) {
	w.cancel()
	w.lines += strings.Count(string(p), "\n")
	return len(p), nil
}

// TestInspectTableStreams checks that inspect's table is printed as the
// samples are read, a block of inspectBlock rows at a time, not held to
// the end: a dataset of millions of samples would otherwise fill memory
// before the first row appears. The output cancels the walk when it
// receives its first bytes, which the old inspect wrote after the last
// sample.
func TestInspectTableStreams(t *testing.T) {
	const n = 2*inspectBlock + 500
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for i := range n {
		body := fmt.Sprintf("caption %d", i)
		if err := tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("%06d.txt", i), Mode: 0o644, Size: int64(len(body))}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(body))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	shard := filepath.Join(t.TempDir(), "text.tar")
	if err := os.WriteFile(shard, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	var all strings.Builder
	if err := runInspect(context.Background(), &all, io.Discard, []string{"--cache", cache, shard}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(all.String(), "\n"); got != n+1 {
		t.Fatalf("inspect printed %d lines, want %d rows and the header", got, n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &firstWriteCancels{cancel: cancel}
	err := runInspect(ctx, out, io.Discard, []string{"--cache", cache, shard})
	if !errors.Is(err, context.Canceled) || out.lines > inspectBlock+2 {
		t.Errorf("inspect cancelled at its first output: %d lines, err %v; want at most %d (one block), context.Canceled",
			out.lines, err, inspectBlock+2)
	}
}
