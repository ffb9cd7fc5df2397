package mp4

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
