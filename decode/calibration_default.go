package decode

// defaultCalibrationMachine says where defaultCoefficients come from.
const defaultCalibrationMachine = "initial estimates from published decoder throughput (not yet measured here)"

// defaultCoefficients are the built-in calibration: microseconds per
// feature unit, in the order costFeatures documents.
var defaultCoefficients = map[string]CostFeatures{
	//                tasks, µs/MP decoded, µs/MB, µs/MP converted, µs/MP out, µs/1000 frames
	"video/h264": {1500, 2500, 2000, 1500, 2000, 300},
	"video/hevc": {2000, 4000, 2000, 1500, 2000, 300},
	"video/vp9":  {1500, 4000, 2000, 1500, 2000, 300},
	"video/vp8":  {1500, 3000, 2000, 1500, 2000, 300},
	"video/av1":  {3000, 5000, 2000, 1500, 2000, 300},
	//                1, µs/MP decoded, µs/MB, µs/MP progressive, µs/MP out, µs/image
	"image/jpeg": {50, 5000, 2000, 5000, 10000, 50},
	"image/png":  {50, 12000, 5000, 0, 10000, 50},
	"image/webp": {50, 10000, 3000, 0, 10000, 50},
	"document":   {100, 5000, 2000, 5000, 10000, 50},
	//                1, µs/1000 tokens, µs/MB
	"text": {20, 10, 1000, 0, 0, 0},
}
