package decoding

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	_ "image/jpeg"
	_ "image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "golang.org/x/image/webp"
)

var imageFiles = []string{"y420.jpg", "y422.jpg", "y444.jpg", "y440.jpg", "y411.jpg", "gray.jpg", "prog420.jpg",
	"rgb.png", "gray_odd.png", "lossy.webp", "lossless.webp", "alpha.webp"}

func readImage(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testdata, "image", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestParseImageHeader(t *testing.T) {
	tests := []struct {
		file string
		want ImageInfo
	}{
		{"y420.jpg", ImageInfo{Format: "jpeg", Width: 96, Height: 64, Subsampling: "420"}},
		{"y422.jpg", ImageInfo{Format: "jpeg", Width: 96, Height: 64, Subsampling: "422"}},
		{"y444.jpg", ImageInfo{Format: "jpeg", Width: 96, Height: 64, Subsampling: "444"}},
		{"y440.jpg", ImageInfo{Format: "jpeg", Width: 96, Height: 64, Subsampling: "440"}},
		{"y411.jpg", ImageInfo{Format: "jpeg", Width: 96, Height: 64, Subsampling: "411"}},
		{"gray.jpg", ImageInfo{Format: "jpeg", Width: 96, Height: 64, Subsampling: "gray"}},
		{"prog420.jpg", ImageInfo{Format: "jpeg", Width: 96, Height: 64, Subsampling: "420", Progressive: true}},
		{"rgb.png", ImageInfo{Format: "png", Width: 96, Height: 64}},
		{"gray_odd.png", ImageInfo{Format: "png", Width: 97, Height: 65}},
		{"lossy.webp", ImageInfo{Format: "webp", Width: 96, Height: 64}},
		{"lossless.webp", ImageInfo{Format: "webp", Width: 96, Height: 64}},
		{"alpha.webp", ImageInfo{Format: "webp", Width: 96, Height: 64}},
	}
	for _, tt := range tests {
		data := readImage(t, tt.file)
		tt.want.Bytes = len(data)
		got, err := parseImageHeader(data)
		if err != nil || got != tt.want {
			t.Errorf("%s: got %+v, %v; want %+v", tt.file, got, err, tt.want)
		}
	}
}

// TestParseImageHeaderOtherFormats checks that an image of a format
// datahelix does not read, whatever its member is named, is refused as
// unsupported and named, not called a damaged JPEG, PNG or WebP.
func TestParseImageHeaderOtherFormats(t *testing.T) {
	bmp := append([]byte("BM\x20\x00\x00\x00"), make([]byte, 26)...)
	tests := []struct {
		data   string
		format string
	}{
		{"GIF89a\x01\x00\x01\x00\x80\x00\x00", "GIF"},
		{"GIF87a\x01\x00\x01\x00", "GIF"},
		{"II*\x00\x08\x00\x00\x00", "TIFF"},
		{"MM\x00*\x00\x00\x00\x08", "TIFF"},
		{string(bmp), "BMP"},
		{"\x00\x00\x00\x1cftypavif\x00\x00\x00\x00avifmif1miaf", "AVIF"},
		{"\x00\x00\x00\x18ftypheic\x00\x00\x00\x00mif1heic", "HEIF"},
		{"\xff\x0a\xfa\x7f", "JPEG XL"},
		{"\x00\x00\x00\x0cjP  \r\n\x87\n\x00\x00\x00\x14ftypjp2 ", "JPEG 2000"},
	}
	for _, tt := range tests {
		_, err := parseImageHeader([]byte(tt.data))
		if !errors.Is(err, ErrUnsupported) || errors.Is(err, ErrBadImage) || !strings.Contains(fmt.Sprint(err), "a "+tt.format+" image") {
			t.Errorf("%s: got %v; want ErrUnsupported naming it", tt.format, err)
		}
	}
	// testdata/image/anim.webp, five frames written by
	// ffmpeg -f lavfi -i testsrc=size=64x48:rate=5 -t 1 -c:v libwebp_anim,
	// decodes neither with x/image/webp nor with FFmpeg 5.1: it is refused
	// as unsupported, not taken for a damaged still image.
	if _, err := parseImageHeader(readImage(t, "anim.webp")); !errors.Is(err, ErrUnsupported) || !strings.Contains(fmt.Sprint(err), "animated WebP") {
		t.Errorf("animated WebP: got %v; want ErrUnsupported naming it", err)
	}
	// A BMP header whose size field is not the file's is not taken for one.
	if _, err := parseImageHeader(bmp[:20]); !errors.Is(err, ErrBadImage) {
		t.Errorf("short BMP-like bytes: got %v; want ErrBadImage", err)
	}
}

func TestParseImageHeaderMalformed(t *testing.T) {
	jpg := readImage(t, "y420.jpg")
	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"text", []byte("hello world, not an image")},
		{"jpeg soi only", []byte{0xFF, 0xD8, 0xFF}},
		{"jpeg cut in header", jpg[:40]},
		{"jpeg scan before frame", []byte{0xFF, 0xD8, 0xFF, 0xDA, 0x00, 0x02}},
		{"jpeg segment too long", []byte{0xFF, 0xD8, 0xFF, 0xE0, 0xFF, 0xFF, 0x00}},
		{"jpeg zero height", []byte{0xFF, 0xD8, 0xFF, 0xC0, 0x00, 0x0B, 8, 0, 0, 0, 16, 1, 1, 0x11, 0}},
		{"png without IHDR", []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIDAT0000000000000000000")},
		{"png huge", append([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR\x7f\xff\xff\xff\x00\x00\x00\x10"), make([]byte, 10)...)},
		{"webp short", []byte("RIFF\x00\x00\x00\x00WEBPVP8 ")},
		{"webp unknown chunk", append([]byte("RIFF\x00\x00\x00\x00WEBPABCD"), make([]byte, 20)...)},
	}
	for _, tt := range tests {
		if info, err := parseImageHeader(tt.data); !errors.Is(err, ErrBadImage) {
			t.Errorf("%s: got %+v, %v; want ErrBadImage", tt.name, info, err)
		}
	}
}

// FuzzParseImageHeader feeds mutated real JPEG, PNG and WebP files to the
// header parser; when both it and the standard library's DecodeConfig
// accept an input, the dimensions must agree.
func FuzzParseImageHeader(f *testing.F) {
	for _, name := range append(imageFiles, "anim.webp") {
		f.Add(readImage(f, name))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		info, err := parseImageHeader(data)
		if err != nil {
			if !errors.Is(err, ErrBadImage) && !errors.Is(err, ErrUnsupported) {
				t.Fatalf("error %v wraps neither ErrBadImage nor ErrUnsupported", err)
			}
			return
		}
		if info.Width <= 0 || info.Height <= 0 || info.Bytes != len(data) {
			t.Fatalf("accepted %+v", info)
		}
		if cfg, format, err := image.DecodeConfig(bytes.NewReader(data)); err == nil && format == info.Format &&
			(cfg.Width != info.Width || cfg.Height != info.Height) {
			t.Fatalf("%s: %dx%d, image.DecodeConfig says %dx%d", format, info.Width, info.Height, cfg.Width, cfg.Height)
		}
	})
}
