//go:build !windows

package api

import (
	"errors"
	"syscall"
)

var (
	refusedErrno = syscall.ECONNREFUSED
	resetErrno   = []syscall.Errno{syscall.ECONNRESET, syscall.EPIPE, syscall.ECONNABORTED}
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
