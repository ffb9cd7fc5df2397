package decoding

import (
	"context"
	"crypto/md5"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/big"
	"time"
	"unsafe"

	"github.com/datahelix/datahelix/internal/av"
)

// Audio output: what Options.AudioRate and AudioChannels may be.
const (
	// DefaultAudioChannels is the channel count of the audio output when
	// Options.AudioChannels is 0.
	DefaultAudioChannels = 1
	// MaxAudioRate and MaxAudioChannels bound the audio output.
	MaxAudioRate     = 192000
	MaxAudioChannels = 8
	// defaultMaxAudioDuration is the default Limits.MaxAudioDuration.
	defaultMaxAudioDuration = 2 * time.Minute
)

// Audio is a sample's sound as Decode outputs it when Options.AudioRate
// is set: float32 PCM at Rate Hz, Channels rows of Len() samples,
// channel-major (the [C, T] layout of torchaudio), values in [-1, 1] as
// the codec gives them. Mono is copied to every channel; other layouts
// are mixed to the default layout of Channels by FFmpeg's matrix
// (libswresample).
//
// For a clip, the audio covers the time of its sampled frames, from the
// first sampled frame's presentation time to the end of the last one's
// display (AudioSpan); for an audio sample, the stream's whole duration
// as its container states it. Sample k is the sound at (First+k)/Rate
// seconds on the file's timeline (that of the frames' timestamps), and
// the sample count depends only on that span and Rate: what the stream
// does not cover, and a clip without sound, is silence.
type Audio struct {
	Rate     int
	Channels int
	// First is the index of the first sample at Rate on the file's
	// timeline: the audio starts at First/Rate seconds.
	First int64
	// PCM holds Channels x Len() samples, channel after channel.
	PCM []float32
	// Missing is set when the clip has no audio track and the sample no
	// audio member: PCM is the silence of the clip's span, so that a clip
	// without sound in a dataset of clips with sound keeps its place in
	// the batch.
	Missing bool
}

// Len returns the samples per channel.
func (a *Audio) Len() int {
	if a == nil || a.Channels <= 0 {
		return 0
	}
	return len(a.PCM) / a.Channels
}

// Shape returns [Channels, Len()].
func (a *Audio) Shape() []int { return []int{a.Channels, a.Len()} }

