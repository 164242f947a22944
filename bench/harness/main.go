// Command harness measures tokbench's own cost and accuracy: it builds and
// starts bench/fakeserver as a separate process on loopback, drives it with
// load.Runner and api.NewTransport (the code `tokbench bench` runs) and
// reports, per scenario, the client's timing error (recorded chunk arrival
// minus the server's send instant, which every chunk carries), TTFT error,
// tokens/s ingested, requests/s, client CPU per million tokens and per
// request (getrusage), peak RSS, memory per idle stream and open-loop pacing
// error. See bench/README.md.
//
//	go run ./bench/harness              # every scenario, about 45 s
//	go run ./bench/harness -only paced -levels 1,100
//
// Every scenario is bounded (fixed request counts, a request timeout) and
// the server exits when the harness does.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tokbench/tokbench/api"
	"github.com/tokbench/tokbench/load"
	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/tokenize"
	"github.com/tokbench/tokbench/wire"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "harness:", err)
		os.Exit(1)
	}
}

// Result is one scenario's figures; zero fields do not apply.
type Result struct {
	Scenario    string          `json:"scenario"`
	Streams     int             `json:"streams,omitempty"`
	RateRPS     float64         `json:"rate_rps,omitempty"`
	Requests    int             `json:"requests"`
	Failed      int             `json:"failed"`
	Tokens      int             `json:"tokens"`
	WallS       float64         `json:"wall_s"`
	TokensPerS  float64         `json:"tokens_per_s"`
	CPUSPerMTok float64         `json:"cpu_s_per_mtok,omitempty"`
	CPUUtil     float64         `json:"cpu_utilization"` // client CPU / (wall × cores)
	ReqPerS     float64         `json:"requests_per_s,omitempty"`
	CPUUsPerReq float64         `json:"cpu_us_per_request,omitempty"`
	ErrP50Ms    float64         `json:"chunk_err_p50_ms,omitempty"`
	ErrP99Ms    float64         `json:"chunk_err_p99_ms,omitempty"`
	ErrMaxMs    float64         `json:"chunk_err_max_ms,omitempty"`
	ErrMinMs    float64         `json:"chunk_err_min_ms,omitempty"`
	SteadyP99Ms float64         `json:"steady_chunk_err_p99_ms,omitempty"`
	SteadyFrom  int             `json:"steady_from_chunk,omitempty"` // SteadyP99Ms counts each request's chunks from this one (0-based)
	Offered     float64         `json:"offered_tokens_per_s,omitempty"`
	TTFTErrP50  float64         `json:"ttft_err_p50_ms,omitempty"`
	TTFTErrP99  float64         `json:"ttft_err_p99_ms,omitempty"`
	QueueP50Ms  float64         `json:"queue_p50_ms,omitempty"`
	QueueP99Ms  float64         `json:"queue_p99_ms,omitempty"`
	QueueMaxMs  float64         `json:"queue_max_ms,omitempty"`
	SentPerS    float64         `json:"sent_per_s,omitempty"` // open loop: requests sent per second, first send to last
	IdleHeapKB  float64         `json:"idle_go_kb_per_stream,omitempty"`
	IdleRSSKB   float64         `json:"idle_rss_kb_per_stream,omitempty"`
	PeakRSSMB   float64         `json:"peak_rss_mb"`
	Warnings    []string        `json:"warnings,omitempty"`
	Client      json.RawMessage `json:"client,omitempty"`
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("harness", flag.ContinueOnError)
	levels := fs.String("levels", "1,100,1000,5000", "concurrent streams of the paced scenarios")
	only := fs.String("only", "", "run one scenario kind: idle, pacing, paced, stress, burst, requests or flat")
	burstLevels := fs.String("burst-levels", "1000", "concurrent streams of the burst scenarios")
	stressLevels := fs.String("stress-levels", "1000", "concurrent streams of the stress scenarios")
	requestLevels := fs.String("request-levels", "1,100,1000", "concurrent users of the requests scenarios")
	server := fs.String("server", "", "fakeserver binary (default: go build ./bench/fakeserver)")
	out := fs.String("json", "", "also write the results as JSON to this file")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the client to this file")
	offered := fs.Float64("offered", 25000, "tokens/s the paced and burst scenarios offer across all streams (each stream at most 500)")
	stressOffered := fs.Float64("stress-offered", 50000, "tokens/s the stress scenarios offer across all streams")
	step := fs.Bool("step", false, "paced and burst streams write on one step grid, every stream's chunk at the same instant, as a batching engine's decode steps")
	serverProfile := fs.String("server-cpuprofile", "", "have the server write a CPU profile of itself to this file")
	rxStamp := fs.Bool("rxstamp", true, "stamp chunks with the kernel's receive instant, as tokbench bench does (false: the instant the client read them)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	raiseFileLimit()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	streams, err := counts("-levels", *levels)
	if err != nil {
		return err
	}
	bursts, err := counts("-burst-levels", *burstLevels)
	if err != nil {
		return err
	}
	stresses, err := counts("-stress-levels", *stressLevels)
	if err != nil {
		return err
	}
	if *offered <= 0 || *stressOffered <= 0 {
		return errors.New("-offered and -stress-offered must be positive")
	}
	users, err := counts("-request-levels", *requestLevels)
	if err != nil {
		return err
	}
	srv, err := startServer(*server, *serverProfile)
	if err != nil {
		return err
	}
	defer srv.stop()
	tok, err := tokenize.Get("cl100k_base")
	if err != nil {
		return err
	}
	h := &harness{base: "http://" + srv.addr + "/v1", tok: tok, rxStamp: *rxStamp, offered: *offered, stressOffered: *stressOffered, step: *step}
	fmt.Fprintf(stdout, "tokbench harness: GOMAXPROCS=%d NumCPU=%d, server %s (separate process), kernel receive stamps %v\n", runtime.GOMAXPROCS(0), runtime.NumCPU(), srv.addr, *rxStamp)
	var results []Result
	emit := func(r Result, err error) error {
		if err != nil {
			return err
		}
		results = append(results, r)
		printResult(stdout, r)
		// Let the previous scenario's connections close on both sides and
		// its garbage go before the next one starts.
		runtime.GC()
		time.Sleep(300 * time.Millisecond)
		return nil
	}
	want := func(kind string) bool { return *only == "" || *only == kind }
	// Idle and pacing first: the heavy scenarios leave a large heap and RSS
	// behind that would blur them.
	if want("idle") {
		if err := emit(h.idle(1000)); err != nil {
			return err
		}
	}
	if want("pacing") {
		if err := emit(h.pacing(500, 1500)); err != nil {
			return err
		}
		if err := emit(h.pacing(5000, 10000)); err != nil {
			return err
		}
	}
	if want("paced") {
		for _, c := range streams {
			if err := emit(h.paced(c)); err != nil {
				return err
			}
		}
	}
	if want("stress") {
		for _, c := range stresses {
			if err := emit(h.stress(c)); err != nil {
				return err
			}
		}
	}
	if want("burst") {
		for _, c := range bursts {
			if err := emit(h.burst(c)); err != nil {
				return err
			}
		}
	}
	if want("requests") {
		for _, c := range users {
			if err := emit(h.requests(c)); err != nil {
				return err
			}
		}
	}
	if want("flat") {
		for _, c := range []int{1, 100, 1000} {
			if err := emit(h.flat(c)); err != nil {
				return err
			}
		}
	}
	if *out != "" {
		b, _ := json.MarshalIndent(results, "", "  ")
		if err := os.WriteFile(*out, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// counts reads a comma-separated list of positive counts.
func counts(flag, list string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%s: %q is not a positive count", flag, f)
		}
		out = append(out, n)
	}
	return out, nil
}

func printResult(w io.Writer, r Result) {
	load := fmt.Sprintf("c=%d", r.Streams)
	if r.RateRPS > 0 {
		load = fmt.Sprintf("%g req/s", r.RateRPS)
	}
	fmt.Fprintf(w, "%-7s %-8s req %5d fail %d tok %8d  %6.2fs  %9.0f tok/s", r.Scenario, load, r.Requests, r.Failed, r.Tokens, r.WallS, r.TokensPerS)
	if r.ReqPerS > 0 {
		fmt.Fprintf(w, "  %6.0f req/s  cpu %.0f µs/request (%.0f%% of cores)", r.ReqPerS, r.CPUUsPerReq, 100*r.CPUUtil)
	} else if r.CPUSPerMTok > 0 {
		fmt.Fprintf(w, "  cpu %.2f s/Mtok (%.0f%% of cores)", r.CPUSPerMTok, 100*r.CPUUtil)
	}
	if r.ErrP99Ms > 0 || r.ErrP50Ms > 0 {
		fmt.Fprintf(w, "  chunk err p50 %.3f p99 %.3f max %.2f ms (from chunk %d p99 %.3f)  TTFT err p50 %.3f p99 %.3f ms",
			r.ErrP50Ms, r.ErrP99Ms, r.ErrMaxMs, r.SteadyFrom+1, r.SteadyP99Ms, r.TTFTErrP50, r.TTFTErrP99)
	}
	if r.RateRPS > 0 {
		fmt.Fprintf(w, "  sent %.0f req/s  queue p50 %.3f p99 %.3f max %.2f ms", r.SentPerS, r.QueueP50Ms, r.QueueP99Ms, r.QueueMaxMs)
	}
	if r.IdleHeapKB > 0 {
		fmt.Fprintf(w, "  idle: %.1f KB/stream Go memory, %.1f KB/stream RSS", r.IdleHeapKB, r.IdleRSSKB)
	}
	fmt.Fprintf(w, "  peak RSS %.0f MB\n", r.PeakRSSMB)
	if len(r.Client) > 0 {
		fmt.Fprintf(w, "        client self-check %s\n", r.Client)
	}
	for _, wn := range r.Warnings {
		fmt.Fprintf(w, "        warning: %s\n", wn)
	}
}

type harness struct {
	base          string
	tok           tokenize.Tokenizer
	rxStamp       bool
	offered       float64 // tokens/s the paced and burst streams offer in all (at most 500 per stream)
	stressOffered float64 // the same for the stress streams
	step          bool    // paced and burst streams write on a step grid shared by all streams
}

// source sends the same short prompt with the server's pacing in the body.
type source struct {
	tokens    int
	ttft, gap time.Duration
	burst     int
	step      bool // writes on the server's step grid, as a batching engine
}

func (s source) Request(int) (*api.Request, int) {
	return &api.Request{Model: "fake", MaxTokens: s.tokens,
		Messages: []api.Message{{Role: "user", Content: "hello there"}},
		Extra: map[string]any{"bench": map[string]any{
			"ttft_us": s.ttft.Microseconds(), "gap_us": s.gap.Microseconds(), "burst": s.burst, "step": s.step}},
	}, 2
}

// stampAdapter is the OpenAI adapter plus the harness's measurement: after
// a stream is decoded, each chunk's text " t<unix ns>" gives the server's
// send instant, compared with the chunk's recorded arrival. The text is then
// replaced by an ordinary word, so the runner's token counting sees what a
// real stream gives it (repeating short words) rather than unique numbers.
type stampAdapter struct {
	api.OpenAI
	mu         sync.Mutex
	collect    bool
	errs       []float64 // ms, every token chunk
	steady     []float64 // ms, token chunks from a request's steadyFrom-th on
	steadyFrom int
	first      []float64 // ms, the first token chunk of each request
	bad        int
}

func (a *stampAdapter) Decode(body io.Reader, resp *api.Response) {
	a.OpenAI.Decode(body, resp)
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := range resp.Chunks {
		c := &resp.Chunks[i]
		sent, err := strconv.ParseInt(strings.TrimPrefix(c.Text, " t"), 10, 64)
		c.Text = " the"
		if err != nil {
			a.bad++
			continue
		}
		if !a.collect {
			continue
		}
		e := float64(c.At.UnixNano()-sent) / 1e6
		a.errs = append(a.errs, e)
		if i >= a.steadyFrom {
			a.steady = append(a.steady, e)
		}
		if i == 0 {
			a.first = append(a.first, e)
		}
	}
}

func (h *harness) runner(collect bool) (*load.Runner, *stampAdapter, func()) {
	tr := wire.NewTransport() // what tokbench bench measures with
	if !h.rxStamp {
		tr.Fallback.DialContext = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	ad := &stampAdapter{OpenAI: api.OpenAI{Chat: true}, collect: collect}
	r := &load.Runner{
		Client:    &api.Client{HTTP: &http.Client{Transport: tr}, Adapter: ad, BaseURL: h.base},
		Tokenizer: h.tok,
		Timeout:   2 * time.Minute,
	}
	return r, ad, tr.CloseIdleConnections
}

// level runs one level and fills the common figures.
func (h *harness) level(name string, r *load.Runner, lv load.Level, src load.Source) (Result, load.Result, error) {
	debug.FreeOSMemory() // a collection, and the freed memory back to the system
	ownPeak := resetPeakRSS()
	cpu0 := cpuTime()
	t0 := time.Now()
	res, err := r.RunLevel(context.Background(), 0, lv, src)
	wall := time.Since(t0)
	cpu := cpuTime() - cpu0
	if err != nil {
		return Result{}, res, fmt.Errorf("%s: %w", name, err)
	}
	l := res.Level
	out := Result{Scenario: name, Streams: lv.Load.Concurrency, RateRPS: lv.Load.RateRPS,
		Requests: l.Requests.Sent, Failed: l.Requests.Failed, Tokens: l.OutputTokens,
		WallS: l.DurationS, TokensPerS: l.OutputTPS, PeakRSSMB: peakRSSMB(), Warnings: l.Warnings,
		CPUUtil: cpu.Seconds() / (wall.Seconds() * float64(runtime.GOMAXPROCS(0)))}
	if l.OutputTokens > 0 {
		out.CPUSPerMTok = cpu.Seconds() / float64(l.OutputTokens) * 1e6
	}
	if c := clientBlock(l); c != nil {
		out.Client = c
	}
	if l.Requests.Failed > 0 {
		out.Warnings = append(out.Warnings, fmt.Sprintf("%d requests failed: %v", l.Requests.Failed, l.Requests.Errors))
	}
	if !ownPeak {
		out.Warnings = append(out.Warnings, "peak RSS is the whole run's: the peak could not be reset before this level")
	}
	return out, res, nil
}

// clientBlock is the level's client self-check as JSON, when it has one.
func clientBlock(l metrics.Level) json.RawMessage {
	b, err := json.Marshal(l)
	if err != nil {
		return nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return nil
	}
	return m["client"]
}

// paced: c streams, 64 tokens each one chunk at a time, at a gap that keeps
// the offered load near -offered tokens/s (25,000: 25 tokens/s a stream at
// 1,000 streams); measures the timing error. The users start evenly over
// one answer's length (bench --ramp-up), so the level is c streams in
// steady state: about c/(answer length) request starts a second rather
// than c at one instant (that is the burst scenario).
func (h *harness) paced(c int) (Result, error) { return h.streams("paced", c, true, h.offered) }

// stress: the paced load at -stress-offered tokens/s (50,000: 50 tokens/s a
// stream at 1,000 streams), where the server and the client together need
// most of a 2-core machine: it shows what an overloaded machine does to
// the figures, and that the self-check says so.
func (h *harness) stress(c int) (Result, error) {
	return h.streams("stress", c, true, h.stressOffered)
}

// burst: the paced load with every user starting at the same instant, two
// rounds in lockstep: c request starts at once, twice.
func (h *harness) burst(c int) (Result, error) { return h.streams("burst", c, false, h.offered) }

func (h *harness) streams(name string, c int, ramp bool, offered float64) (Result, error) {
	// Two answers per stream: every user's second answer runs with all c
	// streams open. Shorter answers at 5,000 streams keep the level short.
	tokens, rounds := 64, 2
	if c >= 5000 {
		tokens = 16
	}
	gap := max(2*time.Millisecond, time.Duration(float64(c)/offered*float64(time.Second)))
	r, ad, closeIdle := h.runner(true)
	defer closeIdle()
	// Warm-up requests (one per stream, not recorded) open the connections
	// first, so that the figures are the steady state, not c dials at once.
	src := source{tokens: tokens, ttft: 5 * time.Millisecond, gap: gap, burst: 1, step: h.step}
	warm := load.Level{Load: metrics.Load{Mode: "concurrency", Concurrency: c}, Requests: c}
	ad.collect = false
	if _, err := r.RunLevel(context.Background(), 0, warm, source{tokens: 2, ttft: time.Millisecond, gap: time.Millisecond}); err != nil {
		return Result{}, err
	}
	ad.mu.Lock()
	ad.collect = true
	ad.steadyFrom = min(16, tokens/2)
	ad.mu.Unlock()
	lv := load.Level{Load: metrics.Load{Mode: "concurrency", Concurrency: c}, Requests: max(c*rounds, 20)}
	if ramp {
		lv.RampUp = src.ttft + time.Duration(tokens)*gap
	}
	out, _, err := h.level(name, r, lv, src)
	if err != nil {
		return out, err
	}
	if ad.bad > 0 {
		out.Warnings = append(out.Warnings, fmt.Sprintf("%d chunks without a send stamp", ad.bad))
	}
	slices.Sort(ad.errs)
	slices.Sort(ad.first)
	out.ErrP50Ms, out.ErrP99Ms = metrics.Percentile(ad.errs, 50), metrics.Percentile(ad.errs, 99)
	if len(ad.errs) > 0 {
		out.ErrMinMs, out.ErrMaxMs = ad.errs[0], ad.errs[len(ad.errs)-1]
	}
	out.TTFTErrP50, out.TTFTErrP99 = metrics.Percentile(ad.first, 50), metrics.Percentile(ad.first, 99)
	slices.Sort(ad.steady)
	out.SteadyP99Ms = metrics.Percentile(ad.steady, 99)
	out.SteadyFrom = ad.steadyFrom
	out.Offered = offered
	return out, nil
}

// requests: c closed-loop users of one-token answers with no server delay;
// measures the request rate the client sustains and its CPU per request.
func (h *harness) requests(c int) (Result, error) {
	r, _, closeIdle := h.runner(false)
	defer closeIdle()
	lv := load.Level{Load: metrics.Load{Mode: "concurrency", Concurrency: c}, Requests: max(20*c, 2000)}
	out, _, err := h.level("requests", r, lv, source{tokens: 1})
	if done := out.Requests - out.Failed; done > 0 && out.WallS > 0 {
		out.CPUUsPerReq = out.CPUSPerMTok * float64(out.Tokens) / float64(done) // s per million tokens × tokens per request
		out.ReqPerS = float64(done) / out.WallS
	}
	return out, err
}

// flat: c streams of 2,000 tokens written as fast as the socket takes them,
// 16 chunks (one token each) per write; measures ingest rate and CPU.
func (h *harness) flat(c int) (Result, error) {
	const tokens = 2000
	r, _, closeIdle := h.runner(false)
	defer closeIdle()
	requests := max(2*c, 100)
	if c >= 1000 {
		requests = c
	}
	lv := load.Level{Load: metrics.Load{Mode: "concurrency", Concurrency: c}, Requests: requests}
	out, _, err := h.level("flat", r, lv, source{tokens: tokens, burst: 16})
	return out, err
}

// idle: n streams whose server holds back the first token for 3 s; the
// client's memory is sampled once all are open and waiting.
func (h *harness) idle(n int) (Result, error) {
	r, _, closeIdle := h.runner(false)
	defer closeIdle()
	heap0, rss0 := memNow()
	type done struct {
		out Result
		err error
	}
	ch := make(chan done, 1)
	go func() {
		lv := load.Level{Load: metrics.Load{Mode: "concurrency", Concurrency: n}, Requests: n}
		out, _, err := h.level("idle", r, lv, source{tokens: 1, ttft: 3 * time.Second})
		ch <- done{out, err}
	}()
	deadline := time.Now().Add(2500 * time.Millisecond)
	for r.Progress.InFlight.Load() < int64(n) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	open := r.Progress.InFlight.Load()
	time.Sleep(300 * time.Millisecond) // headers arrive at once; let every stream reach its first read
	heap1, rss1 := memNow()
	d := <-ch
	if d.err != nil {
		return d.out, d.err
	}
	d.out.IdleHeapKB = float64(heap1-heap0) / 1024 / float64(open)
	d.out.IdleRSSKB = float64(rss1-rss0) / 1024 / float64(open)
	if open < int64(n) {
		d.out.Warnings = append(d.out.Warnings, fmt.Sprintf("only %d of %d streams were open when memory was sampled", open, n))
	}
	return d.out, nil
}

// pacing: an open-loop constant schedule at rate req/s of short answers;
// the client's queue time (actual send − scheduled send) is the pacing error.
func (h *harness) pacing(rate float64, requests int) (Result, error) {
	r, _, closeIdle := h.runner(false)
	defer closeIdle()
	lv := load.Level{Load: metrics.Load{Mode: "rate", RateRPS: rate, Arrival: load.ArrivalConstant}, Requests: requests}
	out, res, err := h.level("pacing", r, lv, source{tokens: 2, ttft: time.Millisecond, gap: time.Millisecond})
	if err != nil {
		return out, err
	}
	if q := res.Level.QueueMs; q != nil {
		out.QueueP50Ms, out.QueueP99Ms, out.QueueMaxMs = q.P50, q.P99, q.Max
	}
	out.SentPerS = sentRate(res.Records)
	return out, nil
}

// sentRate is the rate the sends kept: the requests after the first, over
// the time from the first send to the last; 0 with fewer than two sends.
func sentRate(recs []metrics.Record) float64 {
	if len(recs) < 2 {
		return 0
	}
	first, last := recs[0].OffsetMs, recs[0].OffsetMs
	for _, rec := range recs[1:] {
		first, last = min(first, rec.OffsetMs), max(last, rec.OffsetMs)
	}
	if last <= first {
		return 0
	}
	return float64(len(recs)-1) / ((last - first) / 1000)
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// resetPeakRSS starts the process's peak resident set size afresh (Linux:
// writing 5 to /proc/self/clear_refs), so each level reports its own peak;
// false where it cannot.
func resetPeakRSS() bool { return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil }

// peakRSSMB is the peak resident set size since resetPeakRSS (VmHWM), or
// over the process's life where that cannot be read.
func peakRSSMB() float64 {
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				if kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64); err == nil {
					return kb / 1024
				}
			}
		}
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Maxrss) / 1024 // kilobytes on Linux
}

