//go:build linux && !386

package wire

import (
	"syscall"
	"unsafe"
)

// recvmsg reads into p (len(p) > 0) with the control messages into oob.
// The socket is non-blocking, so the call cannot block: it goes straight
// to the kernel without telling the Go scheduler (syscall.RawSyscall). A
// system call the scheduler knows of invites it to hand the processor to
// another thread when the call is slow, and with thousands of streams
// (two reads a chunk) that hand-over and the wake-ups it brings cost more
// than the reads themselves.
func recvmsg(fd uintptr, p, oob []byte) (n, oobn int, err error) {
	var iov syscall.Iovec
	iov.Base = &p[0]
	iov.SetLen(len(p))
	msg := syscall.Msghdr{Iov: &iov, Iovlen: 1}
	msg.Control = &oob[0]
	msg.SetControllen(len(oob))
	r, _, errno := syscall.RawSyscall(syscall.SYS_RECVMSG, fd, uintptr(unsafe.Pointer(&msg)), 0)
	if errno != 0 {
		return 0, 0, errno
	}
	return int(r), int(msg.Controllen), nil
}
