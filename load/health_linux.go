package load

import (
	"os"
	"syscall"
	"time"
	"unsafe"
)

// preciseTimer waits short intervals on a timerfd(2) registered with the Go
// poller: the kernel's high-resolution timer makes the poller return on
// time, and the waiting goroutine holds no processor meanwhile (a blocking
// nanosleep would, until the runtime noticed). Go's own timers wake up to
// 1 ms late when the process is idle, because the poller waits in whole
// milliseconds.
type preciseTimer struct {
	f   *os.File // nil: timerfd unavailable, fall back to time.Sleep
	buf [8]byte
}

func newPreciseTimer() *preciseTimer {
	const clockMonotonic, tfdNonblock, tfdCloexec = 1, syscall.O_NONBLOCK, syscall.O_CLOEXEC
	fd, _, errno := syscall.Syscall(syscall.SYS_TIMERFD_CREATE, clockMonotonic, tfdNonblock|tfdCloexec, 0)
	if errno != 0 {
		return &preciseTimer{}
	}
	return &preciseTimer{f: os.NewFile(fd, "timerfd")}
}

// sleep waits d (d > 0).
func (p *preciseTimer) sleep(d time.Duration) {
	if p.f == nil {
		time.Sleep(d)
		return
	}
	spec := [2]syscall.Timespec{{}, syscall.NsecToTimespec(int64(max(d, 1)))} // interval, value
	if _, _, errno := syscall.Syscall6(syscall.SYS_TIMERFD_SETTIME, p.f.Fd(), 0, uintptr(unsafe.Pointer(&spec)), 0, 0, 0); errno != 0 {
		time.Sleep(d)
		return
	}
	p.f.Read(p.buf[:])
}

func (p *preciseTimer) close() {
	if p.f != nil {
		p.f.Close()
	}
}

// processCPU is the process's user + system CPU time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
