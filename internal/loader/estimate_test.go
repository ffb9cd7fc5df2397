package loader

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/gpu"
	"github.com/datahelix/datahelix/internal/costmodel"
	"github.com/datahelix/datahelix/internal/decoding"
	"github.com/datahelix/datahelix/internal/gen/gentest"
	"github.com/datahelix/datahelix/internal/planlimits"
	"github.com/datahelix/datahelix/internal/step"
	"github.com/datahelix/datahelix/plan"
)

// TestAbsurdEstimateDoesNotEndTheJob gives one MP4 a frame table that
// claims 4 GB frames: the parser accepts its record, whose estimate is
// beyond planlimits.Cost. The planned loaders put the estimate into their
// plan block, which refused it and ended the job at that step; the
// sample must instead take part like any other and be dropped when it
// fails to decode.
func TestAbsurdEstimateDoesNotEndTheJob(t *testing.T) {
	patched := ""
	data := rewriteCopy(t, gentest.Tiny(t), func(name string, body []byte) []byte {
		if patched != "" || !strings.HasSuffix(name, ".mp4") {
			return body
		}
		// stsz: size, "stsz", version+flags, sample_size (0: a table
		// follows), count, count sizes.
		i := bytes.Index(body, []byte("stsz"))
		if i < 4 || len(body) < i+16 || binary.BigEndian.Uint32(body[i+8:]) != 0 {
			return body
		}
		n := int(binary.BigEndian.Uint32(body[i+12:]))
		if len(body) < i+16+4*n {
			return body
		}
		body = bytes.Clone(body)
		for k := range n {
			binary.BigEndian.PutUint32(body[i+16+4*k:], 0xFFFFFFF0)
		}
		rec, err := decoding.ParseRecord(&decode.Sample{Key: name, Members: []decode.Member{{Name: name, Ext: "mp4", Data: body}}}, decoding.Limits{})
		if err != nil {
			t.Fatalf("the patched %s no longer parses (%v): the test needs one that does", name, err)
		}
		cost := costmodel.New(nil)
		cost.SetOptions(costmodel.Options{Frames: 2, Size: 32})
		if est := cost.Estimate(rec); est <= planlimits.Cost {
			t.Fatalf("the patched %s estimates %d µs, within planlimits.Cost: the test proves nothing", name, est)
		}
		patched = name
		return body
	})
	if patched == "" {
		t.Fatal("no MP4 with a frame size table in the test dataset")
	}
	for _, k := range []Kind{KindStatic, KindHelix} {
		cfg := testConfig(k)
		cfg.Steps = 8 // two epochs: every sample is drawn
		res, errs := runInProcess(t, 4, data, cfg)
		requireOK(t, errs)
		if res.Summary.Steps != cfg.Steps {
			t.Errorf("%s: %d steps, want %d", k, res.Summary.Steps, cfg.Steps)
		}
	}
}

