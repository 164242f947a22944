package load

import (
	"fmt"
	"math"
	"runtime"
	rtmetrics "runtime/metrics"
	"slices"
	"sync/atomic"
	"time"

	"github.com/tokbench/tokbench/api"
	"github.com/tokbench/tokbench/internal/pace"
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

// stampCounts counts how the current level's chunk arrivals were stamped.
type stampCounts struct {
	responses, kernel atomic.Int64 // responses with a token chunk; of them, stamped by the kernel
	firstShared       atomic.Int64 // responses whose first token chunk shares its stamp with the second
	chunks, shared    atomic.Int64 // token chunks; of them, sharing their stamp with the next
}

func (s *stampCounts) reset() {
	for _, c := range []*atomic.Int64{&s.responses, &s.kernel, &s.firstShared, &s.chunks, &s.shared} {
		c.Store(0)
	}
}

func (s *stampCounts) add(resp *api.Response) {
	ch := resp.Chunks
	if len(ch) == 0 {
		return
	}
	s.responses.Add(1)
	if resp.KernelStamps {
		s.kernel.Add(1)
	}
	shared := 0
	for i := 0; i+1 < len(ch); i++ {
		if ch[i].At.Equal(ch[i+1].At) {
			shared++
			if i == 0 {
				s.firstShared.Add(1)
			}
		}
	}
	s.chunks.Add(int64(len(ch)))
	s.shared.Add(int64(shared))
}

// SharedStampWarn: with kernel stamps, a client that ran late warns when
// more than this share of first token chunks, or of all token chunks,
// share their stamp with the next chunk: the p99 of TTFT or of the gaps
// may then be the client's.
const SharedStampWarn = 0.01

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
	late  *atomic.Int64
}

// startMonitor starts watching; late (nil: none) counts the ticks woken
// more than LagWarnMs late, as they happen.
func startMonitor(late *atomic.Int64) *monitor {
	m := &monitor{start: time.Now(), cpu0: processCPU(), stop: make(chan struct{}), done: make(chan struct{}), late: late}
	m.gc0 = readPauses().Counts
	go m.tick()
	return m
}

// tick records how late it wakes against a fixed 5 ms schedule; after a
// long stall it restarts the schedule rather than catching up.
func (m *monitor) tick() {
	defer close(m.done)
	t := pace.NewTimer()
	defer t.Close()
	next := time.Now()
	for {
		next = next.Add(tickPeriod)
		if ok, _ := t.Until(m.stop, next); !ok {
			return
		}
		now := time.Now()
		lag := now.Sub(next)
		if len(m.lags) < maxLagSamples {
			m.lags = append(m.lags, ms(lag))
		}
		if m.late != nil && ms(lag) > LagWarnMs {
			m.late.Add(1)
		}
		if lag > tickPeriod {
			next = now
		}
	}
}

// finish stops the monitor and returns its figures, with a warning for each
// one past its threshold.
func (m *monitor) finish(st *stampCounts) (*metrics.ClientHealth, []string) {
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
	if n := st.responses.Load(); n > 0 {
		h.KernelStamps = st.kernel.Load() == n
		h.FirstChunksSharingStamp = float64(st.firstShared.Load()) / float64(n)
		h.ChunksSharingStamp = float64(st.shared.Load()) / float64(st.chunks.Load())
	}
	return h, healthWarnings(h)
}

// healthWarnings is one line for each figure of h past its threshold.
func healthWarnings(h *metrics.ClientHealth) []string {
	var warn []string
	if h.KernelStamps {
		// A late client still stamps exactly what it reads before the
		// stream's next chunk arrives; what it cannot stamp is a chunk it
		// read late together with the next one. A single stall is enough
		// to merge the chunks of every stream for its length, so lateness
		// here is the worst wake-up, not the typical one.
		ranLate := h.TickLagMaxMs > LagWarnMs || h.GCPauseMaxMs > GCPauseWarnMs
		if ranLate && (h.FirstChunksSharingStamp > SharedStampWarn || h.ChunksSharingStamp > SharedStampWarn) {
			warn = append(warn, fmt.Sprintf("client self-check: the client ran late (scheduling lag p99 %.1f ms, max %.1f ms; GC pause max %.1f ms) and %.1f%% of first token chunks (%.1f%% of all) share their kernel receive stamp with the next chunk: where the server sent them apart, the client read them late together, and those TTFTs and gaps read high by up to the lag; spread the start with --ramp-up or run fewer streams per client",
				h.TickLagP99Ms, h.TickLagMaxMs, h.GCPauseMaxMs, 100*h.FirstChunksSharingStamp, 100*h.ChunksSharingStamp))
		}
	} else {
		if h.TickLagP99Ms > LagWarnMs {
			warn = append(warn, fmt.Sprintf("client self-check: the client ran late (scheduling lag p99 %.1f ms, max %.1f ms); its timestamps may be late by as much", h.TickLagP99Ms, h.TickLagMaxMs))
		}
		if h.GCPauseMaxMs > GCPauseWarnMs {
			warn = append(warn, fmt.Sprintf("client self-check: garbage-collection pauses up to %.1f ms delayed the client's timestamps", h.GCPauseMaxMs))
		}
	}
	if h.CPUUtilization > CPUWarn {
		warn = append(warn, fmt.Sprintf("client self-check: the client used %.0f%% of its %d cores and may have slowed the streams it measured", 100*h.CPUUtilization, h.GOMAXPROCS))
	}
	return warn
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
