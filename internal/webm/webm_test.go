package webm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/datahelix/datahelix/internal/video"
	"github.com/datahelix/datahelix/internal/video/videotest"
)

func TestParseWebMMatchesFFprobe(t *testing.T) {
	tests := []struct {
		file, container, codec string
	}{
		{"vp9.webm", "webm", "vp9"},
		{"vp8.webm", "webm", "vp8"},
		{"h264.mkv", "matroska", "h264"}, // B-frames: pts out of decode order
		{"av1.mkv", "matroska", "av1"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			v, err := Parse(videotest.Read(t, tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if v.Container != tt.container || v.Codec != tt.codec || v.Frames != 50 || v.Duration != 2000 || v.FrameCountEstimated {
				t.Errorf("got %s %s %d frames, duration %d, estimated %v; want %s %s 50 frames, duration 2000",
					v.Container, v.Codec, v.Frames, v.Duration, v.FrameCountEstimated, tt.container, tt.codec)
			}
			videotest.Compare(t, tt.file, "v:0", v)
		})
	}
}

// Helpers building EBML elements for hand-made files.

func ebmlID(id uint32) []byte {
	b := binary.BigEndian.AppendUint32(nil, id)
	for len(b) > 1 && b[0] == 0 {
		b = b[1:]
	}
	return b
}

func el(id uint32, parts ...[]byte) []byte {
	body := bytes.Join(parts, nil)
	size := binary.BigEndian.AppendUint64(nil, uint64(len(body)))
	size[0] = 0x01 // 8-byte size
	return append(append(ebmlID(id), size...), body...)
}

func elUnknown(id uint32, parts ...[]byte) []byte {
	return append(append(ebmlID(id), 0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff), bytes.Join(parts, nil)...)
}

func elUint(id uint32, v uint64) []byte { return el(id, binary.BigEndian.AppendUint64(nil, v)) }

func elFloat(id uint32, f float64) []byte {
	return el(id, binary.BigEndian.AppendUint64(nil, math.Float64bits(f)))
}

// simpleBlock returns a SimpleBlock on track 1 (or a Block when group).
func simpleBlock(id uint32, track byte, rel int16, flags byte, payload string) []byte {
	return el(id, []byte{0x80 | track}, binary.BigEndian.AppendUint16(nil, uint16(rel)), []byte{flags}, []byte(payload))
}

func mkvHeader(doc string, tcs, defaultDur uint64, duration float64) []byte {
	video := el(mkvTrackEntryID, elUint(mkvTrackNumberID, 1), elUint(mkvTrackTypeID, 1), el(mkvCodecID, []byte("V_VP9")),
		elUint(mkvDefaultDurID, defaultDur), el(mkvVideoID, elUint(mkvPixelWidthID, 320), elUint(mkvPixelHeightID, 180)))
	audio := el(mkvTrackEntryID, elUint(mkvTrackNumberID, 2), elUint(mkvTrackTypeID, 2), el(mkvCodecID, []byte("A_OPUS")))
	info := [][]byte{elUint(mkvTimecodeScale, tcs)}
	if duration > 0 {
		info = append(info, elFloat(mkvDurationID, duration))
	}
	return bytes.Join([][]byte{el(ebmlHeaderID, el(ebmlDocTypeID, []byte(doc))), el(mkvInfoID, info...), el(mkvTracksID, audio, video)}, nil)
}

func TestParseWebMSynthetic(t *testing.T) {
	head := mkvHeader("webm", 1000000, 40000000, 200)
	clusters := bytes.Join([][]byte{
		el(mkvClusterID, elUint(mkvClusterTimeID, 0),
			simpleBlock(mkvSimpleBlockID, 1, 0, 0x80, "key0"),
			simpleBlock(mkvSimpleBlockID, 2, 0, 0x80, "audio"),
			simpleBlock(mkvSimpleBlockID, 1, 40, 0x00, "p1")),
		// A cluster of unknown size ends at the next cluster.
		elUnknown(mkvClusterID, elUint(mkvClusterTimeID, 80),
			el(mkvBlockGroupID, simpleBlock(mkvBlockID, 1, 0, 0, "gkey"), elUint(mkvBlockDurationID, 40)),
			el(mkvBlockGroupID, simpleBlock(mkvBlockID, 1, 40, 0, "gref"), el(mkvReferenceBlock, []byte{0xd8}))),
		el(mkvClusterID, elUint(mkvClusterTimeID, 160),
			simpleBlock(mkvSimpleBlockID, 1, 0, 0x02, "\x01\x02ab12")), // Xiph-laced pair of 2-byte frames
	}, nil)
	v, err := Parse(append(append([]byte{}, head...), el(mkvSegmentID, clusters)...))
	if err == nil {
		t.Fatalf("clusters before Tracks parsed: %+v", v)
	}
	file := append(el(ebmlHeaderID, el(ebmlDocTypeID, []byte("webm"))), elUnknown(mkvSegmentID, head[len(el(ebmlHeaderID, el(ebmlDocTypeID, []byte("webm")))):], clusters)...)
	v, err = Parse(file)
	if err != nil {
		t.Fatal(err)
	}
	want := &video.Track{Container: "webm", Codec: "vp9", Width: 320, Height: 180, Timescale: 1000, Duration: 200, Frames: 6,
		FrameBytes: []uint32{4, 2, 4, 4, 2, 2}, FramePTS: []int64{0, 40, 80, 120, 160, 200}, Keyframes: []int{0, 2}, Bytes: 18}
	if !reflect.DeepEqual(v, want) {
		t.Errorf("got  %+v\nwant %+v", v, want)
	}

	// No clusters: the count is estimated from duration / default duration.
	hdrLen := len(el(ebmlHeaderID, el(ebmlDocTypeID, []byte("matroska"))))
	head2 := mkvHeader("matroska", 1000000, 33333333, 10000)
	v2, err := Parse(append(head2[:hdrLen:hdrLen], el(mkvSegmentID, head2[hdrLen:])...))
	if err != nil {
		t.Fatal(err)
	}
	if !v2.FrameCountEstimated || v2.Frames != 300 || v2.FramePTS != nil || v2.Container != "matroska" || !reflect.DeepEqual(v2.Keyframes, []int{0}) {
		t.Errorf("estimated clip: %+v", v2)
	}

	// A truncated last cluster is read as far as it goes.
	cut := file[:len(file)-3]
	if v3, err := Parse(cut); err != nil || v3.Frames != 4 {
		t.Errorf("truncated file: %v frames, err %v; want 4", v3, err)
	}
}

const mkvBlockDurationID = 0x9B

func TestParseWebMMalformed(t *testing.T) {
	hdr := el(ebmlHeaderID, el(ebmlDocTypeID, []byte("webm")))
	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"not ebml", []byte("RIFF1234WEBPVP8 ")},
		{"no segment", hdr},
		{"no video track", append(hdr[:len(hdr):len(hdr)], el(mkvSegmentID, el(mkvTracksID, el(mkvTrackEntryID, elUint(mkvTrackTypeID, 2))))...)},
		{"no frames, no duration", append(hdr[:len(hdr):len(hdr)], el(mkvSegmentID, mkvHeader("webm", 1000000, 0, 0)[len(hdr):])...)},
		{"huge timecode scale", append(hdr[:len(hdr):len(hdr)], el(mkvSegmentID, mkvHeader("webm", 1<<40, 1, 5)[len(hdr):])...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if v, err := Parse(tt.data); !errors.Is(err, ErrFormat) {
				t.Errorf("Parse = %+v, %v; want ErrFormat", v, err)
			}
		})
	}
}

