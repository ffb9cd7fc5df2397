package mp4

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/datahelix/datahelix/internal/av"
	"github.com/datahelix/datahelix/internal/video/videotest"
)

// TestMP4KindMatchesAV checks Parse against package av on kind boxes
// FFmpeg 5.1 cannot read, in the clip where the first track has a kind
// box for the visually impaired: FFmpeg refuses the file ("Unsupported
// 'kind' box with version 1", or a scheme or value without its NUL) and
// Parse must too, naming the kind box (it picked the second track,
// and the sample was then dropped at every draw). And on a kind box for
// the visually impaired in a udta of the moov, after the traks: FFmpeg
// gives it to the last track, so that it decodes the first. The same
// for such a kind box in the other places FFmpeg's box walk reads one
// (readKinds: in the mvex, tref, sinf, schi, wave, meta and ilst boxes,
// after the fields of a sample entry, a second one of the same type too,
// after the moov; Parse decoded the second track), and for those it
// does not read (in a meta before its hdlr, in a container after an mdat
// box, after a second sample entry of another type). And on the files
// FFmpeg refuses for a kind box of under 6 bytes, even before the first
// track, or for containers nested more than 10 deep (Parse read them).
// And on a kind box after the mdat of a file sidx boxes index whole,
// where FFmpeg stops its walk (Parse read it: a kind box of version 1
// or 2 bytes failed the file, one for the visually impaired picked the
// 64x48 track), and of one they do not (a byte short, another track ID);
// on the sidx boxes FFmpeg refuses, and on the tkhd and mdhd boxes it
// refuses in any track (a second one, an mdhd of version 2).
func TestMP4KindMatchesAV(t *testing.T) {
	orig := videotest.Read(t, "h264_2video_kind.mp4")
	kind := trakBox(t, orig, 0, "kind")
	size := int(be32(orig, kind))
	if !bytes.HasSuffix(orig[kind:kind+size], []byte("description\x00")) {
		t.Fatalf("kind box %q", orig[kind:kind+size])
	}
	for _, tc := range []struct {
		name string
		at   int // offset in the kind box
		b    byte
	}{{"version 1", 8, 1}, {"flags 1", 11, 1}, {"flags 0x800000", 9, 0x80}, {"value without NUL", size - 1, 'X'}} {
		data := bytes.Clone(orig)
		data[kind+tc.at] = tc.b
		v, err := Parse(data)
		if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "kind box") {
			t.Errorf("%s: Parse gives %+v, %v; want ErrFormat naming the kind box", tc.name, v, err)
		}
		if _, _, err := av.Packets(context.Background(), data, av.DefaultConfig()); err == nil {
			t.Errorf("%s: FFmpeg opens the file", tc.name)
		}
	}

	rate := videotest.Read(t, "h264_2video_rate.mp4")
	moov := topBox(t, rate, "moov")
	for _, version := range []uint8{0, 1} {
		udta := box("udta", fbox("kind", version, 0, []byte("urn:mpeg:dash:role:2011\x00description\x00")))
		data := grow(t, rate, moov+int(be32(rate, moov)), udta, moov)
		v, err := Parse(data)
		if version == 1 {
			if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "kind box of version 1") {
				t.Errorf("moov kind box of version 1: Parse gives %+v, %v", v, err)
			}
			if _, _, err := av.Packets(context.Background(), data, av.DefaultConfig()); err == nil {
				t.Errorf("moov kind box of version 1: FFmpeg opens the file")
			}
			continue
		}
		if err != nil || v.Height != 48 {
			t.Errorf("moov kind box: Parse gives %+v, %v; want the 64x48 track", v, err)
			continue
		}
		videotest.SameAsAV(t, "moov kind box", data, v)
	}

	// In or after the second track, which FFmpeg decodes (160x120) when
	// it reads no kind box for the visually impaired; else the first.
	trak := trakBox(t, rate, 1, "")
	encl := []int{moov, trak}
	for _, typ := range []string{"mdia", "minf", "stbl", "stsd"} {
		encl = append(encl, trakBox(t, rate, 1, typ))
	}
	entry := encl[len(encl)-1] + 16
	encl = append(encl, entry)
	inTrak := func(b []byte) []byte { return grow(t, rate, trak+int(be32(rate, trak)), b, moov, trak) }
	inEntry := func(b []byte) []byte { return grow(t, rate, entry+int(be32(rate, entry)), b, encl...) }
	desc := fbox("kind", 0, 0, []byte("urn:mpeg:dash:role:2011\x00description\x00"))
	hdlr := fbox("hdlr", 0, 0, u32s(0), []byte("mdir"), make([]byte, 13))
	// secondEntry adds a copy of the sample entry, of type typ, with a
	// kind box after its fields: FFmpeg reads it when of the first's type.
	secondEntry := func(typ string) []byte {
		e := slices.Concat(rate[entry:entry+int(be32(rate, entry))], desc)
		binary.BigEndian.PutUint32(e, uint32(len(e)))
		copy(e[4:], typ)
		stsd := encl[len(encl)-2]
		d := grow(t, rate, entry+int(be32(rate, entry)), e, encl[:len(encl)-1]...)
		binary.BigEndian.PutUint32(d[stsd+12:], be32(d, stsd+12)+1)
		return d
	}
	moovEnd := topBox(t, moovFirst(t, rate), "mdat") // where indexedMP4 puts the first sidx
	indexed := func(v uint8, tail []byte, short int, mfra bool) []byte {
		return indexedMP4(t, rate, v, tail, short, mfra)
	}
	kind1 := fbox("kind", 1, 0, []byte("a\x00b\x00"))
	kind2 := box("kind", []byte{0, 0})
	sidxTimescale0 := indexed(1, desc, 0, true)
	copy(sidxTimescale0[moovEnd+16:], []byte{0, 0, 0, 0})
	sidxRef1 := indexed(1, desc, 0, true)
	sidxRef1[moovEnd+40] |= 0x80
	sidxOtherID := indexed(1, desc, 0, true)
	for _, at := range []int{moovEnd + 12, moovEnd + 52 + 12} { // the reference IDs of the two sidx boxes of 52 bytes
		binary.BigEndian.PutUint32(sidxOtherID[at:], 9)
	}
	mdhd := rate[trakBox(t, rate, 1, "mdhd"):]
	mdhd = mdhd[:be32(mdhd, 0)]
	tkhd := rate[trakBox(t, rate, 1, "tkhd"):]
	tkhd = tkhd[:be32(tkhd, 0)]
	// soun2 makes the first track audio, its mdhd of version 2.
	soun2 := func(version byte) []byte {
		d := bytes.Clone(rate)
		copy(d[trakBox(t, d, 0, "hdlr")+16:], "soun")
		d[trakBox(t, d, 0, "mdhd")+8] = version
		return d
	}
	nest := func(n int, b []byte) []byte {
		for range n {
			b = box("udta", b)
		}
		return b
	}
	for _, tc := range []struct {
		name   string
		data   []byte
		height int // of the track FFmpeg decodes; 0 when it refuses the file
	}{
		{"a kind box in the moov's mvex", grow(t, rate, moov+int(be32(rate, moov)), box("mvex", desc), moov), 48},
		{"a kind box in the trak's tref", inTrak(box("tref", desc)), 48},
		{"a kind box in the trak's sinf/schi", inTrak(box("sinf", box("schi", desc))), 48},
		{"a kind box in the trak's wave", inTrak(box("wave", desc)), 48},
		{"a kind box in the trak's udta/meta/ilst", inTrak(box("udta", fbox("meta", 0, 0, hdlr, box("ilst", desc)))), 48},
		{"a kind box after the sample entry's fields", inEntry(desc), 48},
		{"a kind box in a sinf after the sample entry's fields", inEntry(box("sinf", desc)), 48},
		{"a kind box after the fields of a second sample entry of the same type", secondEntry("avc1"), 48},
		{"a kind box after the fields of a second sample entry of another type", secondEntry("hvc1"), 120},
		{"a kind box at the top level after the moov", slices.Concat(rate, desc), 48},
		{"a kind box in a moof after the moov", slices.Concat(rate, box("moof", box("traf", desc))), 48},
		{"a kind box in a meta before its hdlr", inTrak(fbox("meta", 0, 0, desc, hdlr)), 120},
		{"a kind box in a udta after an mdat box", inTrak(box("udta", box("mdat"), desc)), 120},
		{"a kind box in a free box", inTrak(box("free", desc)), 120},
		{"a kind box of version 1 in the mvex", grow(t, rate, moov+int(be32(rate, moov)), box("mvex", fbox("kind", 1, 0, []byte("a\x00b\x00"))), moov), 0},
		{"a kind box of 2 bytes before the first trak", grow(t, rate, moov+8+int(be32(rate, moov+8)), box("kind", []byte{0, 0}), moov), 0},
		{"a kind box of 5 bytes in a udta before the first trak", grow(t, rate, moov+8+int(be32(rate, moov+8)), box("udta", fbox("kind", 0, 0, []byte{0})), moov), 0},
		{"a kind box of 2 bytes at the top level before the moov", slices.Concat(box("kind", []byte{0, 0}), rate), 0},
		{"a kind box in 8 nested udta boxes in the trak", inTrak(nest(8, desc)), 48},
		{"a kind box in 9 nested udta boxes in the trak", inTrak(nest(9, desc)), 0},
		{"9 nested empty udta boxes in the trak", inTrak(nest(9, nil)), 0},
		{"4 nested udta boxes after the sample entry's fields", inEntry(nest(4, nil)), 120},
		{"5 nested udta boxes after the sample entry's fields", inEntry(nest(5, nil)), 0},
		{"a kind box for the visually impaired after the mdat, sidx boxes indexing the file to its mfra", indexed(1, desc, 0, true), 120},
		{"a kind box of version 1 after the mdat, sidx boxes indexing the file to its mfra", indexed(1, kind1, 0, true), 120},
		{"a kind box of 2 bytes after the mdat, sidx boxes indexing the file to its mfra", indexed(1, kind2, 0, true), 120},
		{"a kind box after the mdat, sidx boxes of version 0 indexing the file to its end", indexed(0, desc, 0, false), 120},
		{"a kind box after the mdat, sidx boxes ending a byte before the mfra", indexed(1, desc, 1, true), 48},
		{"a kind box of version 1 after the mdat, sidx boxes ending a byte before the end", indexed(0, kind1, 1, false), 0},
		{"a kind box after the mdat, sidx boxes of another track ID", sidxOtherID, 48},
		{"a sidx box of timescale 0", sidxTimescale0, 0},
		{"a sidx box referring to a sidx box", sidxRef1, 0},
		{"a second mdhd box in the second trak", inTrak(mdhd), 0},
		{"an mdhd box in a udta of the moov, after the traks", grow(t, rate, moov+int(be32(rate, moov)), box("udta", mdhd), moov), 0},
		{"a second tkhd box in the second trak", inTrak(tkhd), 0},
		{"an audio track with an mdhd of version 0", soun2(0), 120},
		{"an audio track with an mdhd of version 2", soun2(2), 0},
	} {
		v, err := Parse(tc.data)
		_, _, aerr := av.Packets(context.Background(), tc.data, av.DefaultConfig())
		if tc.height == 0 {
			if !errors.Is(err, ErrFormat) {
				t.Errorf("%s: Parse gives %+v, %v; want ErrFormat", tc.name, v, err)
			}
			if aerr == nil {
				t.Errorf("%s: FFmpeg opens the file", tc.name)
			}
			continue
		}
		if err != nil || v.Height != tc.height {
			t.Errorf("%s: Parse gives %+v, %v; want the track of height %d", tc.name, v, err, tc.height)
			continue
		}
		videotest.SameAsAV(t, tc.name, tc.data, v)
	}
}

