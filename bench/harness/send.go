package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"slices"
	"time"

	"github.com/tokbench/tokbench/api"
	"github.com/tokbench/tokbench/internal/awake"
	"github.com/tokbench/tokbench/internal/gcroom"
	"github.com/tokbench/tokbench/internal/pace"
	"github.com/tokbench/tokbench/load"
	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/workload"
)

// Sends is the send scenarios' figures: how late each request reached the
// server against its scheduled instant, by the server's kernel receive
// stamp of its last byte (the wire's instant, which no client clock
// bends), beside the client's own queue_ms and the pacer's cost.
type Sends struct {
	WireLate *Spread `json:"send_late_wire,omitempty"`
	// BareLate is the floor beside it: a bare sender's lateness on the
	// wire at the same rate (bareSend), nothing of tokbench in it.
	BareLate *Spread `json:"bare_send_late_wire,omitempty"`
	// SleepLate is the floor of a sender that sleeps between instants, as
	// tokbench's pacer does: the bare sender sleeping on the precise timer
	// until 1 ms before each instant, then spinning.
	SleepLate   *Spread `json:"bare_sleeping_send_late_wire,omitempty"`
	Over05      int     `json:"sends_over_0_5ms,omitempty"`
	Over1       int     `json:"sends_over_1ms,omitempty"`
	Unmatched   int     `json:"sends_unmatched,omitempty"`
	LeadMs      float64 `json:"pacer_lead_ms,omitempty"` // the median lead its sleeps aimed for
	LearnedMs   float64 `json:"pacer_lead_learned_ms,omitempty"`
	PacerShare  float64 `json:"pacer_cpu_share,omitempty"`
	WakeP99Ms   float64 `json:"pacer_wake_late_p99_ms,omitempty"`
	SpareOpened int64   `json:"spare_opened,omitempty"`
	// KeptAwake*: what --keep-awake's loops cost the level (-keep-awake).
	KeptAwakeCPUs       int     `json:"kept_awake_cpus,omitempty"`
	KeptAwakeCPUSeconds float64 `json:"kept_awake_cpu_seconds,omitempty"`
	DialsOnSend         int     `json:"dials_on_send,omitempty"`
	// LateBy is tokbench's own count of its late sends by cause.
	LateBy *metrics.LateBy `json:"late_by,omitempty"`
	// The ticker scenario: a bare Go ticker (time.Sleep to each instant of
	// a 5 ms schedule), the precise timer tokbench's self-check uses, both
	// alone in the process, and the self-check's own figures at one user.
	BareTick  *Spread `json:"bare_go_ticker_lag,omitempty"`
	TimerTick *Spread `json:"bare_precise_timer_lag,omitempty"`
	SelfTick  *Spread `json:"self_check_ticker_lag,omitempty"`
}

// sends runs the send scenarios: open-loop constant rates, and with
// traces replays of a sparse, a bursty and a long-prompt trace.
func (h *harness) sends(rates []int, traces bool, emit func(Result, error) error) error {
	for _, r := range rates {
		n := min(max(20, r*4), 12000)
		if r <= 10 {
			n = max(20, r*15)
		}
		lv := load.Level{Load: metrics.Load{Mode: metrics.ModeRate, RateRPS: float64(r), Arrival: load.ArrivalConstant}, Requests: n}
		src := source{tokens: 2, ttft: time.Millisecond, gap: time.Millisecond}
		if err := emit(h.send(fmt.Sprintf("send %d/s", r), lv, src)); err != nil {
			return err
		}
	}
	if !traces {
		return nil
	}
	rng := rand.New(rand.NewPCG(7, 11))
	// A sparse trace: Poisson arrivals at 40 req/s on a trace's 1 ms grid.
	var sparse []time.Duration
	at := time.Duration(0)
	for range 400 {
		at += time.Duration(rng.ExpFloat64() / 40 * float64(time.Second))
		sparse = append(sparse, at.Truncate(time.Millisecond))
	}
	if err := emit(h.send("trace sparse 40/s", traceLevel(sparse), source{tokens: 2, ttft: time.Millisecond, gap: time.Millisecond})); err != nil {
		return err
	}
	// A bursty trace: bursts of 2–12 requests 1 ms apart, every 50–250 ms.
	var bursty []time.Duration
	at = 0
	for len(bursty) < 400 {
		at += time.Duration(50+rng.IntN(200)) * time.Millisecond
		for k := range 2 + rng.IntN(11) {
			bursty = append(bursty, at+time.Duration(k)*time.Millisecond)
		}
	}
	if err := emit(h.send("trace bursty", traceLevel(bursty), source{tokens: 2, ttft: time.Millisecond, gap: time.Millisecond})); err != nil {
		return err
	}
	return emit(h.longPrompts(rng))
}

