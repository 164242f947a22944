package pace

import (
	"os"
	"syscall"
	"time"
	"unsafe"
)

// fdTimer is a timerfd(2) registered with Go's poller; the goroutine that
// waits on it holds no processor meanwhile.
type fdTimer struct {
	f   *os.File // nil: timerfd unavailable, fall back to time.Sleep
	fd  uintptr  // f's descriptor: f.Fd() would make f blocking, and lose the poller
	buf [8]byte
}

func newFDTimer() fdTimer {
	const clockMonotonic = 1
	fd, _, errno := syscall.Syscall(syscall.SYS_TIMERFD_CREATE, clockMonotonic, syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if errno != 0 {
		return fdTimer{}
	}
	return fdTimer{f: os.NewFile(fd, "timerfd"), fd: fd}
}

// sleep waits d (d > 0), or until due by the runtime's deadline if that
// comes first (a busy process notices the deadline before the poller).
func (p *fdTimer) sleep(d time.Duration, due time.Time) {
	if p.f == nil {
		time.Sleep(d)
		return
	}
	spec := [2]syscall.Timespec{{}, syscall.NsecToTimespec(int64(max(d, 1)))} // interval, value
	if _, _, errno := syscall.Syscall6(syscall.SYS_TIMERFD_SETTIME, p.fd, 0, uintptr(unsafe.Pointer(&spec)), 0, 0, 0); errno != 0 {
		time.Sleep(d)
		return
	}
	if p.f.SetReadDeadline(due) != nil {
		time.Sleep(d)
		return
	}
	p.f.Read(p.buf[:]) // the deadline's error is the wake-up too
}

func (p *fdTimer) close() {
	if p.f != nil {
		p.f.Close()
	}
}
