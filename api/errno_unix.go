//go:build !windows

package api

import "syscall"

var (
	refusedErrno = syscall.ECONNREFUSED
	resetErrno   = []syscall.Errno{syscall.ECONNRESET, syscall.EPIPE, syscall.ECONNABORTED}
)