// matchesAV checks Parse against package av on data: both refuse it
// (height 0), or both pick the video track of that height, Parse as
// av demuxes it.
func matchesAV(t *testing.T, name string, data []byte, height int) {
	t.Helper()
	v, err := Parse(data)
	if height == 0 {
		if !errors.Is(err, ErrFormat) {
			t.Errorf("%s: Parse gives %+v, %v; want ErrFormat", name, v, err)
		}
		if _, _, aerr := av.Packets(context.Background(), data, av.DefaultConfig()); aerr == nil {
			t.Errorf("%s: FFmpeg opens the file", name)
		}
		return
	}
	if err != nil || v.Height != height {
		t.Errorf("%s: Parse gives %+v, %v; want the track of height %d", name, v, err, height)
		return
	}
	videotest.SameAsAV(t, name, data, v)
}

// TestMP4WalkMatchesAV checks Parse against package av where readKinds
// follows FFmpeg 5.1's box walk beyond kind boxes, in the clip whose
// second track (160x120) FFmpeg decodes unless a kind box for the visually
// impaired is in it: a box overrunning its container, which FFmpeg cuts
// to it (Parse ended the container's walk there); the 17th stream,
// which package av's max_streams refuses (Parse read it); the stsd
// boxes FFmpeg refuses in any track (a second one for a track, an entry
// count under 1, over 1024 or over the box's size over 8, an entry of
// under 8 bytes) and those it ignores (before the first trak); the codec
// tag I420 that a visual entry's compressor name sets, so that FFmpeg
// skips a second entry of the same type (Parse compared it with the
// first entry's type); and the wave boxes FFmpeg does not walk, those of
// a QDM2 or ALAC audio track (Parse walked them).
func TestMP4WalkMatchesAV(t *testing.T) {
	rate := videotest.Read(t, "h264_2video_rate.mp4")
	moov := topBox(t, rate, "moov")
	moovEnd := moov + int(be32(rate, moov))
	trak0, trak := trakBox(t, rate, 0, ""), trakBox(t, rate, 1, "")
	encl := []int{moov, trak}
	for _, typ := range []string{"mdia", "minf", "stbl", "stsd"} {
		encl = append(encl, trakBox(t, rate, 1, typ))
	}
	stsdOff := encl[len(encl)-1]
	entry := stsdOff + 16
	inTrak := func(d []byte, b []byte) []byte { return grow(t, d, trak+int(be32(d, trak)), b, moov, trak) }
	inTrak0 := func(d []byte, b []byte) []byte { return grow(t, d, trak0+int(be32(d, trak0)), b, moov, trak0) }
	desc := fbox("kind", 0, 0, []byte("urn:mpeg:dash:role:2011\x00description\x00"))
	kind1 := fbox("kind", 1, 0, []byte("a\x00b\x00"))
	over := bytes.Clone(desc)
	binary.BigEndian.PutUint32(over, uint32(len(desc)+4))
	overTrak := inTrak(rate, box("udta", over))
	// A second sample entry of the first's type, a kind box after its
	// fields, in a file d whose moov is laid out as rate's.
	secondEntry := func(d []byte) []byte {
		e := slices.Concat(d[entry:entry+int(be32(d, entry))], desc)
		binary.BigEndian.PutUint32(e, uint32(len(e)))
		d = grow(t, d, entry+int(be32(d, entry)), e, encl...)
		binary.BigEndian.PutUint32(d[stsdOff+12:], be32(d, stsdOff+12)+1)
		return d
	}
	i420 := bytes.Clone(rate)
	name := "Planar Y'CbCr 8-bit 4:2:0"
	i420[entry+50] = byte(len(name))
	copy(i420[entry+51:], name)
	stsd1 := rate[stsdOff : stsdOff+int(be32(rate, stsdOff))]
	// soun makes the first track audio, its sample entry of type typ.
	soun := func(typ string) []byte {
		d := bytes.Clone(rate)
		copy(d[trakBox(t, d, 0, "hdlr")+16:], "soun")
		copy(d[trakBox(t, d, 0, "stsd")+20:], typ)
		return d
	}
	stsd0 := func(at int, v uint32) []byte {
		d := soun("avc1")
		binary.BigEndian.PutUint32(d[trakBox(t, d, 0, "stsd")+at:], v)
		return d
	}
	frma := box("frma", []byte("alac"))
	for _, tc := range []struct {
		name   string
		data   []byte
		height int // of the track FFmpeg decodes; 0 when it refuses the file
	}{
		{"a kind box overrunning its udta by 4 bytes", overTrak, 48},
		{"a kind box overrunning its udta, the trak and the moov", func() []byte {
			d := inTrak(rate, box("udta", desc))
			binary.BigEndian.PutUint32(d[trak+int(be32(rate, trak))+8:], 1<<20)
			return d
		}(), 48},
		{"16 traks in the moov", grow(t, rate, moovEnd, bytes.Repeat(box("trak"), 14), moov), 120},
		{"17 traks in the moov", grow(t, rate, moovEnd, bytes.Repeat(box("trak"), 15), moov), 0},
		{"14 traks at the top level after the moov", slices.Concat(rate, bytes.Repeat(box("trak"), 14)), 120},
		{"15 traks at the top level after the moov", slices.Concat(rate, bytes.Repeat(box("trak"), 15)), 0},
		{"a second stsd in the second trak", inTrak(rate, stsd1), 0},
		{"an stsd in a udta of the moov, after the traks", grow(t, rate, moovEnd, box("udta", stsd1), moov), 0},
		{"an stsd in a udta of the moov, before the traks", grow(t, rate, trak0, box("udta", stsd1), moov), 120},
		{"an audio track's stsd of 0 entries", stsd0(12, 0), 0},
		{"an audio track's stsd of 2000 entries", stsd0(12, 2000), 0},
		{"an audio track's stsd of more entries than its size over 8", stsd0(12, be32(rate, trakBox(t, rate, 0, "stsd"))/8), 0},
		{"an audio track's stsd entry of 0 bytes", stsd0(16, 0), 0},
		{"an audio track's stsd entry of 7 bytes", stsd0(16, 7), 0},
		{"an audio track's stsd entry of 8 bytes", stsd0(16, 8), 120},
		{"a second entry of the first's type, the first named for I420", secondEntry(i420), 120},
		{"a second entry of the first's type", secondEntry(rate), 48},
		{"a kind box of version 1 in an audio track's wave", inTrak0(soun("avc1"), box("wave", kind1)), 0},
		{"a kind box of version 1 in a QDM2 track's wave", inTrak0(soun("QDM2"), box("wave", kind1)), 120},
		{"a kind box of version 1 in an ALAC track's wave", inTrak0(soun("alac"), box("wave", kind1, make([]byte, 8))), 120},
		{"a kind box of version 1 in an ALAC track's wave after a frma", inTrak0(soun("alac"), box("wave", frma, kind1)), 0},
	} {
		matchesAV(t, tc.name, tc.data, tc.height)
	}
}

