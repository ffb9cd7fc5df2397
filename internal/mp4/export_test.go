package mp4

// The box builders and checks of this package's tests, for its external
// tests (decode_test.go), which decode the files they build.
var (
	Box                = box
	FullBox            = fbox
	U32s               = u32s
	SoundTrak          = soundTrak
	ReplaceBox         = replaceBox
	TwoVideoClips      = twoVideoClips
	CompareProbePrefix = compareProbePrefix
)
