package launcher

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/datahelix/datahelix/internal/gen/gentest"
)

// TestTrainTransformsSameUnderEveryLoader trains 2 real ranks under
// mpirun with random transforms that vary the tensors' shapes (native
// aspect padded to 4 pixels, fps sampling) with the torch and the helix
// loader: every sample reaches its PyTorch trainer with the same shape
// and pixels under both, although helix decodes some on the rank that
// did not read them (their epoch crosses MPI with their bytes).
func TestTrainTransformsSameUnderEveryLoader(t *testing.T) {
	needTorch(t)
	data := gentest.Tiny(t)
	dir := t.TempDir()
	flags := []string{"--steps", "8", "--resize", "native", "--pad-to", "4", "--hflip", "0.5", "--frame-sampling", "fps", "--fps", "4"}
	got := map[string]map[string][3]any{}
	for _, k := range []string{"torch", "helix"} {
		out := filepath.Join(dir, k)
		log, err := mpirunMain(t, 2, trainArgs(data, "tf"+k, append(flags, "--loader", k), "--out", out, "--md5")...)
		if err != nil {
			t.Fatalf("%s: %v\n%s", k, err, log)
		}
		got[k] = map[string][3]any{}
		for _, o := range readTrainers(t, out, 2) {
			for id, v := range o.MD5s {
				got[k][id] = v
			}
		}
		leftovers(t, "tf"+k)
	}
	if len(got["torch"]) != 32 {
		t.Fatalf("torch: %d samples, want 32 (8 steps of 2 ranks x 2)", len(got["torch"]))
	}
	shapes := map[string]bool{}
	moved := 0
	for id, want := range got["torch"] {
		shapes[fmt.Sprint(want[0])] = true
		h := got["helix"][id]
		if fmt.Sprint(h[:2]) != fmt.Sprint(want[:2]) {
			t.Errorf("sample %s: helix delivered %v, torch %v", id, h[:2], want[:2])
		}
		if h[2] == true {
			moved++
		}
	}
	t.Logf("helix trained %d of %d samples on the rank that did not read them", moved, len(got["helix"]))
	if len(shapes) < 3 {
		t.Errorf("%d distinct shapes %v, want the transforms to vary them", len(shapes), shapes)
	}
}
