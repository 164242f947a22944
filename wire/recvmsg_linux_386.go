//go:build linux && 386

package wire

import "syscall"

// recvmsg reads into p with the control messages into oob. On 386 the
// call goes through socketcall, which package syscall wraps.
func recvmsg(fd uintptr, p, oob []byte) (n, oobn int, err error) {
	n, oobn, _, _, err = syscall.Recvmsg(int(fd), p, oob, 0)
	return n, oobn, err
}