// FuzzDescribe checks that any sample the parser accepts is described
// within the limits of a plan block: mutated real media under each
// extension, seeded with the two records that broke it (a frame table of
// 4 GB frames, a document of 44 images claiming 65536²).
func FuzzDescribe(f *testing.F) {
	read := func(path string) []byte {
		b, err := os.ReadFile(filepath.Join("..", "..", "decode", "testdata", path))
		if err != nil {
			f.Fatal(err)
		}
		return b
	}
	clip := read("video/h264_bf2.mp4")
	f.Add(clip, "mp4")
	if i := bytes.Index(clip, []byte("stsz")); i > 0 {
		huge := bytes.Clone(clip)
		for k := i + 16; k+4 <= min(len(huge), i+16+4*64); k += 4 {
			binary.BigEndian.PutUint32(huge[k:], 0xFFFFFFF0)
		}
		f.Add(huge, "mp4")
	}
	f.Add(read("video/vp9.webm"), "webm")
	f.Add(read("image/rgb.png"), "0.png")
	f.Add(read("image/lossy.webp"), "webp")
	// A bare PNG signature and IHDR claiming 65536 x 65536.
	png := append([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR"), 0, 1, 0, 0, 0, 1, 0, 0, 8, 2, 0, 0, 0, 0, 0, 0, 0)
	f.Add(png, "7.png")
	cfg := testConfig(KindHelix)
	cfg.GPU = gpu.Model{Base: time.Millisecond, PerFrame: time.Millisecond, PerToken: time.Microsecond}
	cfg.MaxTasks = 4
	cost := costmodel.New(nil)
	cost.SetOptions(costmodel.Options{Frames: cfg.Decode.Frames, Size: cfg.Decode.Size, MaxTasks: taskLimit(cfg)})
	l := &Loader{cfg: cfg, cost: cost, dec: decoding.NewDecoder(cfg.Decode)}
	f.Fuzz(func(t *testing.T, data []byte, ext string) {
		s := &decode.Sample{Key: "k", Members: []decode.Member{{Name: "k.txt", Ext: "txt", Data: []byte("a caption")}}}
		// Many copies of an image member make a document of many images.
		n := 1
		if strings.HasSuffix(ext, "png") && len(data) < 64 {
			n = 44
		}
		for i := range n {
			e := ext
			if n > 1 {
				e = fmt.Sprintf("%d.png", i)
			}
			s.Members = append(s.Members, decode.Member{Name: "k." + e, Ext: e, Data: data})
		}
		st := &slotState{sample: s, item: step.Item{ID: 1, Bytes: int64(len(data) * n)}}
		l.describe(st, 0)
		block := &plan.Block{Rank: 0, Progress: plan.Progress{Capacity: plan.One, Bandwidth: plan.One},
			Samples: []plan.Sample{{ID: st.item.ID, Bytes: st.item.Bytes, Cost: st.item.Est, Train: st.item.Train}}}
		if _, err := plan.AppendBlock(nil, block); err != nil {
			t.Fatalf("record %v: %v", st.rec, err)
		}
		var parts int64
		for _, p := range st.item.Parts {
			if p < 1 {
				t.Fatalf("task cost %d in %v", p, st.item.Parts)
			}
			parts += p
		}
		// Each task's share is rounded down, then raised to at least 1.
		if parts > st.item.Est+int64(len(st.item.Parts)) {
			t.Fatalf("task costs %v sum to %d, over the sample's %d", st.item.Parts, parts, st.item.Est)
		}
	})
}

// TestDamagedSampleIsCountedAndLogged flips bytes inside the first frame
// of one H.264 clip: the decoder conceals the damage and the clip
// decodes, which left an operator no sign that the shard is damaged. The
// run must count it, log it once, and deliver it as before.
func TestDamagedSampleIsCountedAndLogged(t *testing.T) {
	damagedKey := ""
	data := rewriteCopy(t, gentest.Tiny(t), func(name string, body []byte) []byte {
		i := bytes.Index(body, []byte("mdat"))
		if damagedKey != "" || !strings.HasSuffix(name, ".mp4") || i < 0 || len(body) < i+2000 || !bytes.Contains(body, []byte("avc1")) {
			return body
		}
		body = bytes.Clone(body)
		for k := i + 1200; k < i+1216; k++ { // past the encoder's SEI, in the first frame
			body[k] ^= 0x5a
		}
		damagedKey, _, _ = strings.Cut(name, ".")
		return body
	})
	if damagedKey == "" {
		t.Fatal("no H.264 MP4 in the test dataset")
	}
	var log syncBuffer
	cfg := testConfig(KindLocal)
	cfg.Steps, cfg.Log = 8, &log // two epochs: every sample is drawn twice
	res, errs := runInProcess(t, 4, data, cfg)
	requireOK(t, errs)
	if res.Summary.DamagedSamples < 1 || res.Summary.DroppedSamples != 0 {
		t.Errorf("damaged %d, dropped %d; want the damaged clip counted and kept", res.Summary.DamagedSamples, res.Summary.DroppedSamples)
	}
	if n := strings.Count(log.String(), "decoded with damaged data"); n != 1 || !strings.Contains(log.String(), `"`+damagedKey+`"`) {
		t.Errorf("log has %d damage lines, want one naming %q:\n%s", n, damagedKey, log.String())
	}
}

// TestDescribeUsesTheDecoderLimits checks that a sample's record is read
// under the configured text limit, as the decoder reads it: a text the
// limit refuses fails the record, and a text over the default limit but
// within a raised one does not (describe applied the default 16 MiB, so
// such samples were dropped though the decoder took them).
func TestDescribeUsesTheDecoderLimits(t *testing.T) {
	tests := []struct {
		name  string
		limit int64
		size  int
		fail  bool
	}{
		{"below a lowered limit", 100, 99, false},
		{"over a lowered limit", 100, 150, true},
		{"over the default, within a raised limit", 2 * decode.DefaultLimits().MaxTextBytes, int(decode.DefaultLimits().MaxTextBytes) + 1, false},
	}
	for _, tc := range tests {
		cfg := testConfig(KindHelix)
		cfg.Decode.Limits.MaxTextBytes = tc.limit
		l := &Loader{cfg: cfg, cost: costmodel.New(nil), dec: decoding.NewDecoder(cfg.Decode)}
		s := &decode.Sample{Shard: "s.tar", Key: "k", Members: []decode.Member{{Name: "k.txt", Ext: "txt", Data: bytes.Repeat([]byte("a"), tc.size)}}}
		st := &slotState{sample: s, item: step.Item{ID: 1, Bytes: int64(tc.size)}}
		l.describe(st, 0)
		if got := st.recErr != nil; got != tc.fail || tc.fail && !errors.Is(st.recErr, decode.ErrLimit) {
			t.Errorf("%s: %d bytes of text, limit %d: record error %v, want failure %v (ErrLimit)", tc.name, tc.size, tc.limit, st.recErr, tc.fail)
		}
	}
}
