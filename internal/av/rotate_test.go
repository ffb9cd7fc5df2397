package av

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// videoDir holds the clips with a display matrix, made by make_rotate.sh.
const videoDir = "../../decode/testdata/video"

func readVideo(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(videoDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// rotatedMD5s are the md5 columns of
//
//	ffmpeg -threads 1 -i CLIP -map 0:v -f framemd5 -
//
// (FFmpeg 5.1, which autorotates by default) for the clips of
// ../../decode/testdata/video/make_rotate.sh, hard-coded so that the test runs
// without the ffmpeg CLI. With -noautorotate every one differs.
var rotatedMD5s = []struct {
	clip          string
	rotation      int // StreamInfo.Rotation
	width, height int // of the upright frames
	md5s          []string
}{
	{"rot90_420.mp4", 270, 48, 64, []string{ // transpose=cclock, yuv420p
		"49171f7f99e33d8a99b34c1bb90c4139", "0017b5922400cff25667918842a9ede1", "3d010acfe3ccc810d615c7cb8b4cabe0",
		"512275fb043c1e808e2e1ec3d9d1cd12", "eff20f5c0f5213b65665caeb32e8826d", "ef493f4de06cb61e0f4aec389ad6cd8f",
		"86784a61ecfdaf8e02e7693248b8e122", "76cf8d2278ebd6270e5a7ad0a26521f1", "d5f4c5b81650c8742ae72864ee6df4b2",
		"b4b162e094dc54442cdfbd36ef984c3e",
	}},
	{"rot90_j420.mp4", 270, 48, 64, []string{ // transpose=cclock, yuvj420p
		"03bec7550fdb00880eebe7d2dba984a4", "154d5a049075fc29e9eb60a5ba7b25aa", "dd254de612444ec305bf71cd8bf06f25",
		"3c7e177ea7c17e375e7bceb2d9b9e303", "88735de7099fe930f13842226ce89f1c", "5871244fdc85aefb09942dfff12c59b1",
		"7a27a00c0232acc9667b3822178b7752", "af7ea582f1845790d5c646cb0d5d2e8d", "d274660a2af329c6020396a3750ae570",
		"7a27a00c0232acc9667b3822178b7752",
	}},
	{"rot270_420p10.mp4", 90, 48, 64, []string{ // transpose=clock, yuv420p10le
		"f396bc326327d8bee55dab3e6da30b9f", "cb1ccb5b83d07465ee9b29c2dcab1724", "430f7fc56898b08af6614eedf0a0e90d",
		"11d3bb7892f53519427af3b9e4d53eaa", "0a0d9bad235927766a36cafdf8e74e95", "3fdd30c750e9efad1c8217e147ab5660",
		"d27b2f5a4bf37cd25021e97356375a4a", "78c67d122e66bafc50664274597fc48e", "80fbfed4a5130ad581800ce86b54a413",
		"3d2f4e858045af5142b92281e1505dc0",
	}},
	{"rot180_444.mp4", 180, 64, 48, []string{ // hflip,vflip, yuv444p
		"86c4f64ffd6b094bb4769f7867ac1eaf", "556ead76dec669efc6b9466991952cc8", "649127eea199fba4b2a6f5ebfc917d0b",
		"59169b2e36717a8a8a587a7b4e9a4f1a", "442f83dc38bd3ecc84aa671f52949e28", "c7c7e9a722699c8a68cbda19db68c0c5",
		"c385ddd55ca11308f0f60e3cf989be57", "589ed9d804e4a5d75577ee357a81a28b", "73215263cc248913c6f398eecc59ed50",
		"bf3d1573b8c6da52787cea4e6efc5f52",
	}},
}

func TestFrameMD5sTurnUpright(t *testing.T) {
	for _, tc := range rotatedMD5s {
		t.Run(tc.clip, func(t *testing.T) {
			got, st, err := FrameMD5s(context.Background(), readVideo(t, tc.clip), DefaultConfig())
			if err != nil {
				t.Fatal(err)
			}
			if st.Rotation != tc.rotation {
				t.Errorf("got Rotation %d, want %d", st.Rotation, tc.rotation)
			}
			if len(got) != len(tc.md5s) {
				t.Fatalf("got %d frames, want %d", len(got), len(tc.md5s))
			}
			for i, h := range got {
				if s := hex.EncodeToString(h.MD5[:]); s != tc.md5s[i] {
					t.Errorf("frame %d: got md5 %s, want %s (ffmpeg, autorotated)", i, s, tc.md5s[i])
				}
				if h.Width != tc.width || h.Height != tc.height {
					t.Errorf("frame %d: got %dx%d, want %dx%d", i, h.Width, h.Height, tc.width, tc.height)
				}
			}
		})
	}
}

// The ffmpeg CLI converts yuv422p to yuv444p (swscale, bicubic) before it
// transposes it, which FrameMD5s does not reproduce: it refuses.
// TestFrameMD5sRefusePackedTurn: a packed format whose pixel is smaller
// than its largest step (uyvy422: 4 bytes per 2 pixels) is refused when
// turned, not read past its rows (codecs widened to rawvideo).
func TestFrameMD5sRefusePackedTurn(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Codecs = DefaultCodecs + ",rawvideo"
	_, _, err := FrameMD5s(context.Background(), readVideo(t, "refused/rot180_uyvy.mov"), cfg)
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "cannot turn pixel format uyvy422") {
		t.Fatalf("got %v, want ErrUnsupported naming uyvy422", err)
	}
}

func TestFrameMD5sRefuseTransposedYUV422(t *testing.T) {
	_, _, err := FrameMD5s(context.Background(), readVideo(t, "rot90_422.mp4"), DefaultConfig())
	if !errors.Is(err, ErrUnsupported) {
		t.Fatalf("got %v, want ErrUnsupported", err)
	}
	// DecodeAll hashes nothing, so it decodes the clip.
	if st, err := DecodeAll(context.Background(), readVideo(t, "rot90_422.mp4"), DefaultConfig()); err != nil || st.FramesDecoded != 10 || st.Rotation != 270 {
		t.Errorf("DecodeAll: got %d frames, rotation %d, err %v; want 10, 270, nil", st.FramesDecoded, st.Rotation, err)
	}
}

func TestRotationOfUnturnedClips(t *testing.T) {
	for _, c := range clips {
		_, info, err := Packets(context.Background(), readMedia(t, c), DefaultConfig())
		if err != nil || info.Rotation != 0 {
			t.Errorf("%s: got Rotation %d, err %v; want 0", c, info.Rotation, err)
		}
	}
}

// The upright*.mp4 clips store a picture with red, green, blue and white
// quadrants (clockwise from the top left) turned the other way from what
// their display matrix says, as a phone stores a portrait video: upright,
// the red quadrant is at the top left. DecodeTargets must write that
// upright picture, at a square size and at one wider than high (which
// makes the scaled size before the turn differ from the output's).
func TestDecodeTargetsUpright(t *testing.T) {
	type rgb [3]byte
	near := func(a, b rgb) bool {
		for i := range a {
			if d := int(a[i]) - int(b[i]); d < -40 || d > 40 {
				return false
			}
		}
		return true
	}
	red, green, blue, white := rgb{255, 0, 0}, rgb{0, 255, 0}, rgb{0, 0, 255}, rgb{255, 255, 255}
	for _, clip := range []string{"upright90.mp4", "upright180.mp4", "upright270.mp4"} {
		for _, size := range [][2]int{{32, 32}, {40, 24}} {
			w, h := size[0], size[1]
			cfg := DefaultConfig()
			cfg.Width, cfg.Height = w, h
			dst := make([]byte, w*h*3)
			st, err := DecodeTargets(context.Background(), readVideo(t, clip), cfg, Rational{}, []Target{{PTS: 0}}, dst)
			if err != nil {
				t.Fatalf("%s: %v", clip, err)
			}
			at := func(x, y int) rgb {
				i := (y*w + x) * 3
				return rgb{dst[i], dst[i+1], dst[i+2]}
			}
			for _, q := range []struct {
				x, y int
				want rgb
				name string
			}{
				{w / 4, h / 4, red, "top left"}, {3 * w / 4, h / 4, green, "top right"},
				{w / 4, 3 * h / 4, blue, "bottom left"}, {3 * w / 4, 3 * h / 4, white, "bottom right"},
			} {
				if got := at(q.x, q.y); !near(got, q.want) {
					t.Errorf("%s at %dx%d (rotation %d): %s is %v, want %v", clip, w, h, st.Rotation, q.name, got, q.want)
				}
			}
		}
	}
}

// FuzzFrameMD5sTurned feeds mutated clips with display matrices to
// FrameMD5s, which turns every frame before hashing it: any outcome but a
// typed error or success fails.
func FuzzFrameMD5sTurned(f *testing.F) {
	for _, tc := range rotatedMD5s {
		f.Add(readVideo(f, tc.clip))
	}
	f.Add(readVideo(f, "rot90_422.mp4"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg := fuzzConfig()
		if _, _, err := FrameMD5s(context.Background(), data, cfg); !typed(err) {
			t.Fatalf("FrameMD5s: untyped error %v", err)
		}
	})
}

// TestFrameMD5sUndoMirrors rewrites the tkhd matrix of rot90_420.mp4 to
// mirrored ones (negative determinant), which the ffmpeg 5.1 CLI undoes
// with hflip, vflip, transpose=cclock_flip and transpose=clock_flip. The
// hashes are the first three of `ffmpeg -threads 1 -i F -map 0:v -f
// framemd5 -` on the clip rewritten the same way (FFmpeg 5.1).
func TestFrameMD5sUndoMirrors(t *testing.T) {
	const one = 0x10000 // 1.0 in the matrix's 16.16 fixed point
	orig := readVideo(t, "rot90_420.mp4")
	i := bytes.Index(orig, []byte("tkhd"))
	if i < 0 || orig[i+4] != 0 {
		t.Fatal("rot90_420.mp4: no version 0 tkhd box")
	}
	at := i + 4 + 4 + 20 + 8 + 8 // version, flags, times, track, duration; reserved, layer, group, volume
	for _, tc := range []struct {
		name   string
		abcd   [4]int32 // the matrix's a, b, c, d (u, v, x, y, w kept)
		w, h   int
		md5s   []string
		rotate int
	}{
		{"hflip", [4]int32{-one, 0, 0, one}, 64, 48, []string{"bb7a678eea767578033bace9af2c4a5a", "1fb6957657d0fc3f8d70cbe6ce47f248", "e3ffb59eb65c85fa3e740715f1f1049e"}, 180},
		{"vflip", [4]int32{one, 0, 0, -one}, 64, 48, []string{"353cc4ce8cde24bfb34f9c7be4f24dda", "0050e2fefd59adb6d0edcc9e1e865cc4", "9ef1e1d8888e4e78d5becb2acab6b2cb"}, 0},
		{"cclock_flip", [4]int32{0, one, one, 0}, 48, 64, []string{"5c7e69e68bfa913d176761ac4cff3051", "a77780e56c9ddc91eeb796573be4e59c", "9ab637866d1e7062ac0ac34842f649cd"}, 90},
		{"clock_flip", [4]int32{0, -one, -one, 0}, 48, 64, []string{"8ade521000d3c44e9da6a5a064204c3c", "5a8c604b0042064bd74e9330a6810d30", "791b8822fb9c2031138dc06e2dadf603"}, 270},
	} {
		data := bytes.Clone(orig)
		for k, off := range []int{0, 4, 12, 16} { // a, b, c, d
			binary.BigEndian.PutUint32(data[at+off:], uint32(tc.abcd[k]))
		}
		got, st, err := FrameMD5s(context.Background(), data, DefaultConfig())
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if st.Rotation != tc.rotate || len(got) < len(tc.md5s) {
			t.Fatalf("%s: got Rotation %d and %d frames, want %d and 10", tc.name, st.Rotation, len(got), tc.rotate)
		}
		for k, want := range tc.md5s {
			if s := hex.EncodeToString(got[k].MD5[:]); s != want || got[k].Width != tc.w || got[k].Height != tc.h {
				t.Errorf("%s frame %d: got %s %dx%d, want %s %dx%d", tc.name, k, s, got[k].Width, got[k].Height, want, tc.w, tc.h)
			}
		}
	}
}
