package loader

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"

	"github.com/datahelix/datahelix/internal/gen/gentest"
)

// TestReceivedSamplesDecodeAsReadLocally runs helix, which moves
// samples between ranks into pooled buffers, and torch, which decodes
// every sample where it was read, and wants every sample's decoded bytes
// equal. The pools poison every buffer given back: one given back while
// a sample still aliased it would change that sample's decode or fail it
// (and the race detector would see the receive writing it).
func TestReceivedSamplesDecodeAsReadLocally(t *testing.T) {
	data := gentest.Tiny(t)
	digests := func(k Kind) (map[uint64][32]byte, int, int64) {
		var mu sync.Mutex
		got := map[uint64][32]byte{}
		moved, hits := 0, int64(0)
		var dropped []string
		cfg := testConfig(k)
		cfg.Steps, cfg.Batch = 8, 4 // messages of several samples
		cfg.poisonRx = true
		runLoaders(t, 8, data, cfg, func(r int, b *Batch) error {
			mu.Lock()
			defer mu.Unlock()
			for _, d := range b.Dropped {
				dropped = append(dropped, fmt.Sprintf("%s of %s: %v", d.Key, d.Shard, d.Err))
			}
			for _, s := range b.Samples {
				h := sha256.New()
				for _, tn := range s.Tensors {
					h.Write(tn.Data)
				}
				h.Write([]byte(s.Text))
				binary.Write(h, binary.LittleEndian, int64(s.Tokens))
				got[s.ID] = [32]byte(h.Sum(nil))
				if s.Owner != r {
					moved++
				}
			}
			return nil
		}, func(_ int, l *Loader) {
			l.mu.Lock()
			defer l.mu.Unlock()
			mu.Lock()
			defer mu.Unlock()
			hits += l.rx.Hits
		})
		if len(dropped) > 0 {
			t.Errorf("%s dropped %d samples, first %s", k, len(dropped), dropped[0])
		}
		return got, moved, hits
	}
	want, _, _ := digests(KindTorch)
	got, moved, hits := digests(KindHelix)
	if moved == 0 || hits == 0 {
		t.Fatalf("helix moved %d samples and reused %d receive buffers: the test needs both", moved, hits)
	}
	if len(got) != len(want) {
		t.Fatalf("helix delivered %d samples, torch %d", len(got), len(want))
	}
	for id, d := range want {
		if got[id] != d {
			t.Errorf("sample %d decoded differently under helix than under torch", id)
		}
	}
	t.Logf("%d samples, %d decoded away from their reader, %d receive buffers reused", len(got), moved, hits)
}
