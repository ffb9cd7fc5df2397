package costmodel

// defaultCalibrationMachine says where defaultCoefficients come from.
const defaultCalibrationMachine = "measured with datahelix costmodel --calibrate-out (thread CPU time, fastest of 3, F=8, S=224) on a shared 2-vCPU VM, 2026-12-02: 1288 samples of every gen preset at seed 2 (120 each, 60 for webvid, panda70m, activitynet) plus 30 AV1, 20 HEVC, 20 PNG and 20 WebP samples made with the ffmpeg CLI; video/vp8 borrows VP9's coefficients (no VP8 in the presets)"

// defaultCoefficients are the built-in calibration: microseconds per
// feature unit, in the order costFeatures documents. They were fitted on
// data generated with seed 2; the presets are evaluated at seed 1.
var defaultCoefficients = map[string]featureVector{
	// tasks, µs/MP decoded, µs/MP reordered, µs/MB, µs/MP converted, µs/MP out, µs/1000 frames,
	// µs per ms of the audio track's modelled cost (1000: as the audio model says)
	"video/h264": {2050, 436, 725, 85000, 1750, 3210, 4610, 1000},
	"video/hevc": {1350, 3270, 1590, 17400, 4220, 107, 1020, 1000},
	"video/vp9":  {1280, 1980, 2190, 84800, 0, 1300, 0, 1000},
	"video/vp8":  {1280, 1980, 2190, 84800, 0, 1300, 0, 1000}, // VP9's: no VP8 in the presets
	"video/av1":  {5640, 3660, 2730, 0, 0, 8060, 3200, 1000},
	// per image, µs/MP JPEG decoded, µs/MP JPEG source, µs/MB JPEG,
	// µs/MP progressive, µs/MP PNG, µs/MP WebP, µs/MB PNG and WebP
	"image/jpeg": {515, 12800, 545, 9300, 6840, 21900, 16400, 3280},
	"image/png":  {618, 5460, 546, 2190, 5460, 29000, 16400, 7230},
	"image/webp": {1040, 5460, 546, 2190, 5460, 21900, 29000, 108000},
	"document":   {575, 10100, 1680, 7330, 8050, 22800, 44200, 11700},
	// per sample, µs/1000 tokens, µs/MB
	"text": {4.06, 18.5, 2680},
	// per call (open, decoder setup), µs per second of audio decoded, at
	// 16 kHz mono and 48 kHz stereo output alike: internal/decoding's
	// TestCalibrateAudioCost (DATAHELIX_AUDIO_CALIBRATE=1), mean thread
	// CPU time of 15 calls over spans of 30 s 48 kHz stereo tones on the
	// same shared 2-vCPU VM, 2026-12-06
	"audio/aac":       {405, 615},
	"audio/mp3":       {605, 806},
	"audio/opus":      {1310, 1552},
	"audio/vorbis":    {914, 504},
	"audio/flac":      {475, 711},
	"audio/pcm_s16le": {1262, 267},
}