// Bytes returns PCM as little-endian float32 bytes: the memory of PCM
// itself on a little-endian machine, a copy on another.
func (a *Audio) Bytes() []byte {
	if a == nil || len(a.PCM) == 0 {
		return nil
	}
	if littleEndian {
		return unsafe.Slice((*byte)(unsafe.Pointer(&a.PCM[0])), 4*len(a.PCM))
	}
	b := make([]byte, 0, 4*len(a.PCM))
	for _, v := range a.PCM {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b
}

var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// MD5 returns the hex MD5 of Bytes(): what `datahelix decode --md5`
// prints for the audio.
func (a *Audio) MD5() string {
	h := md5.Sum(a.Bytes())
	return hex.EncodeToString(h[:])
}

// AudioInfo holds the cost features of a sample's audio, read from its
// container header without decoding (FFmpeg's demuxer: av.ProbeAudio).
type AudioInfo struct {
	Codec      string // FFmpeg codec name: "aac", "mp3", "opus", "flac", "pcm_s16le", ...
	SampleRate int
	Channels   int
	// Timescale is the ticks per second of Start and Duration.
	Timescale int64
	// Start and Duration are the stream's start time and duration (the
	// file's when the stream states none); 0 when unknown.
	Start, Duration int64
	// Member is the index in Sample.Members of the member that holds the
	// audio: the clip's, for its audio track.
	Member int
}

// Seconds returns the duration in seconds.
func (a *AudioInfo) Seconds() float64 {
	if a == nil || a.Timescale <= 0 {
		return 0
	}
	return float64(a.Duration) / float64(a.Timescale)
}

// audioOptions returns the audio output's rate and channels of opts, 0
// rate when the output is off.
func audioOptions(opts Options) (rate, channels int) {
	if opts.AudioRate <= 0 {
		return 0, 0
	}
	if opts.AudioChannels <= 0 {
		return opts.AudioRate, DefaultAudioChannels
	}
	return opts.AudioRate, opts.AudioChannels
}

// CheckAudio checks an audio output's rate and channels (Options
// AudioRate and AudioChannels): rate 0 is off, with channels 0;
// otherwise rate 1..MaxAudioRate and channels 0 (DefaultAudioChannels)
// to MaxAudioChannels.
func CheckAudio(rate, channels int) error {
	switch {
	case rate == 0 && channels != 0:
		return fmt.Errorf("decode: %d audio channels without an audio rate", channels)
	case rate < 0 || rate > MaxAudioRate:
		return fmt.Errorf("decode: audio rate %d Hz, want 0 (no audio) or 1..%d", rate, MaxAudioRate)
	case channels < 0 || channels > MaxAudioChannels:
		return fmt.Errorf("decode: %d audio channels, want 1..%d", channels, MaxAudioChannels)
	}
	return nil
}

// AudioSpan returns the audio samples at rate Hz that go with the frames
// targets of a clip (Decoder.ClipTargets: decode-order frames sorted by
// presentation time): from the first one's presentation time t0 to the end of the last one's
// display t1, the presentation time of the next frame shown after it;
// for the clip's last shown frame, its time plus the average frame
// duration that SampleFrames gives it (with estimated timing, frame i+1's
// FrameTime, the clip's Duration for the last). The samples are
// round(t0*rate) up to round(t1*rate), excluded (halves rounded up):
// first is the first one's index on the file's timeline, count how many.
// A clip without frames gives none.
func AudioSpan(v *VideoInfo, targets []int, rate int) (first, count int64) {
	if len(targets) == 0 || v.Timescale == 0 || rate <= 0 {
		return 0, 0
	}
	last := targets[len(targets)-1]
	t0, t1 := v.FrameTime(targets[0]), displayEnd(v, last)
	first = ticksToSamples(t0, int64(v.Timescale), rate)
	return first, max(ticksToSamples(t1, int64(v.Timescale), rate)-first, 0)
}

// displayEnd returns when frame i (decode order) stops being shown, in
// Timescale ticks (see AudioSpan).
func displayEnd(v *VideoInfo, i int) int64 {
	if !v.PerFrame() {
		return v.FrameTime(i + 1)
	}
	t := v.FramePTS[i]
	next, found := int64(math.MaxInt64), false
	first, lastShown, shown := int64(math.MaxInt64), int64(math.MinInt64), 0
	for j, p := range v.FramePTS {
		if v.Hidden(j) {
			continue
		}
		shown++
		first, lastShown = min(first, p), max(lastShown, p)
		if p > t && p < next {
			next, found = p, true
		}
	}
	if found {
		return next
	}
	// The last frame lasts as long as an average frame, as in
	// video.SampleFrames.
	step := int64(0)
	switch {
	case shown > 1:
		step = (lastShown - first) / int64(shown-1)
	case v.Frames > 0:
		step = v.Duration / int64(v.Frames)
	}
	return t + max(step, 1)
}

// ticksToSamples returns round(t/timescale*rate), halves rounded up.
func ticksToSamples(t, timescale int64, rate int) int64 {
	n := new(big.Int).Mul(big.NewInt(t), big.NewInt(2*int64(rate)))
	n.Add(n, big.NewInt(timescale))
	d := big.NewInt(2 * timescale)
	q := new(big.Int).Div(n, d) // Euclidean: the floor, d being positive
	if !q.IsInt64() {
		if q.Sign() < 0 {
			return math.MinInt64 / 4
		}
		return math.MaxInt64 / 4
	}
	return q.Int64()
}

// audioConfig is the FFmpeg configuration of the audio calls: the
// decoder's limits with the audio allow lists.
func (l Limits) audioConfig() av.Config {
	c := l.avConfig(1, 1)
	c.Formats, c.Codecs = av.DefaultAudioFormats, av.DefaultAudioCodecs
	return c
}

// probeAudio reads the audio stream of member m (index i) from its
// header. A file without one is av.ErrNoAudio.
func probeAudio(m *Member, i int, lim Limits) (*AudioInfo, bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), lim.SampleDeadline)
	defer cancel()
	a, err := av.ProbeAudio(ctx, m.Data, lim.audioConfig())
	if err != nil {
		return nil, false, err
	}
	info := &AudioInfo{Codec: a.Codec, SampleRate: a.SampleRate, Channels: a.Channels, Member: i}
	if a.TimeBase.Num > 0 && a.TimeBase.Den > 0 {
		info.Timescale = int64(a.TimeBase.Den)
		info.Start = a.StartTime * int64(a.TimeBase.Num)
		info.Duration = a.Duration * int64(a.TimeBase.Num)
	}
	return info, a.HasVideo, nil
}

