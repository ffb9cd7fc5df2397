package bridge

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"testing"
)

// TestAudioRing fills a slot with samples with and without audio: each
// sample's PCM lands at a multiple of AudioAlign, whole, its entry
// naming it, and the BATCH of the entries round-trips.
func TestAudioRing(t *testing.T) {
	r, err := NewRing(2, 1<<16)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	pcm := func(ch, n int, v float32) []byte {
		b := make([]byte, 0, 4*ch*n)
		for range ch * n {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
		return b
	}
	in := []Input{
		{Key: "a", Kind: KindVideo, Shape: [4]uint32{1, 3, 3, 3}, Pixels: [][]byte{make([]byte, 27)}, Audio: pcm(2, 5, 0.5), AudioChannels: 2, AudioRate: 8000, Text: "x"},
		{Key: "b", Kind: KindImage, Shape: [4]uint32{1, 3, 3, 3}, Pixels: [][]byte{make([]byte, 27)}},
		{Key: "c", Kind: KindAudio, Audio: pcm(2, 7, -1), AudioChannels: 2, AudioRate: 8000, AudioFlags: AudioMissing},
	}
	if need := Need(in); need < 27*2+40+56+1 {
		t.Errorf("Need %d, less than the bytes", need)
	}
	out, err := r.Fill(1, in)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range out {
		if e.AudioChannels == 0 {
			if e.AudioLen != 0 || in[i].AudioChannels != 0 {
				t.Errorf("sample %d: audio entry %+v", i, e)
			}
			continue
		}
		if e.AudioOff%AudioAlign != 0 || e.AudioOff < uint64(r.Offset(1)) || e.AudioLen != uint64(len(in[i].Audio)) ||
			e.AudioSamples != uint32(len(in[i].Audio)/8) || e.AudioRate != 8000 || e.AudioFlags != in[i].AudioFlags {
			t.Errorf("sample %d: audio entry %+v", i, e)
		}
		if got := r.Read(e.AudioOff, e.AudioLen); string(got) != string(in[i].Audio) {
			t.Errorf("sample %d: the ring holds other audio bytes", i)
		}
	}
	m := &BatchMsg{Step: 3, Slot: 1, SlotOffset: uint64(r.Offset(1)), Samples: out, Audio: true}
	p, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	msg, err := Decode(p)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseBatch(msg.Payload)
	if err != nil || fmt.Sprint(back) != fmt.Sprint(m) {
		t.Errorf("round trip: %+v, %v\nwant %+v", back, err, m)
	}
	// An audio entry whose length disagrees with its shape, and an
	// unknown flag, are malformed.
	bad := append([]byte(nil), msg.Payload...)
	bad[len(bad)-32+16] = 3 // the last entry's channels
	if _, err := ParseBatch(bad); !errors.Is(err, ErrMessage) {
		t.Errorf("bad audio entry: %v, want ErrMessage", err)
	}
	bad = append([]byte(nil), msg.Payload...)
	bad[20] |= 2
	if _, err := ParseBatch(bad); !errors.Is(err, ErrMessage) {
		t.Errorf("unknown flag: %v, want ErrMessage", err)
	}
}
