//go:build unix

package benchmark

import "syscall"

func openFileLimit() int {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) != nil || l.Cur > 1<<30 {
		return 0
	}
	return int(l.Cur)
}
