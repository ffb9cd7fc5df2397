package loader

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/internal/decoding"
	"github.com/datahelix/datahelix/internal/gen/gentest"
	"github.com/datahelix/datahelix/internal/shard"
)

// TestBatchAudio runs 2 ranks with the audio output on and clips split
// into up to 4 tasks: every clip's BatchSample.Audio is the audio a
// whole-sample Decode gives it (the split path decodes it in its first
// part), pictures and text have none.
func TestBatchAudio(t *testing.T) {
	data := gentest.Tiny(t)
	cfg := testConfig(KindHelix)
	cfg.Decode.AudioRate, cfg.MaxTasks, cfg.Steps = 8000, 4, 4
	var mu sync.Mutex
	got := map[string]string{} // shard/key -> audio MD5
	tracks := 0
	eachBatch(t, 2, data, cfg, func(_ int, b *Batch) error {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range b.Samples {
			a := s.Audio
			switch {
			case s.Modality != decode.ModalityVideo && a != nil:
				return fmt.Errorf("step %d: %s sample %s has audio", b.Step, s.Modality, s.Key)
			case s.Modality != decode.ModalityVideo:
				continue
			case a == nil || a.Rate != 8000 || a.Channels != 1 || a.Len() == 0:
				return fmt.Errorf("step %d: clip %s audio %+v", b.Step, s.Key, a)
			}
			if !a.Missing {
				tracks++
			}
			got[s.Shard+"\x00"+s.Key] = a.MD5()
		}
		return nil
	})
	if len(got) == 0 {
		t.Fatal("no clip in 4 steps")
	}
	ds, err := decode.OpenDataset(data, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	dec := decoding.NewDecoder(cfg.Decode)
	for _, sh := range shard.ShardsOf(ds) {
		for i := range sh.Len() {
			s, err := sh.ReadSample(i)
			if err != nil {
				t.Fatal(err)
			}
			want, ok := got[s.Shard+"\x00"+s.Key]
			if !ok {
				continue
			}
			out, err := dec.Decode(context.Background(), s, nil)
			if err != nil {
				t.Fatal(err)
			}
			if out.Audio.MD5() != want {
				t.Errorf("clip %s: the loader's audio differs from Decode's", s.Key)
			}
		}
	}
	t.Logf("%d clips, %d with an audio track", len(got), tracks)
}
