package bench

import (
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"github.com/datahelix/datahelix/internal/metrics"
)

// TestLinksReport checks the links section's headline and plot from
// made-up results: the headline takes helix over torch at the slowest
// and the fastest link, and the plot is a PNG of both panels.
func TestLinksReport(t *testing.T) {
	results := map[string][]metrics.Summary{}
	for i, rate := range LinkRates {
		results[rate] = []metrics.Summary{
			{Loader: "torch", ThroughputSPS: 100},
			{Loader: "helix", ThroughputSPS: 90 + 10*float64(i), BytesMovedPerStep: 1000 * float64(i)},
			{Loader: "helix-nogate", ThroughputSPS: 70 + 15*float64(i), BytesMovedPerStep: 4000},
		}
	}
	if got, want := linksHeadline(results), "helix 0.90x torch's throughput at 20mbit, 1.20x at unlimited"; got != want {
		t.Errorf("headline %q, want %q", got, want)
	}
	path := filepath.Join(t.TempDir(), "links.png")
	if err := plotLinks(path, results); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() <= b.Dy() {
		t.Errorf("plot is %dx%d, want two panels side by side", b.Dx(), b.Dy())
	}
}
