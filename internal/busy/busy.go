// Package busy measures, beside a timing test, how much the machine kept
// the test's process from running: a goroutine asks to wake every
// millisecond and keeps how late it woke, and the kernel's count of the
// time the process's threads were ready to run but waited for a core
// (/proc/self/task/*/schedstat) is read at the start and the end. A
// timing assertion judges against those figures from the same run — at
// its own tolerance when the machine let the process be (Lag.Quiet), and
// otherwise against what was measured, saying so — instead of failing
// because other work used the cores.
//
// A Watch is for one goroutine: Start it, Stop it once.
package busy

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tokbench/tokbench/metrics"
)

// QuietWait is the share of the wall time the process's threads may have
// waited for a core, summed, on a machine that let it be: with GOMAXPROCS
// at the core count a process alone keeps its threads on the cores, and
// two busy loops beside it on this 2-core VM make them wait 0.5 to 3
// times the wall time. Steal (the hypervisor running another guest on
// the VM's cores) counts as waiting.
const QuietWait = 0.2

// Lag is how late the watch's goroutine woke, in milliseconds, and how
// long the process's threads waited for a core.
type Lag struct {
	P50Ms, P99Ms, MaxMs float64
	Samples             int
	// WaitMs is the time the process's threads were ready to run but
	// waited for a core, summed over its threads; StealMs the time the
	// hypervisor ran others on the machine's cores, summed over the cores
	// (both 0 where the kernel does not say); WallMs the watch's length.
	WaitMs, StealMs, WallMs float64
}

// Quiet reports whether the machine let the process run: its threads
// waited for a core (or were stolen) no more than QuietWait of the time,
// and the watch woke at all. The wake-up lag is not judged: a process
// that keeps its own cores busy (the race detector's) delays its timers
// itself, on a quiet machine too.
func (l Lag) Quiet() bool {
	return l.Samples > 0 && l.WaitMs+l.StealMs <= QuietWait*l.WallMs
}

// Judge reports whether l lets t judge what; when not it says why in
// t's log.
func (l Lag) Judge(t testing.TB, what string) bool {
	t.Helper()
	if l.Quiet() {
		return true
	}
	t.Logf("%s not judged: the machine kept this process from its cores (%v)", what, l)
	return false
}

func (l Lag) String() string {
	return fmt.Sprintf("threads waited %.0f ms for a core and %.0f ms were stolen in %.0f ms; a 1 ms sleep woke late by p50 %.3f, p99 %.3f, max %.3f ms (%d samples)",
		l.WaitMs, l.StealMs, l.WallMs, l.P50Ms, l.P99Ms, l.MaxMs, l.Samples)
}

// Watch is a goroutine measuring its own wake-ups.
type Watch struct {
	start         time.Time
	waited, stole float64 // ms, at the start
	stop          chan struct{}
	lags          chan []float64
}

// Start starts watching.
func Start() *Watch {
	w := &Watch{start: time.Now(), waited: waitedMs(), stole: stolenMs(), stop: make(chan struct{}), lags: make(chan []float64, 1)}
	go func() {
		var lags []float64
		for {
			select {
			case <-w.stop:
				w.lags <- lags
				return
			default:
			}
			due := time.Now().Add(time.Millisecond)
			time.Sleep(time.Millisecond)
			lags = append(lags, float64(time.Since(due))/1e6)
		}
	}()
	return w
}

// Stop ends the watch and returns what it measured.
func (w *Watch) Stop() Lag {
	close(w.stop)
	lags := <-w.lags
	l := Lag{WaitMs: max(waitedMs()-w.waited, 0), StealMs: max(stolenMs()-w.stole, 0), WallMs: float64(time.Since(w.start)) / 1e6, Samples: len(lags)}
	if len(lags) > 0 {
		slices.Sort(lags)
		l.P50Ms, l.P99Ms, l.MaxMs = metrics.Percentile(lags, 50), metrics.Percentile(lags, 99), lags[len(lags)-1]
	}
	return l
}

// waitedMs sums the run-queue wait of the process's threads, the second
// field of each one's schedstat (ns); 0 where there is none.
func waitedMs() float64 {
	paths, _ := filepath.Glob("/proc/self/task/*/schedstat")
	var ns float64
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // the thread ended
		}
		if f := strings.Fields(string(b)); len(f) >= 2 {
			if v, err := strconv.ParseFloat(f[1], 64); err == nil {
				ns += v
			}
		}
	}
	return ns / 1e6
}

// stolenMs is the machine's steal time, the eighth figure of /proc/stat's
// cpu line (in USER_HZ ticks, 100 a second on Linux); 0 where there is none.
func stolenMs() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0
	}
	ticks, err := strconv.ParseFloat(f[8], 64)
	if err != nil {
		return 0
	}
	return ticks * 10
}
