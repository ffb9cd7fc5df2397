package launcher

import (
	"flag"
	"fmt"

	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/internal/bridge"
	"github.com/datahelix/datahelix/internal/cli"
	"github.com/datahelix/datahelix/internal/decoding"
)

// audioFlags registers --audio-rate and --audio-channels (run, train,
// serve, decode): the decoder's audio output, off by default.
func audioFlags(fs *flag.FlagSet, rate, channels *int) {
	fs.IntVar(rate, "audio-rate", 0, fmt.Sprintf("decode each clip's audio to float32 PCM at this sample rate in `Hz` (1..%d), cut to the span of its sampled frames, "+
		"and accept samples of sound alone (m4a, mp3, wav, flac, ogg, opus, or an MP4/WebM with only an audio track); a clip without sound gives silence. "+
		"The trainer gets it as batch[\"audio\"] (see docs/bridge.md). 0: no audio", decoding.MaxAudioRate))
	fs.IntVar(channels, "audio-channels", 0, fmt.Sprintf("`channels` of the audio output, 1..%d (default 1 with --audio-rate: mono is copied to every channel, other layouts mixed by FFmpeg)", decoding.MaxAudioChannels))
}

// checkAudioFlags checks --audio-rate and --audio-channels, as a usage
// error naming the flag.
func checkAudioFlags(cmd string, rate, channels int) error {
	switch {
	case rate < 0 || rate > decoding.MaxAudioRate:
		return cli.FlagErrorf(cmd, "audio-rate", rate, "want 0 (no audio) or 1..%d Hz", decoding.MaxAudioRate)
	case channels != 0 && rate == 0:
		return cli.FlagErrorf(cmd, "audio-channels", channels, "give --audio-rate too: there is no audio output without it")
	case channels < 0 || channels > decoding.MaxAudioChannels:
		return cli.FlagErrorf(cmd, "audio-channels", channels, "want 1..%d", decoding.MaxAudioChannels)
	}
	return nil
}

// audioChannels is the audio output's channel count of opts: 0 when it
// is off, else AudioChannels or its default.
func audioChannels(opts decode.Options) int {
	switch {
	case opts.AudioRate <= 0:
		return 0
	case opts.AudioChannels <= 0:
		return decoding.DefaultAudioChannels
	}
	return opts.AudioChannels
}

// audioBytes is the most audio output one sample may carry under opts,
// with the ring's alignment: 0 when the output is off.
func audioBytes(opts decode.Options) int64 {
	if opts.AudioRate <= 0 {
		return 0
	}
	return decoding.MaxAudioBytes(opts) + bridge.AudioAlign
}
