package launcher

import (
	"io"
	"testing"

	"github.com/datahelix/datahelix/internal/cli"
)

// TestRunSettingsCompareResolvedValues checks that ranks compare the
// settings as the runtime will use them: a flag left at 0 and the value 0
// stands for agree, another value does not.
func TestRunSettingsCompareResolvedValues(t *testing.T) {
	settings := func(args ...string) map[string]uint64 {
		t.Helper()
		var f runFlags
		fs := cli.NewFlags("run", "[flags]")
		f.register(fs)
		fs.SetOutput(io.Discard)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		if err := f.validate(); err != nil {
			t.Fatal(err)
		}
		m := map[string]uint64{}
		for _, s := range runSettings(&f) {
			m[s.Name] = s.Value
		}
		return m
	}
	const horizon, maxTasks, compressed = "--horizon (0 is max(2 x workers, 8))", "--max-tasks (0 is workers)", "--compressed-budget (bytes; 0 is 1024 MiB)"
	for _, tt := range []struct {
		name string
		a, b []string
		same bool
	}{
		{"horizon 0 is 8 with one worker", []string{"--workers", "1"}, []string{"--workers", "1", "--horizon", "8"}, true},
		{"horizon 4 is not 8", []string{"--workers", "1", "--horizon", "4"}, []string{"--workers", "1", "--horizon", "8"}, false},
		{"max-tasks 0 is workers", []string{"--workers", "2"}, []string{"--workers", "2", "--max-tasks", "2"}, true},
		{"compressed budget 0 is 1024 MiB", []string{"--compressed-budget", "0"}, []string{"--compressed-budget", "1024"}, true},
		{"compressed budget 512 is not 1024", []string{"--compressed-budget", "512"}, []string{"--compressed-budget", "1024"}, false},
	} {
		a, b := settings(tt.a...), settings(tt.b...)
		for _, name := range []string{horizon, maxTasks, compressed} {
			if _, ok := a[name]; !ok {
				t.Fatalf("runSettings has no %q", name)
			}
		}
		same := a[horizon] == b[horizon] && a[maxTasks] == b[maxTasks] && a[compressed] == b[compressed]
		if same != tt.same {
			t.Errorf("%s: %v and %v compare same = %v, want %v", tt.name, tt.a, tt.b, same, tt.same)
		}
	}
}
