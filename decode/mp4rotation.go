package decode

import (
	"math"
)

// readMatrix reads into m the 3x3 matrix (row-major, as stored) of a
// full box of version v whose payload is p, at offset off0 of a version 0
// payload or off1 of a version 1 one; it leaves m alone for another
// version or a payload too short.
func readMatrix(m *[9]int32, p []byte, v uint8, off0, off1 int) {
	off := off0
	if v == 1 {
		off = off1
	}
	if v > 1 || len(p) < off+36 {
		return
	}
	for k := range m {
		m[k] = int32(be32(p, off+4*k))
	}
}

// displayRotation returns the rotation of the display matrix FFmpeg 5.1's
// mov demuxer gives a track, the tkhd matrix times the mvhd one
// (mov_read_tkhd), as av_display_rotation_get reads it: degrees
// counterclockwise, -180 to 180. FFmpeg exports no identity matrix, and
// none can be read from a degenerate one: both give 0.
func displayRotation(track, movie [9]int32) float64 {
	// res[i][j] = sum over e of track[i][e]*movie[e][j], shifted by the
	// fixed point of row e (16.16, 16.16, 2.30).
	var m [9]int32
	shift := [3]uint{16, 16, 30}
	for i := range 3 {
		for j := range 3 {
			var sum int64
			for e := range 3 {
				sum += int64(track[3*i+e]) * int64(movie[3*e+j]) >> shift[e]
			}
			m[3*i+j] = int32(sum)
		}
	}
	if m == [9]int32{0x10000, 0, 0, 0, 0x10000, 0, 0, 0, 1 << 30} {
		return 0
	}
	fp := func(k int) float64 { return float64(m[k]) / 0x10000 }
	s0, s1 := math.Hypot(fp(0), fp(3)), math.Hypot(fp(1), fp(4))
	if s0 == 0 || s1 == 0 {
		return 0
	}
	return -math.Atan2(fp(1)/s1, fp(0)/s0) * 180 / math.Pi
}

// Turn returns the clockwise turn, 0, 90, 180 or 270 degrees, that shows
// the clip upright, as the ffmpeg 5.1 CLI (get_rotation) and package av
// (av.StreamInfo.Rotation) read it from Rotation: rounded to whole
// degrees, then to the nearest multiple of 90.
func (v *VideoInfo) Turn() int {
	theta := -math.Round(v.Rotation)
	theta -= 360 * math.Floor(theta/360+0.9/360)
	angle := int(theta)
	if angle < 0 || angle >= 360 {
		angle = 0
	}
	return (angle + 45) / 90 % 4 * 90
}
