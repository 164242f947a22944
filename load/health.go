package load

import (
	"fmt"
	"math"
	"runtime"
	rtmetrics "runtime/metrics"
	"slices"
	"time"

	"github.com/tokbench/tokbench/metrics"
)

// Self-check thresholds: beyond these the client may have shaped a level's
// timings, and the level says so.
const (
	// tickPeriod is how often the lag ticker asks to wake.
	tickPeriod = 5 * time.Millisecond
	// LagWarnMs: a ticker woken this late at p99 means chunk stamps may
	// be late by as much.
	LagWarnMs = 2.0
	// CPUWarn: a client using this share of its cores is close to being
	// the bottleneck.
	CPUWarn = 0.85
	// GCPauseWarnMs: a stop-the-world pause this long delays every stamp
	// taken during it.
	GCPauseWarnMs = 2.0
	// maxLagSamples bounds the ticker's memory (about 80 minutes at 5 ms).
	maxLagSamples = 1 << 20
)

// gcPauses is the runtime/metrics histogram of GC stop-the-world pauses.
var gcPauses = pauseMetric()

func pauseMetric() string {
	for _, d := range rtmetrics.All() {
		if d.Name == "/sched/pauses/total/gc:seconds" {
			return d.Name
		}
	}
	return "/gc/pauses:seconds"
}

// monitor watches the client's own health while a level runs: a ticker's
// lateness, the process's CPU time and the GC's pauses. Start it with
// startMonitor and end it with finish, once.
type monitor struct {
	start time.Time
	cpu0  time.Duration
	gc0   []uint64
	stop  chan struct{}
	done  chan struct{}
	lags  []float64 // ms, written by the ticker until done is closed
}

func startMonitor() *monitor {
	m := &monitor{start: time.Now(), cpu0: processCPU(), stop: make(chan struct{}), done: make(chan struct{})}
	m.gc0 = readPauses().Counts
	go m.tick()
	return m
}

// tick records how late it wakes against a fixed 5 ms schedule; after a
// long stall it restarts the schedule rather than catching up.
func (m *monitor) tick() {
	defer close(m.done)
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	pt := newPreciseTimer()
	defer pt.close()
	next := time.Now()
	for {
		next = next.Add(tickPeriod)
		if !sleepUntil(m.stop, t, pt, next) {
			return
		}
		now := time.Now()
		lag := now.Sub(next)
		if len(m.lags) < maxLagSamples {
			m.lags = append(m.lags, ms(lag))
		}
		if lag > tickPeriod {
			next = now
		}
	}
}

// finish stops the monitor and returns its figures, with a warning for each
// one past its threshold.
func (m *monitor) finish() (*metrics.ClientHealth, []string) {
	close(m.stop)
	<-m.done
	wall := time.Since(m.start)
	procs := runtime.GOMAXPROCS(0)
	h := &metrics.ClientHealth{GOMAXPROCS: procs}
	cpu := processCPU() - m.cpu0
	h.CPUSeconds = cpu.Seconds()
	if wall > 0 && cpu > 0 {
		h.CPUUtilization = cpu.Seconds() / (wall.Seconds() * float64(procs))
	}
	h.GCPauses, h.GCPauseMaxMs, h.GCPauseTotalMs = pauseDelta(m.gc0, readPauses())
	if len(m.lags) > 0 {
		slices.Sort(m.lags)
		h.TickLagP50Ms = metrics.Percentile(m.lags, 50)
		h.TickLagP99Ms = metrics.Percentile(m.lags, 99)
		h.TickLagMaxMs = m.lags[len(m.lags)-1]
	}
	var warn []string
	if h.TickLagP99Ms > LagWarnMs {
		warn = append(warn, fmt.Sprintf("client self-check: the client ran late (scheduling lag p99 %.1f ms, max %.1f ms); its timestamps may be late by as much", h.TickLagP99Ms, h.TickLagMaxMs))
	}
	if h.CPUUtilization > CPUWarn {
		warn = append(warn, fmt.Sprintf("client self-check: the client used %.0f%% of its %d cores and may have slowed the streams it measured", 100*h.CPUUtilization, procs))
	}
	if h.GCPauseMaxMs > GCPauseWarnMs {
		warn = append(warn, fmt.Sprintf("client self-check: garbage-collection pauses up to %.1f ms delayed the client's timestamps", h.GCPauseMaxMs))
	}
	return h, warn
}

func readPauses() *rtmetrics.Float64Histogram {
	s := []rtmetrics.Sample{{Name: gcPauses}}
	rtmetrics.Read(s)
	if s[0].Value.Kind() != rtmetrics.KindFloat64Histogram {
		return &rtmetrics.Float64Histogram{}
	}
	return s[0].Value.Float64Histogram()
}

// pauseDelta compares two readings of the pause histogram: the pauses since
// the first, the upper bound of the longest, and their total estimated
// from bucket midpoints (all in ms).
func pauseDelta(before []uint64, after *rtmetrics.Float64Histogram) (n int, maxMs, totalMs float64) {
	for i, c := range after.Counts {
		if i < len(before) {
			c -= before[i]
		}
		if c == 0 {
			continue
		}
		lo, hi := after.Buckets[i], after.Buckets[i+1]
		if math.IsInf(lo, -1) {
			lo = 0
		}
		if math.IsInf(hi, 1) {
			hi = lo
		}
		n += int(c)
		maxMs = hi * 1000
		totalMs += float64(c) * (lo + hi) / 2 * 1000
	}
	return n, maxMs, totalMs
}

// sleepUntil waits until due: a timer for all but the last 1.5 ms, then
// the precise timer, because Go's timers alone wake up to a millisecond
// late when the process is idle. It returns false if stop closed first.
func sleepUntil(stop <-chan struct{}, t *time.Timer, pt *preciseTimer, due time.Time) bool {
	for {
		d := time.Until(due)
		if d <= 0 {
			return true
		}
		if d > 1500*time.Microsecond {
			t.Reset(d - 1500*time.Microsecond)
			select {
			case <-stop:
				return false
			case <-t.C:
			}
			continue
		}
		select {
		case <-stop:
			return false
		default:
		}
		pt.sleep(d)
	}
}
