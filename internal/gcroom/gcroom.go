// Package gcroom gives the garbage collector room while a level runs, so
// that it runs seldom: on a client with one or two processors each cycle
// takes a processor's time from the pacer and the readers, and a send due
// during one leaves late.
//
// Go starts a cycle when the heap has grown by GOGC percent of what the
// last cycle left live (and of the goroutine stacks and globals). A
// client's live heap is small, a few MB, while at thousands of requests a
// second it allocates tens of MB a second, so at GOGC=100 a cycle runs
// every few hundred milliseconds. Hold raises GOGC so that the heap may
// grow by a fixed number of bytes, the room, above what is live, and sets
// it again after every cycle as the live heap changes: the cycles become
// as many times rarer as the room is larger than the live heap, for the
// room's memory. The collector's own CPU per byte allocated falls with
// them.
//
// A GOGC set in the environment is the user's choice and is left alone;
// GOMEMLIMIT still bounds the heap however large the room.
package gcroom

import (
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"

	"github.com/tokbench/tokbench/internal/cgroup"
	"github.com/tokbench/tokbench/machine"
)

// DefaultRoom is the heap growth between cycles Hold allows unless told
// otherwise, before the cap from the machine's memory.
const DefaultRoom = 256 << 20

// minRoom is below what Hold does not bother: Go's own minimum heap goal
// is 4 MB.
const minRoom = 4 << 20

var (
	mu      sync.Mutex
	holders int
	room    int64
	gen     uint64 // which hold the sentinel belongs to
	before  int    // the percent before the first holder
)

// sentinel is an object whose cleanup runs after the cycle that finds it
// unreachable: it is how the room follows the live heap, cycle by cycle.
// It holds a pointer so that it is not packed with other small objects.
type sentinel struct {
	_ *int
	_ int64
}

// Hold gives the collector the room (DefaultRoom if want ≤ 0), capped at
// a quarter of the memory the process may still take, until release is
// called. Holds nest and overlap: the first one's room stays until the
// last is released, and then the percent in force before the first comes
// back. It returns the room in force, 0 where it did nothing: GOGC is set
// in the environment or collection is off, or the machine has too little
// memory to spare.
func Hold(want int64) (granted int64, release func()) {
	mu.Lock()
	defer mu.Unlock()
	if holders == 0 {
		if os.Getenv("GOGC") != "" {
			return 0, func() {}
		}
		if want <= 0 {
			want = DefaultRoom
		}
		want = min(want, maxRoom)
		if spare := spareMemory(); spare > 0 {
			want = min(want, spare/4)
		}
		// The percent in force; off (-1) reads as the largest uint64.
		old := int(int64(readUint(gogcPercent)))
		if want < minRoom || old < 0 {
			return 0, func() {}
		}
		gen++
		room, before = want, old
		debug.SetGCPercent(percentFor(room, before))
		watch(gen)
	}
	holders++
	var once sync.Once
	return room, func() {
		once.Do(func() {
			mu.Lock()
			defer mu.Unlock()
			holders--
			if holders == 0 {
				gen++
				debug.SetGCPercent(before)
			}
		})
	}
}

// maxRoom bounds a room asked for, so that the percent stays in range.
const maxRoom = 1 << 40

// gogcPercent is the runtime metric of the GOGC in force.
const gogcPercent = "/gc/gogc:percent"

// readUint reads one runtime metric of kind uint64 (0 where it has none).
func readUint(name string) uint64 {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// watch registers a cleanup that sets the percent again after the next
// cycle, and watches again, while the hold g lasts.
func watch(g uint64) {
	s := new(sentinel)
	runtime.AddCleanup(s, func(g uint64) {
		mu.Lock()
		defer mu.Unlock()
		if g != gen {
			return
		}
		debug.SetGCPercent(percentFor(room, before))
		watch(g)
	}, g)
}

// percentFor is the GOGC that lets the heap grow by room bytes above what
// the last cycle left live, never below floor.
func percentFor(room int64, floor int) int {
	base := scanned()
	if base < minRoom {
		base = minRoom
	}
	p := min(room*100/base, math.MaxInt32) // the runtime keeps it in an int32
	return int(max(p, int64(floor)))
}

// scanned is what GOGC is a percent of: the heap the last cycle marked
// live, the goroutine stacks and the globals.
func scanned() int64 {
	return int64(readUint("/gc/heap/live:bytes") + readUint("/gc/scan/stack:bytes") + readUint("/gc/scan/globals:bytes"))
}

// spareMemory is the memory the process may still take, in bytes: the
// machine's available memory, and the least its cgroups (v1 or v2, the
// process's own and those above it) have left under their limits; 0
// where none of these is known (not Linux).
func spareMemory() int64 {
	spare := int64(machine.MemoryAvailable())
	if c := cgroupSpare("/proc/self/cgroup", "/sys/fs/cgroup"); c > 0 && (spare <= 0 || c < spare) {
		spare = c
	}
	return spare
}

// cgroupSpare is the least memory left under a limit of the cgroup this
// process runs in or of one above it (v2's memory.max, v1's
// memory.limit_in_bytes), what they use counted without the file cache
// the kernel would reclaim first (memory.stat's inactive_file). It is 0
// where no cgroup has a limit or none can be read, and at least 1 where
// one is at or over its limit. procCgroup is /proc/self/cgroup, mount the
// cgroup file systems' mount. Inside a cgroup namespace the process's own
// cgroup is the mount's root, which the walk up reaches too.
func cgroupSpare(procCgroup, mount string) int64 {
	var least int64
	for l := range cgroup.Up(procCgroup, mount, "memory") {
		limitFile, useFile, cacheKey := "memory.max", "memory.current", "inactive_file"
		if !l.V2 {
			limitFile, useFile, cacheKey = "memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file"
		}
		if limit := readInt(filepath.Join(l.Dir, limitFile)); limit > 0 {
			used := readInt(filepath.Join(l.Dir, useFile)) - statOf(filepath.Join(l.Dir, "memory.stat"), cacheKey)
			spare := max(limit-used, 1)
			if least == 0 || spare < least {
				least = spare
			}
		}
	}
	return least
}

// statOf reads one key's value from a memory.stat file (0 where absent).
func statOf(name, key string) int64 {
	b, err := os.ReadFile(name)
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), " "); ok && k == key {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

// readInt reads a file holding one integer ("max" and errors read as 0).
func readInt(name string) int64 {
	b, err := os.ReadFile(name)
	if err != nil {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0
	}
	return n
}