// memNow is the Go memory in use after a collection (heap spans in use plus
// goroutine stacks) and the resident set size, in bytes.
func memNow() (goBytes, rss int64) {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	goBytes = int64(m.HeapInuse + m.StackInuse)
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 1 {
			pages, _ := strconv.ParseInt(f[1], 10, 64)
			rss = pages * int64(os.Getpagesize())
		}
	}
	return goBytes, rss
}

func raiseFileLimit() {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) == nil && l.Cur < l.Max {
		l.Cur = l.Max
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
	}
}

type serverProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	addr  string
	dir   string
}

// startServer builds (unless given) and starts the fake server, and waits
// for its address.
func startServer(bin, cpuProfile string) (*serverProc, error) {
	p := &serverProc{}
	if bin == "" {
		dir, err := os.MkdirTemp("", "tokbench-harness-")
		if err != nil {
			return nil, err
		}
		p.dir = dir
		bin = filepath.Join(dir, "fakeserver")
		build := exec.Command("go", "build", "-o", bin, "github.com/tokbench/tokbench/bench/fakeserver")
		build.Stderr = os.Stderr
		if err := build.Run(); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("build fakeserver: %w", err)
		}
	}
	args := []string{"-addr", "127.0.0.1:0", "-max", "15m"}
	if cpuProfile != "" {
		args = append(args, "-cpuprofile", cpuProfile)
	}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stderr = os.Stderr
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start fakeserver: %w", err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on ")
	if err != nil || !ok {
		p.stop()
		return nil, errors.New("fakeserver did not report its address")
	}
	p.addr = addr
	return p, nil
}

func (p *serverProc) stop() {
	p.stdin.Close() // the server exits when its stdin closes
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		p.cmd.Process.Kill()
		<-done
	}
	if p.dir != "" {
		os.RemoveAll(p.dir)
	}
}
