package decoding

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/datahelix/datahelix/internal/mp4"
	"github.com/datahelix/datahelix/internal/video/videotest"
)

// TestRefusedCodecNamed checks refused/mpeg2_mp4v.mp4 (make_tracks.sh),
// MPEG-2 video in an mp4v sample entry: its record names the codec as
// ffprobe does (it said mpeg4), and decoding it is refused with
// ErrUnsupported, naming the member and the codec.
func TestRefusedCodecNamed(t *testing.T) {
	const name = "refused/mpeg2_mp4v.mp4"
	data := videotest.Read(t, name)
	v, err := mp4.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if v.Codec != "mpeg2video" {
		t.Errorf("codec %s, want mpeg2video", v.Codec)
	}
	videotest.Compare(t, name, "v:0", v)
	s := decSample("clip", map[string][]byte{"mp4": data})
	_, err = NewDecoder(Options{Frames: 4, Size: 16}).Decode(context.Background(), s, nil)
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "clip.mp4") || !strings.Contains(err.Error(), "codec mpeg2video") {
		t.Errorf("Decode: %v; want ErrUnsupported naming clip.mp4 and codec mpeg2video", err)
	}
	if _, err := frameMD5s(context.Background(), data, Limits{}); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "codec mpeg2video") {
		t.Errorf("FrameMD5s: %v; want ErrUnsupported naming codec mpeg2video", err)
	}
}