// recordAudio finds the audio of a sample being parsed with audio output
// on: the clip's audio track (video is the clip's member index, -1 for
// none), else the first audio member (audio, -1 for none). A clip
// without sound and a sample without an audio member give nil.
func recordAudio(s *Sample, video, audio int, lim Limits) (*AudioInfo, error) {
	if video >= 0 {
		info, _, err := probeAudio(&s.Members[video], video, lim)
		switch {
		case err == nil:
			return info, nil
		case !errors.Is(err, av.ErrNoAudio):
			return nil, newSampleError(s, s.Members[video].Name, fmt.Errorf("audio track: %w", err))
		}
	}
	if audio < 0 {
		return nil, nil
	}
	info, _, err := probeAudio(&s.Members[audio], audio, lim)
	if err != nil {
		return nil, newSampleError(s, s.Members[audio].Name, err)
	}
	return info, nil
}

// audioOnlyClip reports whether member m, a clip whose container parser
// found no video track, is a file of sound alone (an .mp4 or .webm with
// only an audio track), as FFmpeg reads it.
func audioOnlyClip(m *Member, i int, lim Limits) bool {
	_, hasVideo, err := probeAudio(m, i, lim)
	return err == nil && !hasVideo
}

// audioSpan returns the samples of a sample's audio output at rate: the
// span of a clip's sampled frames (AudioSpan), or an audio sample's
// whole stream, from its start for its duration.
func (d *Decoder) audioSpan(rec *Record, rate int) (first, count int64, err error) {
	switch {
	case rec.Video != nil:
		// The frames Decode samples; a segment's start depends on the
		// sample's epoch and key, which the record carries.
		first, count = AudioSpan(rec.Video, d.ClipTargets(&Sample{Key: rec.Key, Epoch: rec.Epoch}, rec.Video), rate)
	case rec.Audio != nil:
		a := rec.Audio
		if a.Timescale <= 0 || a.Duration <= 0 {
			return 0, 0, fmt.Errorf("%w: the audio's container states no duration", ErrCorrupt)
		}
		first = ticksToSamples(a.Start, a.Timescale, rate)
		count = ticksToSamples(a.Start+a.Duration, a.Timescale, rate) - first
	}
	limit := int64(d.opts.Limits.MaxAudioDuration.Seconds() * float64(rate))
	if count > limit {
		return 0, 0, fmt.Errorf("%w: %.1f s of audio, limit %v (MaxAudioDuration)", ErrLimit, float64(count)/float64(rate), d.opts.Limits.MaxAudioDuration)
	}
	return first, max(count, 0), nil
}

// DecodeAudio decodes the audio Decode gives sample s with rec, its
// record from ParseRecordFor under the decoder's options, for a caller
// that decodes the sample's clip in tasks: nil when audio output is off
// or the sample is neither a clip nor an audio sample (Audio documents
// the span and the layout). A clip without sound gives silence, Missing
// set. A failure is a *SampleError naming the member.
func (d *Decoder) DecodeAudio(ctx context.Context, s *Sample, rec *Record) (*Audio, error) {
	ctx, cancel := d.deadline(ctx)
	defer cancel()
	return d.decodeAudio(ctx, s, rec)
}