// traceLevel is an open-loop level replaying offsets.
func traceLevel(offsets []time.Duration) load.Level {
	span := offsets[len(offsets)-1] - offsets[0]
	rate := float64(len(offsets)-1) / span.Seconds()
	return load.Level{Load: metrics.Load{Mode: metrics.ModeRate, RateRPS: rate, Arrival: metrics.ArrivalTrace}, Requests: len(offsets), Offsets: offsets}
}

// longPrompts replays a Mooncake-shaped trace at four times its pace: 7k-
// token prompts built from 512-token hash blocks (the trace source's own
// builder), 11.6 req/s, answers of 3 s, so that some 35 requests are in
// flight, each holding a connection for its whole answer.
func (h *harness) longPrompts(rng *rand.Rand) (Result, error) {
	tr := &workload.Trace{}
	at := 0.0
	for i := range 120 {
		at += rng.ExpFloat64() / 2.9 // 2.9 req/s, ×4 = 11.6
		blocks := make([]int64, 14)
		for b := range blocks {
			blocks[b] = int64(i*3 + b) // some blocks shared between neighbours
		}
		tr.Requests = append(tr.Requests, workload.TraceRequest{At: time.Duration(at * float64(time.Second)), InputTokens: 7000, OutputTokens: 64, HashIDs: blocks})
	}
	ts, err := workload.NewTraceSource(tr, h.tok, "fake", 1)
	if err != nil {
		return Result{}, err
	}
	lv := traceLevel(tr.Offsets(4))
	return h.send("trace 7k-token prompts ×4", lv, paced{ts, time.Millisecond, 45 * time.Millisecond})
}

// paced is a source whose requests carry the fake server's pacing.
type paced struct {
	src       load.Source
	ttft, gap time.Duration
}

func (p paced) Request(i int) (*api.Request, int) {
	req, n := p.src.Request(i)
	r := *req
	r.Extra = map[string]any{"bench": map[string]any{"ttft_us": p.ttft.Microseconds(), "gap_us": p.gap.Microseconds(), "burst": 1}}
	return &r, n
}

// send runs one open-loop level and measures each request's lateness on the
// wire: the server's kernel receive stamp of the request less its scheduled
// instant (t0 less its queue_ms, on the same realtime clock).
func (h *harness) send(name string, lv load.Level, src load.Source) (Result, error) {
	ad := &stampAdapter{}
	out, res, err := h.level(name, levelRun{client: h.options(), base: h.base, ad: ad, lv: lv, src: src})
	if err != nil {
		return out, err
	}
	var late []float64
	s := &Sends{}
	for _, rec := range res.Records {
		tr := ad.truth[rec.Start.UnixNano()]
		if len(tr) != 1 || tr[0].arrival == 0 {
			s.Unmatched++
			continue
		}
		due := rec.Start.UnixNano() - int64(rec.QueueMs*1e6)
		l := float64(tr[0].arrival-due) / 1e6
		late = append(late, l)
		if l > 0.5 {
			s.Over05++
		}
		if l > 1 {
			s.Over1++
		}
	}
	s.WireLate = spread(late)
	if p := res.Level.Pacer; p != nil {
		s.LeadMs, s.LearnedMs, s.PacerShare, s.SpareOpened, s.LateBy = p.LeadMs, p.LearnedLeadMs, p.CPUShare, p.SpareOpened, p.LateBy
		if p.WakeLateMs != nil {
			s.WakeP99Ms = p.WakeLateMs.P99
		}
	}
	if c := res.Level.Connections; c != nil {
		s.DialsOnSend = c.Opened
	}
	if c := res.Level.Client; c != nil && c.KeptAwake != nil {
		s.KeptAwakeCPUs, s.KeptAwakeCPUSeconds = c.KeptAwake.CPUs, c.KeptAwake.CPUSeconds
	}
	if q := res.Level.QueueMs; q != nil {
		out.QueueP50Ms, out.QueueP99Ms, out.QueueMaxMs = q.P50, q.P99, q.Max
	}
	out.SentPerS = sentRate(res.Records)
	out.Sends = s
	// The floor right after, on the same schedule (with short answers
	// where the scenario's are not the fake's own script).
	sc, ok := src.(source)
	if !ok {
		sc = source{tokens: 2, ttft: time.Millisecond, gap: time.Millisecond}
		// The floor's request is as long as the scenario's: a long
		// prompt's last byte reaches the server later by its size alone.
		if req, _ := src.Request(0); len(req.Messages) > 0 {
			sc.prompt = req.Messages[len(req.Messages)-1].Content
		}
	}
	// The floors run as a level does: the level's garbage collected
	// first, and the collector given the same room (gcroom).
	runtime.GC()
	_, release := gcroom.Hold(0)
	defer release()
	if h.keepAwake {
		// The floors run beside the same loops as tokbench did.
		k, err := awake.Start()
		if err != nil {
			return out, err
		}
		defer k.Stop()
	}
	if s.BareLate, err = h.bareSend(scheduleOf(lv), sc, spinTo); err != nil {
		return out, err
	}
	pt := pace.NewTimer()
	defer pt.Close()
	if s.SleepLate, err = h.bareSend(scheduleOf(lv), sc, sleepThenSpin(pt)); err != nil {
		return out, err
	}
	return out, nil
}

