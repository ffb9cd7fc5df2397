package cli

import (
	"os"
	"strconv"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal pair and returns its terminal end, or
// skips the test where the system has none.
func openPTY(t *testing.T) *os.File {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { master.Close() })
	unlock := int32(0)
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, master.Fd(), unix.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		t.Skipf("unlockpt: %v", e)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Skipf("ptsname: %v", err)
	}
	tty, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("open terminal: %v", err)
	}
	t.Cleanup(func() { tty.Close() })
	return tty
}

// TestIsTerminalSeesThroughSyncWriter is the progress bar of 'run': its
// ranks write to stderr through a *SyncWriter, which must be judged as the
// terminal it writes to, and a file behind one must not be.
func TestIsTerminalSeesThroughSyncWriter(t *testing.T) {
	tty := openPTY(t)
	if !IsTerminal(tty) {
		t.Fatalf("IsTerminal(%s) = false on a pseudo-terminal", tty.Name())
	}
	if !IsTerminal(&SyncWriter{W: tty}) {
		t.Errorf("IsTerminal(SyncWriter of a terminal) = false: run would draw no progress bar")
	}
	f, err := os.CreateTemp(t.TempDir(), "log")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if IsTerminal(&SyncWriter{W: f}) {
		t.Errorf("IsTerminal(SyncWriter of a file) = true: a batch log would fill with redraws")
	}
}
