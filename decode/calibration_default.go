package decode

// defaultCalibrationMachine says where defaultCoefficients come from.
const defaultCalibrationMachine = "initial estimates from published decoder throughput (not yet measured here)"

// defaultCoefficients are the built-in calibration: microseconds per
// feature unit, in the order costFeatures documents.
var defaultCoefficients = map[string]CostFeatures{
	// tasks, µs/MP decoded, µs/MP reordered, µs/MB, µs/MP converted, µs/MP out, µs/1000 frames
	"video/h264": {1500, 2500, 1200, 2000, 1500, 2000, 300},
	"video/hevc": {2000, 4000, 2000, 2000, 1500, 2000, 300},
	"video/vp9":  {1500, 4000, 2000, 2000, 1500, 2000, 300},
	"video/vp8":  {1500, 3000, 1500, 2000, 1500, 2000, 300},
	"video/av1":  {3000, 5000, 2500, 2000, 1500, 2000, 300},
	// per image, µs/MP JPEG decoded, µs/MP JPEG source, µs/MB JPEG,
	// µs/MP progressive, µs/MP PNG, µs/MP WebP, µs/MB PNG and WebP
	"image/jpeg": {800, 5000, 500, 2000, 5000, 20000, 15000, 3000},
	"image/png":  {800, 5000, 500, 2000, 5000, 20000, 15000, 3000},
	"image/webp": {800, 5000, 500, 2000, 5000, 20000, 15000, 3000},
	"document":   {800, 5000, 500, 2000, 5000, 20000, 15000, 3000},
	// per sample, µs/1000 tokens, µs/MB
	"text": {20, 10, 1000},
}