func TestEBMLVint(t *testing.T) {
	tests := []struct {
		in   []byte
		v    uint64
		n    int
		ok   bool
		size int64
	}{
		{[]byte{0x81}, 1, 1, true, 1},
		{[]byte{0x40, 0x02}, 2, 2, true, 2},
		{[]byte{0x10, 0x00, 0x00, 0x05}, 5, 4, true, 5},
		{[]byte{0xff}, 127, 1, true, unknownSize},
		{[]byte{0x01, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, 1<<56 - 1, 8, true, unknownSize},
		{[]byte{0x00, 0x01}, 0, 0, false, 0},
		{[]byte{0x20, 0x01}, 0, 0, false, 0},
	}
	for _, tt := range tests {
		v, n, ok := ebmlVint(tt.in)
		if v != tt.v || n != tt.n || ok != tt.ok {
			t.Errorf("ebmlVint(% x) = %d, %d, %v; want %d, %d, %v", tt.in, v, n, ok, tt.v, tt.n, tt.ok)
		}
		if !ok {
			continue
		}
		if _, size, _, eok := ebmlElem(append([]byte{0xA3}, tt.in...)); !eok || size != tt.size {
			t.Errorf("ebmlElem size of % x = %d, %v; want %d", tt.in, size, eok, tt.size)
		}
	}
}

// FuzzParseWebM feeds mutated real WebM/Matroska files to the EBML reader:
// it must return a consistent VideoInfo or ErrFormat, never panic.
func FuzzParseWebM(f *testing.F) {
	for _, name := range []string{"vp9.webm", "vp8.webm", "h264.mkv", "av1.mkv", "vp9_rec.webm", "vp9_alpha.webm",
		"h264_lace_xiph.mkv", "h264_lace_ebml.mkv", "h264_lacegroup.mkv", "h264_headerstrip.mkv", "h264_2video.mkv",
		"vp9_codecdelay.webm", "damaged/vp9_badtrack.webm"} {
		data, err := os.ReadFile(filepath.Join(videotest.Dir, name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := Parse(data)
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error %v does not wrap ErrFormat", err)
			}
			return
		}
		if err := v.Check(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestParseWebMTruncatedNamesTheElement checks that a file cut inside an
// element of known size names that element, not just its raw ID.
func TestParseWebMTruncatedNamesTheElement(t *testing.T) {
	hdr := el(ebmlHeaderID, el(ebmlDocTypeID, []byte("webm")))
	head := mkvHeader("webm", 1000000, 40000000, 200)
	cluster := el(mkvClusterID, elUint(mkvClusterTimeID, 0), simpleBlock(mkvSimpleBlockID, 1, 0, 0x80, "key0"))
	file := append(hdr[:len(hdr):len(hdr)], el(mkvSegmentID, head[len(hdr):], cluster)...)
	_, err := Parse(file[:len(file)-3])
	if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "Cluster (0x1F43B675) of ") || !strings.Contains(err.Error(), "(truncated?)") {
		t.Errorf("Parse of a cut file: %v; want ErrFormat naming the Cluster, truncated", err)
	}
}

// TestMkvRotation checks the rotation read from a Projection against what
// ffprobe (FFmpeg 5.1) prints in the side data of a clip with that
// Projection (make_webm.sh's editor, videoel): truncated to an integer,
// absent (0) for the poses FFmpeg ignores.
func TestMkvRotation(t *testing.T) {
	tests := []struct {
		yaw, pitch, roll float64
		ffprobe          int
	}{
		{0, 0, 90, 90}, {0, 0, -90, -90}, {0, 0, 30, 29}, {0, 0, 180, -180}, {0, 0, 45, 45}, {0, 0, 44.4, 44},
		{180, 0, 90, -90}, {180, 0, 0, -180}, {-180, 0, 30, -150}, {0, 10, 90, 0}, {90, 0, 90, 0},
		{0, 0, -135.7, -135}, {0, 0, 270, -90}, {0, 0, 1e9, -80},
	}
	for _, tt := range tests {
		proj := el(mkvProjectionID, elUint(mkvProjTypeID, 0), elFloat(mkvProjYawID, tt.yaw), elFloat(mkvProjPitchID, tt.pitch),
			elFloat(mkvProjRollID, tt.roll))
		if got := mkvRotation(proj[len(ebmlID(mkvProjectionID))+8:]); int(got) != tt.ffprobe {
			t.Errorf("yaw %v pitch %v roll %v: rotation %v, ffprobe prints %d", tt.yaw, tt.pitch, tt.roll, got, tt.ffprobe)
		}
	}
	// Equirectangular: spherical data, no display matrix.
	proj := el(mkvProjectionID, elUint(mkvProjTypeID, 1), elFloat(mkvProjRollID, 90))
	if got := mkvRotation(proj[len(ebmlID(mkvProjectionID))+8:]); got != 0 {
		t.Errorf("equirectangular projection: rotation %v, want 0", got)
	}
}

// TestParseWebMBlockBeforeZero checks the frames of a block timed before 0
// (its cluster's time plus its negative relative time), which FFmpeg's
// matroska demuxer leaves without a timestamp: `ffmpeg -ss 1 -i
// opengop.mp4 -c copy cut.mkv` writes the two leading B-frames of the
// open GOP so, and FFmpeg decodes them without output. They are listed
// in Discarded (which video.SampleFrames never picks:
// TestSampleFramesBlockBeforeZero); their pts of -80 and -40 had made them
// the first frames sampled, each filled with another frame and counted as
// damage.
func TestParseWebMBlockBeforeZero(t *testing.T) {
	head := mkvHeader("matroska", 1000000, 40000000, 160)
	hdrLen := len(el(ebmlHeaderID, el(ebmlDocTypeID, []byte("matroska"))))
	cluster := el(mkvClusterID, elUint(mkvClusterTimeID, 0),
		simpleBlock(mkvSimpleBlockID, 1, 0, 0x80, "key0"),
		simpleBlock(mkvSimpleBlockID, 1, -80, 0x00, "b-80"),
		simpleBlock(mkvSimpleBlockID, 1, -40, 0x00, "b-40"),
		simpleBlock(mkvSimpleBlockID, 1, 80, 0x00, "p80"),
		simpleBlock(mkvSimpleBlockID, 1, 40, 0x00, "b40"),
		simpleBlock(mkvSimpleBlockID, 1, -120, 0x06, "\x01\x82ab12"), // EBML-laced pair before 0
	)
	v, err := Parse(append(head[:hdrLen:hdrLen], el(mkvSegmentID, head[hdrLen:], cluster)...))
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{1, 2, 5, 6}; !slices.Equal(v.Discarded, want) {
		t.Errorf("Discarded %v, want %v (the frames of blocks before time 0)", v.Discarded, want)
	}
	if want := []int64{0, -80, -40, 80, 40, -120, -120}; !slices.Equal(v.FramePTS, want) {
		t.Errorf("FramePTS %v, want %v", v.FramePTS, want)
	}
}
