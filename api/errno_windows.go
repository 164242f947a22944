//go:build windows

package api

import "syscall"

// Winsock's own codes: Go's syscall.ECONNREFUSED on Windows is an invented
// value that no socket call returns.
var (
	refusedErrno = syscall.Errno(10061)                                                                   // WSAECONNREFUSED
	resetErrno   = []syscall.Errno{syscall.Errno(10054), syscall.Errno(10053), syscall.ERROR_BROKEN_PIPE} // WSAECONNRESET, WSAECONNABORTED
)
