package bridge

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Conn is one end of a SOCK_SEQPACKET Unix socket: every Send is one
// message and every Recv returns one whole message.
type Conn struct {
	uc  *net.UnixConn
	buf []byte
	oob []byte
}

// ErrClosed is what Recv returns when the peer closed the connection.
var ErrClosed = errors.New("bridge: the peer closed the connection")

// Pair makes a connected socket pair: the server's Conn, and the file of
// the other end for a child process (exec.Cmd.ExtraFiles), which the
// caller closes once the child has started. Nothing is named on a file
// system.
func Pair() (*Conn, *os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("bridge: socketpair: %w", err)
	}
	c, err := fileConn(os.NewFile(uintptr(fds[0]), "datahelix-bridge"))
	if err != nil {
		unix.Close(fds[1])
		return nil, nil, err
	}
	return c, os.NewFile(uintptr(fds[1]), "datahelix-bridge-client"), nil
}

// FileConn makes a Conn of an inherited socket file (a client's end).
func FileConn(f *os.File) (*Conn, error) { return fileConn(f) }

func fileConn(f *os.File) (*Conn, error) {
	defer f.Close() // net.FileConn dups it
	nc, err := net.FileConn(f)
	if err != nil {
		return nil, fmt.Errorf("bridge: %s: %w", f.Name(), err)
	}
	uc, ok := nc.(*net.UnixConn)
	if !ok {
		nc.Close()
		return nil, fmt.Errorf("bridge: %s is not a Unix socket", f.Name())
	}
	return newConn(uc), nil
}

func newConn(uc *net.UnixConn) *Conn {
	// A packet cannot exceed the send buffer (about 208 KiB by default).
	uc.SetWriteBuffer(MaxMessage + HeaderSize)
	return &Conn{uc: uc, buf: make([]byte, MaxMessage), oob: make([]byte, unix.CmsgSpace(4))}
}

// SocketName is the abstract socket name datahelix serve listens on for
// rank of job: "datahelix-JOB-RANK" (docs/bridge.md).
func SocketName(job string, rank int) string { return fmt.Sprintf("datahelix-%s-%d", job, rank) }

// Listener accepts clients on an abstract Unix socket, which has no file
// to leave behind and goes with the process.
type Listener struct {
	l *net.UnixListener
}

// Listen listens on the abstract socket name.
func Listen(name string) (*Listener, error) {
	l, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: "@" + name, Net: "unixpacket"})
	if err != nil {
		return nil, fmt.Errorf("bridge: listen on @%s: %w", name, err)
	}
	return &Listener{l: l}, nil
}

// Dial connects to the abstract socket name (clients, tests).
func Dial(name string) (*Conn, error) {
	uc, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: "@" + name, Net: "unixpacket"})
	if err != nil {
		return nil, fmt.Errorf("bridge: connect to @%s: %w", name, err)
	}
	return newConn(uc), nil
}

// ErrTimeout is what Accept and Recv return when their deadline passes.
var ErrTimeout = errors.New("bridge: timed out")

// Accept waits until deadline (zero: forever) for a client and returns
// it with the uid of its process.
func (l *Listener) Accept(deadline time.Time) (*Conn, int, error) {
	if err := l.l.SetDeadline(deadline); err != nil {
		return nil, 0, err
	}
	uc, err := l.l.AcceptUnix()
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, 0, ErrTimeout
		}
		return nil, 0, err
	}
	c := newConn(uc)
	uid, err := c.peerUID()
	if err != nil {
		c.Close()
		return nil, 0, err
	}
	return c, uid, nil
}

// Close stops listening.
func (l *Listener) Close() error { return l.l.Close() }

// peerUID is the uid of the process at the other end (SO_PEERCRED).
func (c *Conn) peerUID() (int, error) {
	raw, err := c.uc.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if cerr != nil {
		return 0, fmt.Errorf("bridge: peer credentials: %w", cerr)
	}
	return int(cred.Uid), nil
}

// Send sends one packet, with fds passed as SCM_RIGHTS when given.
func (c *Conn) Send(p []byte, fds ...int) error {
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	n, _, err := c.uc.WriteMsgUnix(p, oob, nil)
	if err != nil {
		if errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) {
			return ErrClosed
		}
		return fmt.Errorf("bridge: send: %w", err)
	}
	if n != len(p) {
		return fmt.Errorf("bridge: sent %d of %d bytes", n, len(p))
	}
	return nil
}

// Recv waits until deadline (zero: forever) for one message. A file
// descriptor that came with it is returned (-1 when none); the caller
// owns it. The message's payload is valid until the next Recv.
func (c *Conn) Recv(deadline time.Time) (Message, int, error) {
	if err := c.uc.SetReadDeadline(deadline); err != nil {
		return Message{}, -1, err
	}
	n, oobn, flags, _, err := c.uc.ReadMsgUnix(c.buf, c.oob)
	if errors.Is(err, syscall.ECONNRESET) {
		// The peer closed with messages of ours unread: Linux reports
		// that once, before the messages the peer sent before closing,
		// which are still to be read (its last NEXT and BYE).
		n, oobn, flags, _, err = c.uc.ReadMsgUnix(c.buf, c.oob)
	}
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return Message{}, -1, ErrTimeout
	case errors.Is(err, io.EOF), errors.Is(err, syscall.ECONNRESET):
		return Message{}, -1, ErrClosed
	case err != nil:
		return Message{}, -1, fmt.Errorf("bridge: receive: %w", err)
	case n == 0 && oobn == 0:
		return Message{}, -1, ErrClosed
	}
	fd := -1
	if oobn > 0 {
		if msgs, err := unix.ParseSocketControlMessage(c.oob[:oobn]); err == nil {
			for _, m := range msgs {
				if fds, err := unix.ParseUnixRights(&m); err == nil {
					for _, f := range fds {
						if fd < 0 {
							fd = f
						} else {
							unix.Close(f)
						}
					}
				}
			}
		}
	}
	if flags&unix.MSG_TRUNC != 0 {
		if fd >= 0 {
			unix.Close(fd)
		}
		return Message{}, -1, fmt.Errorf("%w: longer than %d bytes", ErrMessage, MaxMessage)
	}
	m, err := Decode(c.buf[:n])
	if err != nil && fd >= 0 {
		unix.Close(fd)
		fd = -1
	}
	return m, fd, err
}

// Close closes the connection; the peer's next Recv sees ErrClosed.
func (c *Conn) Close() error { return c.uc.Close() }
