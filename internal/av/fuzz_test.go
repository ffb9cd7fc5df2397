package av

import (
	"context"
	"testing"
	"time"
)

// fuzzConfig is the fuzzers' Config: 16-pixel output and limits that keep
// a hostile input to about a second.
func fuzzConfig() Config {
	cfg := cfgSize(16)
	cfg.MaxPixels = 1 << 20
	cfg.MaxFrames = 400
	cfg.MaxPackets = 2000
	cfg.Timeout = time.Second
	return cfg
}

// FuzzDecode feeds mutated videos to both decoding entry points: any
// outcome but a typed error or success (a crash, a hang past the deadline,
// an untyped error) fails.
func FuzzDecode(f *testing.F) {
	for _, name := range append(clips, "hevc_md5.mp4") { // with picture hashes
		f.Add(readMedia(f, name))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg := fuzzConfig()
		cfg.SkipNonRef = len(data)%2 == 0
		cfg.CheckHashes = len(data)%3 == 0 // HEVC's picture-hash checks too
		start := time.Now()
		_, err := DecodeAll(context.Background(), data, cfg)
		if !typed(err) {
			t.Fatalf("DecodeAll: untyped error %v", err)
		}
		targets := []Target{{PTS: 0, Slot: 0}, {PTS: 700, Slot: 1, Seek: SeekAuto}, {PTS: 1500, Slot: 0, Seek: SeekTo, SeekPTS: 1000}}
		_, err = DecodeTargets(context.Background(), data, cfg, Rational{1, 1000}, targets, make([]byte, 2*16*16*3))
		if !typed(err) {
			t.Fatalf("DecodeTargets: untyped error %v", err)
		}
		if el := time.Since(start); el > 2*cfg.Timeout+time.Second {
			t.Fatalf("took %v", el)
		}
	})
}