// scheduleOf is an open-loop level's send offsets: the trace's, or its
// constant rate's.
func scheduleOf(lv load.Level) []time.Duration {
	if lv.Offsets != nil {
		return lv.Offsets
	}
	gap := time.Duration(float64(time.Second) / lv.Load.RateRPS)
	offsets := make([]time.Duration, lv.Requests)
	for i := range offsets {
		offsets[i] = time.Duration(i) * gap
	}
	return offsets
}

// ticker measures the machine's wake-up floor beside the client's own: a
// bare Go ticker and the precise timer, alone for 3 s each, then the
// self-check's ticker at one idle user (a closed loop of one stream of
// 5 ms chunks).
func (h *harness) ticker() (Result, error) {
	bare := tickLags(600, func(due time.Time) { time.Sleep(time.Until(due)) })
	pt := pace.NewTimer()
	precise := tickLags(600, func(due time.Time) { pt.Until(nil, due) })
	pt.Close()
	lv := load.Level{Load: metrics.Load{Mode: metrics.ModeConcurrency, Concurrency: 1}, Requests: 20}
	out, res, err := h.level("ticker c=1", levelRun{client: h.options(), base: h.base, lv: lv, src: source{tokens: 64, ttft: 5 * time.Millisecond, gap: 5 * time.Millisecond, burst: 1}})
	if err != nil {
		return out, err
	}
	s := &Sends{BareTick: spread(bare), TimerTick: spread(precise)}
	if c := res.Level.Client; c != nil {
		s.SelfTick = &Spread{P50: c.TickLagP50Ms, P99: c.TickLagP99Ms, Max: c.TickLagMaxMs}
	}
	out.Sends = s
	runtime.GC()
	return out, nil
}

// tickLags is how late each of n waits on a 5 ms schedule woke, in ms.
func tickLags(n int, wait func(time.Time)) []float64 {
	lags := make([]float64, 0, n)
	next := time.Now()
	for range n {
		next = next.Add(5 * time.Millisecond)
		wait(next)
		lags = append(lags, float64(time.Since(next))/float64(time.Millisecond))
	}
	slices.Sort(lags)
	return lags
}

// printSends prints the send scenarios' figures under a result's line.
func printSends(w io.Writer, s *Sends) {
	for _, t := range []struct {
		name string
		s    *Spread
	}{{"bare Go ticker", s.BareTick}, {"bare precise timer", s.TimerTick}, {"self-check ticker at c=1", s.SelfTick}} {
		if t.s != nil {
			fmt.Fprintf(w, "        %-25s lag p50 %.3f p99 %.3f max %.3f ms\n", t.name, t.s.P50, t.s.P99, t.s.Max)
		}
	}
	if l := s.WireLate; l != nil {
		fmt.Fprintf(w, "        on the wire: late p50 %.3f p99 %.3f max %.3f min %.3f ms (%d sends; %d > 0.5 ms, %d > 1 ms; %d unmatched)\n",
			l.P50, l.P99, l.Max, l.Min, l.N, s.Over05, s.Over1, s.Unmatched)
		if b := s.BareLate; b != nil {
			fmt.Fprintf(w, "        the floor, a bare sender spinning to each instant: late p50 %.3f p99 %.3f max %.3f ms (%d sends)\n", b.P50, b.P99, b.Max, b.N)
		}
		if b := s.SleepLate; b != nil {
			fmt.Fprintf(w, "        the sleeping floor, a bare sender sleeping to 1 ms before each instant: late p50 %.3f p99 %.3f max %.3f ms (%d sends)\n", b.P50, b.P99, b.Max, b.N)
		}
		if b := s.LateBy; b != nil {
			fmt.Fprintf(w, "        tokbench's late sends by cause: %v\n", *b)
		}
		fmt.Fprintf(w, "        pacer: lead p50 %.3f ms (learned %.3f), wake-up late p99 %.3f ms, CPU %.1f%% of a core; connections: %d spare opened, %d dialled by a send\n",
			s.LeadMs, s.LearnedMs, s.WakeP99Ms, 100*s.PacerShare, s.SpareOpened, s.DialsOnSend)
		if s.KeptAwakeCPUs > 0 {
			fmt.Fprintf(w, "        kept awake: %d processors, their loops %.2f CPU-s of otherwise idle time\n", s.KeptAwakeCPUs, s.KeptAwakeCPUSeconds)
		}
	}
}
