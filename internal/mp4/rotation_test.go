package mp4

import (
	"bytes"
	"context"
	"encoding/binary"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/datahelix/datahelix/internal/av"
	"github.com/datahelix/datahelix/internal/video/videotest"
)

// TestMP4Rotation checks Parse's Rotation and Turn against FFmpeg's on
// rot90_420.mp4 with its tkhd matrix rewritten, mirrored ones included,
// and with an mvhd matrix that FFmpeg multiplies in: the turn against
// av.StreamInfo.Rotation, the rotation against ffprobe's side data on
// the same rewritten files (FFmpeg 5.1; none for "movie turns back",
// whose product is the identity, and a NaN printed as an integer for
// "degenerate").
func TestMP4Rotation(t *testing.T) {
	const one = 0x10000 // 1.0 in the matrix's 16.16 fixed point
	orig := videotest.Read(t, "rot90_420.mp4")
	matrix := func(data []byte, typ string, off int, abcd [4]int32) {
		i := bytes.Index(data, []byte(typ))
		if i < 0 || data[i+4] != 0 {
			t.Fatalf("rot90_420.mp4: no version 0 %s box", typ)
		}
		for k, at := range []int{0, 4, 12, 16} { // a, b, c, d
			binary.BigEndian.PutUint32(data[i+8+off+at:], uint32(abcd[k]))
		}
	}
	for _, tc := range []struct {
		name       string
		tkhd, mvhd [4]int32
		ccw, turn  int // ffprobe's rotation, FFmpeg's clockwise turn
	}{
		{"as made", [4]int32{0, -one, one, 0}, [4]int32{one, 0, 0, one}, 90, 270},
		{"identity", [4]int32{one, 0, 0, one}, [4]int32{one, 0, 0, one}, 0, 0},
		{"clockwise", [4]int32{0, one, -one, 0}, [4]int32{one, 0, 0, one}, -90, 90},
		{"hflip", [4]int32{-one, 0, 0, one}, [4]int32{one, 0, 0, one}, -180, 180},
		{"vflip", [4]int32{one, 0, 0, -one}, [4]int32{one, 0, 0, one}, 0, 0},
		{"cclock_flip", [4]int32{0, one, one, 0}, [4]int32{one, 0, 0, one}, -90, 90},
		{"movie turns back", [4]int32{0, -one, one, 0}, [4]int32{0, one, -one, 0}, 0, 0},
		{"movie turns too", [4]int32{0, -one, one, 0}, [4]int32{0, -one, one, 0}, -180, 180},
		{"45 degrees", [4]int32{46341, -46341, 46341, 46341}, [4]int32{one, 0, 0, one}, 45, 0},
		{"degenerate", [4]int32{0, 0, 0, 0}, [4]int32{one, 0, 0, one}, 0, 0},
	} {
		data := bytes.Clone(orig)
		matrix(data, "tkhd", 36, tc.tkhd)
		matrix(data, "mvhd", 32, tc.mvhd)
		v, err := Parse(data)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		ccw, turn := int(v.Rotation), v.Turn()
		_, info, err := av.Packets(context.Background(), data, av.DefaultConfig())
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if ccw != tc.ccw || turn != tc.turn || turn != info.Rotation {
			t.Errorf("%s: rotation %d, turn %d; want %d, %d (FFmpeg turns it by %d)", tc.name, ccw, turn, tc.ccw, tc.turn, info.Rotation)
		}
	}
	// A tkhd too short to hold a matrix, and no mvhd: none.
	v, err := Parse(box("moov", trak(1, 10, 2, nil, videoEntry("avc1", 16, 16), fbox("stts", 0, 0, u32s(1, 2, 1)), fbox("stsz", 0, 0, u32s(5, 2)))))
	if err != nil || v.Rotation != 0 || v.Turn() != 0 {
		t.Errorf("no matrix: rotation %v, turn %d, err %v; want none", v.Rotation, v.Turn(), err)
	}
}

// TestMP4RotationMatchesAV checks, on every MP4/MOV clip of
// testdata/video, that the turn Parse reads (VideoInfo.Turn) is the
// one package av reads from FFmpeg's display matrix side data
// (StreamInfo.Rotation).
func TestMP4RotationMatchesAV(t *testing.T) {
	dir := filepath.Join(videoDir)
	cfg := av.DefaultConfig()
	cfg.Codecs += ",rawvideo,mpeg2video" // refused/rot180_uyvy.mov, refused/mpeg2_mp4v.mp4
	n := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(p) != ".mp4" && filepath.Ext(p) != ".mov" {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		v, err := Parse(data)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			return nil
		}
		_, info, err := av.Packets(context.Background(), data, cfg)
		if err != nil {
			t.Errorf("%s: av: %v", p, err)
			return nil
		}
		n++
		if v.Turn() != info.Rotation {
			t.Errorf("%s: rotation %v, turn %d; FFmpeg turns it by %d", p, v.Rotation, v.Turn(), info.Rotation)
		}
		return nil
	})
	if err != nil || n < 20 {
		t.Fatalf("walked %d clips of %s: %v", n, dir, err)
	}
}
