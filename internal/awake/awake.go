// Package awake keeps a machine's processors from idling while a level
// runs, at the lowest priority there is, so that the pacer's wake-ups are
// not held by a processor coming back from idle.
//
// On a virtual machine a processor with nothing to run halts, and the
// host may take milliseconds to resume it when its timer fires: a pacer
// that slept through a gap between instants then wakes late, however
// early it aimed. A busy loop at SCHED_IDLE on each of the process's
// processors keeps them from halting while taking next to no time from
// what else runs there: beside a task of normal priority an idle-policy
// task gets a weight of 3 against its 1,024 (0.3%), and is preempted at
// once when one wakes. That holds within tokbench's cgroup: against other
// cgroups the loops count as tokbench's, and under a CPU quota they would
// spend it, so Start refuses there. Its cost is a core per processor of
// otherwise idle time (power, and a hyperthread sibling's share of its
// core), so it is opt-in.
package awake

import (
	"errors"
	"time"
)

// Keeper is a running set of idle-priority busy loops; Stop ends them.
type Keeper struct {
	procs []*process
	start time.Time
}

// ErrUnsupported says the platform has no idle scheduling policy to keep
// processors awake with.
var ErrUnsupported = errors.New("keeping processors awake needs Linux (SCHED_IDLE)")

// Usage is what a Keeper cost: the processors it kept awake and the CPU
// time its loops took, which was otherwise idle time.
type Usage struct {
	CPUs       int
	CPUSeconds float64
	Wall       time.Duration
}
