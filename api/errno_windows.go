//go:build windows

package api

import (
	"errors"
	"syscall"
)

// Winsock's own codes: Go's syscall.ECONNREFUSED on Windows is an invented
// value that no socket call returns.
var (
	refusedErrno = syscall.Errno(10061)                                                                   // WSAECONNREFUSED
	resetErrno   = []syscall.Errno{syscall.Errno(10054), syscall.Errno(10053), syscall.ERROR_BROKEN_PIPE} // WSAECONNRESET, WSAECONNABORTED
)

// isErrno reports whether err wraps one of the errnos.
func isErrno(err error, errnos ...syscall.Errno) bool {
	for _, e := range errnos {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
