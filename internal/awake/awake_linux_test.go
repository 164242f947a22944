package awake

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestMain doubles as the helper process of TestKeeperEndsWithItsParent:
// started with AWAKE_HELPER set, it keeps the processors awake, prints
// its loops' pids and waits to be killed.
func TestMain(m *testing.M) {
	if os.Getenv("AWAKE_HELPER") != "" {
		k, err := Start()
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		for _, p := range k.procs {
			fmt.Println(p.cmd.Process.Pid)
		}
		fmt.Println("started")
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestKeeperLoopsAtIdlePriorityOnEachCPU: one loop on each processor the
// process may use, each on that processor only and at SCHED_IDLE, and
// none left once stopped.
func TestKeeperLoopsAtIdlePriorityOnEachCPU(t *testing.T) {
	var mine unix.CPUSet
	if err := unix.SchedGetaffinity(0, &mine); err != nil {
		t.Fatal(err)
	}
	k, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	procs := k.procs
	seen := map[int]bool{}
	for _, p := range procs {
		pid := p.cmd.Process.Pid
		attr, err := unix.SchedGetAttr(pid, 0)
		if err != nil {
			t.Errorf("loop %d: %v", pid, err)
			continue
		}
		if attr.Policy != schedIdle {
			t.Errorf("loop %d runs at policy %d, want SCHED_IDLE (%d)", pid, attr.Policy, schedIdle)
		}
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(pid, &set); err != nil {
			t.Errorf("loop %d: %v", pid, err)
			continue
		}
		if set.Count() != 1 || !set.IsSet(p.cpu) || seen[p.cpu] {
			t.Errorf("loop %d may run on %d processors (its own %d set: %v), want processor %d alone, once", pid, set.Count(), p.cpu, set.IsSet(p.cpu), p.cpu)
		}
		seen[p.cpu] = true
	}
	// None of this process's own threads took a loop's policy or
	// processor.
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		tid, _ := strconv.Atoi(task.Name())
		attr, err := unix.SchedGetAttr(tid, 0)
		if err != nil {
			continue // the thread ended
		}
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(tid, &set); err != nil {
			continue
		}
		if attr.Policy == schedIdle || set.Count() != mine.Count() {
			t.Errorf("thread %d of the test now runs at policy %d on %d processors, want its own (%d processors)", tid, attr.Policy, set.Count(), mine.Count())
		}
	}
	time.Sleep(100 * time.Millisecond)
	u := k.Stop()
	if u.CPUs != mine.Count() || len(seen) != mine.Count() {
		t.Errorf("kept %d processors awake (%d loops), want the process's %d", u.CPUs, len(seen), mine.Count())
	}
	for _, p := range procs {
		if p.cmd.ProcessState == nil {
			t.Errorf("loop %d was not reaped by Stop", p.cmd.Process.Pid)
		}
	}
	if again := k.Stop(); again.CPUs != 0 {
		t.Errorf("a second Stop reported %+v, want nothing", again)
	}
	t.Logf("%d loops took %.3f CPU-s in %v (idle time only: other work here takes it first)", u.CPUs, u.CPUSeconds, u.Wall)
}

// TestKeeperEndsWithItsParent: a tokbench killed outright (SIGKILL, no
// Stop) leaves no loop spinning.
func TestKeeperEndsWithItsParent(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "AWAKE_HELPER=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var pids []int
	sc := bufio.NewScanner(out)
	for sc.Scan() && sc.Text() != "started" {
		pid, err := strconv.Atoi(sc.Text())
		if err != nil {
			t.Fatalf("helper said %q", sc.Text())
		}
		pids = append(pids, pid)
	}
	if len(pids) == 0 {
		t.Fatal("the helper started no loop")
	}
	for _, pid := range pids {
		if !running(pid) {
			t.Fatalf("loop %d is not running while its parent is", pid)
		}
	}
	// Not reaped yet: a zombie parent must not keep the loops spinning.
	cmd.Process.Kill()
	defer cmd.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range pids {
		for running(pid) && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if running(pid) {
			t.Errorf("loop %d still runs 5 s after its parent was killed", pid)
		}
	}
}

// running says pid is a live process (not gone, not a zombie).
func running(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z' && s[i+2] != 'X'
}

// TestCPUQuota: a quota on the process's cgroup, or one above it, in
// cgroup v2 or v1, is found; none is none.
func TestCPUQuota(t *testing.T) {
	for _, c := range []struct {
		name, cgroup string
		files        map[string]string
		want         string
	}{
		{"v2 quota above", "0::/a/b\n", map[string]string{"a/b/cpu.max": "max 100000\n", "a/cpu.max": "200000 100000\n"}, "/a/cpu.max 200000 100000"},
		{"v2 none", "0::/a/b\n", map[string]string{"a/b/cpu.max": "max 100000\n", "cpu.max": "max 100000\n"}, ""},
		{"v1 quota", "5:cpu,cpuacct:/docker/x\n1:memory:/docker/x\n", map[string]string{"cpu,cpuacct/docker/x/cpu.cfs_quota_us": "150000\n"}, "/docker/x/cpu.cfs_quota_us 150000"},
		{"v1 none", "5:cpu,cpuacct:/docker/x\n", map[string]string{"cpu,cpuacct/docker/x/cpu.cfs_quota_us": "-1\n"}, ""},
		{"no cgroup file", "", nil, ""},
	} {
		dir := t.TempDir()
		for name, body := range c.files {
			path := filepath.Join(dir, "fs", name)
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		cg := filepath.Join(dir, "cgroup")
		if c.cgroup != "" {
			if err := os.WriteFile(cg, []byte(c.cgroup), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if got := cpuQuota(cg, filepath.Join(dir, "fs")); got != c.want {
			t.Errorf("%s: cpuQuota = %q, want %q", c.name, got, c.want)
		}
	}
}
