package communicator

import (
	"time"

	"golang.org/x/sys/unix"
)

// awaitPipeRead waits until whoever reads the pipe open on fd has read
// everything written into it, or max has passed, polling the unread
// count (TIOCINQ, Linux's FIONREAD) every millisecond. It returns at
// once when fd is not a pipe (a file, a terminal, a socket) or cannot be
// queried.
//
// Abort calls it on stderr before MPI_Abort: MPICH's mpiexec, which reads
// every rank's stderr through a pipe, can end the job as soon as the
// abort reaches it, before forwarding the line the rank wrote just
// before it, and the job then ended without saying why (a few runs in a
// hundred; 0 with this wait).
func awaitPipeRead(fd int, max time.Duration) {
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFIFO {
		return
	}
	for end := time.Now().Add(max); time.Now().Before(end); time.Sleep(time.Millisecond) {
		if n, err := unix.IoctlGetInt(fd, unix.TIOCINQ); err != nil || n == 0 {
			return
		}
	}
}
