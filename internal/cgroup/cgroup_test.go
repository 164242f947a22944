package cgroup

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestUp(t *testing.T) {
	dir := t.TempDir()
	proc := filepath.Join(dir, "cgroup")
	if err := os.WriteFile(proc, []byte("5:cpu,cpuacct:/docker/x\n4:memory:/docker/x\n0::/pod/app\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		controller string
		want       []Level
	}{
		{"cpu", []Level{
			{"/docker/x", "/fs/cpu,cpuacct/docker/x", false},
			{"/docker", "/fs/cpu,cpuacct/docker", false},
			{"/", "/fs/cpu,cpuacct", false},
			{"/pod/app", "/fs/pod/app", true},
			{"/pod", "/fs/pod", true},
			{"/", "/fs", true},
		}},
		{"memory", []Level{
			{"/docker/x", "/fs/memory/docker/x", false},
			{"/docker", "/fs/memory/docker", false},
			{"/", "/fs/memory", false},
			{"/pod/app", "/fs/pod/app", true},
			{"/pod", "/fs/pod", true},
			{"/", "/fs", true},
		}},
		{"pids", []Level{
			{"/pod/app", "/fs/pod/app", true},
			{"/pod", "/fs/pod", true},
			{"/", "/fs", true},
		}},
	} {
		if got := slices.Collect(Up(proc, "/fs", c.controller)); !slices.Equal(got, c.want) {
			t.Errorf("%s: got %v, want %v", c.controller, got, c.want)
		}
	}
	// A namespace's own cgroup is the root; an early stop stops.
	if err := os.WriteFile(proc, []byte("0::/\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, want := slices.Collect(Up(proc, "/fs", "memory")), []Level{{"/", "/fs", true}}; !slices.Equal(got, want) {
		t.Errorf("namespace: got %v, want %v", got, want)
	}
	for range Up(proc, "/fs", "memory") {
		break
	}
	if got := slices.Collect(Up(filepath.Join(dir, "none"), "/fs", "memory")); len(got) != 0 {
		t.Errorf("no cgroup file: got %v", got)
	}
}
