package awake

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tokbench/tokbench/internal/cgroup"
)

// process is one busy loop: a shell that spins until tokbench is gone.
type process struct {
	cmd *exec.Cmd
	cpu int
}

// loop is the busy loop each process runs, builtins only (no fork): it
// waits on its stdin until it was given its processor and policy, then
// spins while its parent is still tokbench ($1: its pid). The parent is
// read from /proc at each turn: a tokbench killed outright hands its
// children to another parent at once, before anyone reaps it (kill -0
// would go on succeeding on the zombie), and no reused pid can pass.
const loop = `p=$1; read -r _; while read -r s < /proc/$$/stat && set -- $s && [ "$4" = "$p" ]; do :; done`

// Start starts a busy loop at SCHED_IDLE on each processor this process
// may run on. Each loop is started held on its stdin, then given its
// processor alone and the idle policy (a process may lower its own
// child's priority without a privilege), then let go: none of tokbench's
// own threads changes. Under a CPU quota (a container's limit) it starts
// nothing: the loops would spend the quota tokbench itself shares.
func Start() (*Keeper, error) {
	if q := cpuQuota("/proc/self/cgroup", "/sys/fs/cgroup"); q != "" {
		return nil, fmt.Errorf("keep awake: tokbench runs under a CPU quota (%s), which busy loops would spend, its own time with it", q)
	}
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

// startOn starts one loop, held, gives it cpu alone and SCHED_IDLE, and
// lets it go.
func startOn(sh string, cpu int) (*process, error) {
	cmd := exec.Command(sh, "-c", loop, "sh", strconv.Itoa(os.Getpid()))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // a Ctrl-C at the terminal is tokbench's to handle
	hold, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{cmd: cmd, cpu: cpu}
	pid := cmd.Process.Pid
	var one unix.CPUSet
	one.Set(cpu)
	err = unix.SchedSetaffinity(pid, &one)
	if err == nil {
		err = unix.SchedSetAttr(pid, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: schedIdle}, 0)
	}
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, err
	}
	io.WriteString(hold, "go\n")
	hold.Close()
	return p, nil
}

// schedIdle is Linux's SCHED_IDLE policy.
const schedIdle = 5

// cpuQuota names the CPU quota of the cgroup the process runs in (or of
// one above it), "" when there is none. procCgroup is /proc/self/cgroup,
// root the cgroup file systems' mount.
func cpuQuota(procCgroup, root string) string {
	for l := range cgroup.Up(procCgroup, root, "cpu") {
		file := "cpu.max"
		if !l.V2 {
			file = "cpu.cfs_quota_us"
		}
		if b, err := os.ReadFile(filepath.Join(l.Dir, file)); err == nil {
			v := strings.Fields(string(b))
			if len(v) > 0 && v[0] != "max" && v[0] != "-1" {
				return filepath.Join(l.Path, file) + " " + strings.Join(v, " ")
			}
		}
	}
	return ""
}

// Stop ends the loops and says what they cost: every loop is killed
// first, then each reaped. It may be called more than once (the later
// calls report nothing), and on a nil Keeper.
func (k *Keeper) Stop() Usage {
	if k == nil {
		return Usage{}
	}
	u := Usage{CPUs: len(k.procs), Wall: time.Since(k.start)}
	for _, p := range k.procs {
		p.cmd.Process.Kill()
	}
	for _, p := range k.procs {
		if p.cmd.Wait(); p.cmd.ProcessState != nil {
			u.CPUSeconds += (p.cmd.ProcessState.UserTime() + p.cmd.ProcessState.SystemTime()).Seconds()
		}
	}
	k.procs = nil
	return u
}
