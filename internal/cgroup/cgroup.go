// Package cgroup finds the control groups a process runs in: for a
// controller, the directory of the process's own cgroup and of every one
// above it, in cgroup v2 and v1, where its limits (a memory limit, a CPU
// quota) are read. A limit set on a parent (a pod, a slice) binds the
// process as much as its own.
package cgroup

import (
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Level is one cgroup on the way from the process's own up to the root.
type Level struct {
	Path string // the cgroup's path in its hierarchy, "/" for the root
	Dir  string // its directory under the mount
	V2   bool   // in the unified hierarchy (cgroup v2), else a v1 one
}

// Up yields, in each hierarchy that holds controller (cgroup v2's
// unified one, and a v1 hierarchy whose controller list names it), the
// process's own cgroup and then each above it up to the hierarchy's
// root. procCgroup is /proc/self/cgroup and mount the cgroup file
// systems' mount (/sys/fs/cgroup), under which a v1 hierarchy is mounted
// by its controller list's name ("cpu,cpuacct"). Inside a cgroup
// namespace the process's own cgroup is "/", the mount's root. It yields
// nothing where procCgroup cannot be read.
func Up(procCgroup, mount, controller string) iter.Seq[Level] {
	return func(yield func(Level) bool) {
		b, err := os.ReadFile(procCgroup)
		if err != nil {
			return
		}
		for line := range strings.Lines(string(b)) {
			// hierarchy-ID:controllers:path; cgroup v2's is 0::path.
			parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
			if len(parts) != 3 {
				continue
			}
			root, v2 := mount, true
			switch {
			case parts[0] == "0" && parts[1] == "":
			case slices.Contains(strings.Split(parts[1], ","), controller):
				root, v2 = filepath.Join(mount, parts[1]), false
			default:
				continue
			}
			for p := filepath.Clean("/" + parts[2]); ; p = filepath.Dir(p) {
				if !yield(Level{Path: p, Dir: filepath.Join(root, p), V2: v2}) {
					return
				}
				if p == "/" {
					break
				}
			}
		}
	}
}
