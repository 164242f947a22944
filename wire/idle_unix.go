//go:build unix

package wire

import (
	"net"
	"syscall"
)

// peekIdle looks at an idle connection's socket without waiting and without
// taking any byte from it: whether bytes wait, the peer closed it, or all
// is quiet (the socket does not block, so the look says EAGAIN).
func peekIdle(nc net.Conn) idleState {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return idleUnknown
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return idleUnknown
	}
	var (
		n    int
		rerr error
		b    [1]byte
	)
	if err := raw.Read(func(fd uintptr) bool {
		for {
			n, _, rerr = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			if rerr != syscall.EINTR {
				return true
			}
		}
	}); err != nil {
		return idleClosed
	}
	switch {
	case rerr == syscall.EAGAIN:
		return idleQuiet
	case rerr != nil || n == 0:
		return idleClosed
	}
	return idleBytes
}
