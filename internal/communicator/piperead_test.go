package communicator

import (
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestAwaitPipeRead checks that awaitPipeRead returns once the reader
// has emptied the pipe, waits its whole limit when nobody reads, and
// does not wait on a file.
func TestAwaitPipeRead(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	unread := func() int {
		n, err := unix.IoctlGetInt(int(w.Fd()), unix.TIOCINQ)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	if _, err := w.WriteString("datahelix: rank 1 aborting the job\n"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	const limit = 300 * time.Millisecond
	awaitPipeRead(int(w.Fd()), limit)
	if took := time.Since(start); took < limit {
		t.Errorf("returned after %v with %d bytes unread and no reader; want the whole %v", took, unread(), limit)
	}

	go func() {
		time.Sleep(50 * time.Millisecond)
		buf := make([]byte, 1024)
		r.Read(buf)
	}()
	awaitPipeRead(int(w.Fd()), time.Minute)
	if n := unread(); n != 0 {
		t.Errorf("returned with %d bytes still in the pipe", n)
	}

	f, err := os.Create(t.TempDir() + "/log")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.WriteString("a line\n")
	start = time.Now()
	awaitPipeRead(int(f.Fd()), time.Minute)
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("waited %v on a regular file", took)
	}
}
