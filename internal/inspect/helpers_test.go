package inspect

import (
	"os"
	"path/filepath"
	"testing"
)

// readImage reads a committed test image of package decode.
func readImage(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "decode", "testdata", "image", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}
