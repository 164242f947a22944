package awake

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// process is one busy loop: a shell that spins until tokbench is gone
// (kill -0 on its pid fails), so that a tokbench killed outright leaves
// nothing spinning.
type process struct {
	cmd *exec.Cmd
	cpu int
}

// loop is the busy loop each process runs: a shell builtin per turn, no
// fork, and the check that tokbench ($1: its pid, given rather than read
// as the shell's parent, which an idle-priority shell may read only
// after tokbench is gone) is still there.
const loop = `while kill -0 "$1" 2>/dev/null; do :; done`

// Start starts a busy loop at SCHED_IDLE on each processor this process
// may run on. Each is started from a thread that first takes the loop's
// processor as its only one and the idle policy: a child inherits both
// (neither needs a privilege), so the loop never runs anywhere else or at
// any other priority, and the thread ends with its goroutine.
func Start() (*Keeper, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("keep awake: the process's processors: %w", err)
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		return nil, fmt.Errorf("keep awake: %w", err)
	}
	k := &Keeper{start: time.Now()}
	for cpu := range 1024 {
		if !set.IsSet(cpu) {
			continue
		}
		p, err := startOn(sh, cpu)
		if err != nil {
			k.Stop()
			return nil, fmt.Errorf("keep awake: processor %d: %w", cpu, err)
		}
		k.procs = append(k.procs, p)
	}
	if len(k.procs) == 0 {
		return nil, errors.New("keep awake: the process may run on no processor")
	}
	return k, nil
}

// startOn starts one loop on cpu, from a thread of its own that ends
// with this call (its goroutine never unlocks it).
func startOn(sh string, cpu int) (*process, error) {
	type result struct {
		p   *process
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread, idle now, ends with the goroutine
		var one unix.CPUSet
		one.Set(cpu)
		if err := unix.SchedSetaffinity(0, &one); err != nil {
			done <- result{err: err}
			return
		}
		if err := unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: schedIdle}, 0); err != nil {
			done <- result{err: err}
			return
		}
		cmd := exec.Command(sh, "-c", loop, "sh", strconv.Itoa(os.Getpid()))
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a Ctrl-C at the terminal is tokbench's to handle
		if err := cmd.Start(); err != nil {
			done <- result{err: err}
			return
		}
		done <- result{p: &process{cmd: cmd, cpu: cpu}}
	}()
	r := <-done
	return r.p, r.err
}

// schedIdle is Linux's SCHED_IDLE policy.
const schedIdle = 5

// Stop ends the loops and says what they cost. It may be called more than
// once (the later calls report nothing), and on a nil Keeper.
func (k *Keeper) Stop() Usage {
	if k == nil {
		return Usage{}
	}
	u := Usage{CPUs: len(k.procs), Wall: time.Since(k.start)}
	for _, p := range k.procs {
		p.cmd.Process.Kill()
		if p.cmd.Wait(); p.cmd.ProcessState != nil {
			u.CPUSeconds += (p.cmd.ProcessState.UserTime() + p.cmd.ProcessState.SystemTime()).Seconds()
		}
	}
	k.procs = nil
	return u
}