// TestMP4WalkBounded checks that readKinds' walk does work linear in the
// file: it begins at most maxStreams streams, so that a sidx box looks
// its reference ID up in at most as many, and it reads no sidx reference
// past the end of the file (they read as zeros) and at most maxSidxRefs
// in all (Parse took 3.6 s for 100,000 traks and as many sidx boxes,
// 30 s for 100,000 sidx boxes of 32 bytes and 65535 references each).
func TestMP4WalkBounded(t *testing.T) {
	rate := videotest.Read(t, "h264_2video_rate.mp4")
	fast := moovFirst(t, rate)
	id := be32(rate, trakBox(t, rate, 0, "tkhd")+20)
	w, err := walkKinds(slices.Concat(fast, bytes.Repeat(box("trak"), 1000), bytes.Repeat(box("sidx"), 1000)))
	if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "max_streams") || len(w.streams) != maxStreams {
		t.Errorf("1000 traks: %d streams, err %v; want %d, ErrFormat naming max_streams", len(w.streams), err, maxStreams)
	}
	tiny := fbox("sidx", 0, 0, u32s(id, 1, 0, 0, 0xFFFF)) // 65535 references in 32 bytes
	// Each reads the references in the boxes after it, up to the file's
	// end: at most 32*n/12+1 of them for the n boxes from it on.
	const n = 100
	w, err = walkKinds(slices.Concat(fast, bytes.Repeat(tiny, n)))
	if bound := n * (32*n/12 + 1); err != nil || w.sidxRefs > bound || w.sidxRefs < bound/4 {
		t.Errorf("%d sidx boxes of 32 bytes: %d references read, err %v; want about %d", n, w.sidxRefs, err, bound/2)
	}
	w, err = walkKinds(slices.Concat(fast, bytes.Repeat(tiny, 2000)))
	if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "references") || w.sidxRefs != maxSidxRefs+1 {
		t.Errorf("2000 sidx boxes of 32 bytes: %d references read, err %v; want ErrFormat at %d", w.sidxRefs, err, maxSidxRefs+1)
	}
}

// TestMaxStreamsIsAV checks maxStreams against the max_streams option
// package av opens files with.
func TestMaxStreamsIsAV(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "av", "av.c"))
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf(`av_dict_set_int(&o, "max_streams", %d, 0);`, maxStreams); !bytes.Contains(src, []byte(want)) {
		t.Errorf("internal/av/av.c does not set max_streams to maxStreams (%d): want %s", maxStreams, want)
	}
}

// BenchmarkParseMP4SidxRefs parses a file ending in 300 sidx boxes of 32
// bytes, each with 65535 references that run past the end of the file:
// FFmpeg reads them (as zeros), Parse stops at the end of the file.
func BenchmarkParseMP4SidxRefs(b *testing.B) {
	rate := videotest.Read(b, "h264_2video_rate.mp4")
	id := be32(rate, trakBox(b, rate, 0, "tkhd")+20)
	data := slices.Concat(moovFirst(b, rate), bytes.Repeat(fbox("sidx", 0, 0, u32s(id, 1, 0, 0, 0xFFFF)), 300))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(data); err != nil {
			b.Fatal(err)
		}
	}
}