func (d *Decoder) decodeAudio(ctx context.Context, s *Sample, rec *Record) (*Audio, error) {
	rate, channels := audioOptions(d.opts)
	if rate == 0 || rec == nil || (rec.Modality != ModalityVideo && rec.Modality != ModalityAudio) {
		return nil, nil
	}
	member := ""
	if rec.Audio != nil && rec.Audio.Member >= 0 && rec.Audio.Member < len(s.Members) {
		member = s.Members[rec.Audio.Member].Name
	} else if rec.Video != nil && rec.Video.Member >= 0 && rec.Video.Member < len(s.Members) {
		member = s.Members[rec.Video.Member].Name
	}
	first, count, err := d.audioSpan(rec, rate)
	if err != nil {
		return nil, newSampleError(s, member, err)
	}
	a := &Audio{Rate: rate, Channels: channels, First: first, PCM: make([]float32, count*int64(channels))}
	if rec.Audio == nil || rec.Audio.Member < 0 || rec.Audio.Member >= len(s.Members) {
		a.Missing = true
		return a, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, newSampleError(s, member, err)
	}
	_, err = av.DecodeAudio(ctx, s.Members[rec.Audio.Member].Data, d.opts.Limits.audioConfig(), first, count, rate, channels, a.PCM)
	switch {
	case errors.Is(err, av.ErrNoAudio):
		clear(a.PCM)
		a.Missing = true
	case err != nil:
		return nil, newSampleError(s, member, err)
	}
	return a, nil
}

// SampleMD5sFor is SampleMD5s under a decoder's options: with audio
// output on (opts.AudioRate) it accepts audio samples and adds the MD5
// of the audio Decode gives the sample (Audio.MD5: its float32 PCM,
// little-endian, channel after channel) as a last entry with Audio set.
func SampleMD5sFor(ctx context.Context, s *Sample, opts Options) ([]MemberMD5s, error) {
	d := NewDecoder(opts)
	audio := d.opts.AudioRate > 0
	p, err := resolvePayload(s, nil, d.opts.Limits, audio)
	if err != nil {
		return nil, err
	}
	out, err := payloadMD5s(ctx, s, p, d.opts.Limits)
	if err != nil || !audio {
		return out, err
	}
	a, err := d.DecodeAudio(ctx, s, p.rec)
	if err != nil || a == nil {
		return out, err
	}
	name := ""
	if p.rec.Audio != nil {
		name = s.Members[p.rec.Audio.Member].Name
	} else if p.video != nil {
		name = p.video.Name
	}
	return append(out, MemberMD5s{Member: name, Audio: true, MD5s: []string{a.MD5()}}), nil
}

// MaxAudioBytes returns the most bytes of audio output one sample may
// have under opts (its Limits' MaxAudioDuration at its rate and
// channels): 0 when the output is off.
func MaxAudioBytes(opts Options) int64 {
	rate, channels := audioOptions(opts)
	if rate == 0 {
		return 0
	}
	d := opts.Limits.withDefaults().MaxAudioDuration
	return 4 * int64(math.Ceil(d.Seconds()*float64(rate))) * int64(channels)
}

// AudioBytes returns the bytes of the audio output a decoder with opts
// gives a sample of record rec (4 per sample and channel): 0 when the
// output is off or the sample has none, for a decoded-memory budget.
func AudioBytes(rec *Record, opts Options) int64 {
	if opts.AudioRate <= 0 {
		return 0
	}
	return NewDecoder(opts).audioBytes(rec)
}

func (d *Decoder) audioBytes(rec *Record) int64 {
	rate, channels := audioOptions(d.opts)
	if rate == 0 || rec == nil || (rec.Modality != ModalityVideo && rec.Modality != ModalityAudio) {
		return 0
	}
	_, count, err := d.audioSpan(rec, rate)
	if err != nil {
		return 0
	}
	return 4 * count * int64(channels)
}
