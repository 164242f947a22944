// Command harness measures tokbench's own cost and accuracy: it builds and
// starts bench/fakeserver as a separate process on loopback, drives it with
// benchmark.Run (the code path of `tokbench bench`; its hooks give the
// requests and read the server's send stamps) and reports, per scenario, the client's timing error (recorded chunk arrival
// minus the server's send instant, which every chunk carries), TTFT error,
// tokens/s ingested, requests/s, client CPU per million tokens and per
// request (getrusage), peak RSS, memory per idle stream and open-loop pacing
// error, and the TTFT error of requests on fresh connections over HTTP,
// HTTPS and HTTP/2 against the server's own receive stamps. See
// bench/README.md.
//
//	go run ./bench/harness              # every scenario, about 1 minute
//	go run ./bench/harness -only paced -levels 1,100
//	go run ./bench/harness -only first -first-levels 20
//
// Every scenario is bounded (fixed request counts, a request timeout) and
// the server exits when the harness does.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tokbench/tokbench/api"
	"github.com/tokbench/tokbench/benchmark"
	"github.com/tokbench/tokbench/internal/benchutil"
	"github.com/tokbench/tokbench/load"
	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/tokenize"
	"github.com/tokbench/tokbench/workload"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "harness:", err)
		os.Exit(1)
	}
}

// Result is one scenario's figures; zero fields do not apply.
type Result struct {
	Scenario    string  `json:"scenario"`
	Streams     int     `json:"streams,omitempty"`
	RateRPS     float64 `json:"rate_rps,omitempty"`
	Requests    int     `json:"requests"`
	Failed      int     `json:"failed"`
	Tokens      int     `json:"tokens"`
	WallS       float64 `json:"wall_s"`
	TokensPerS  float64 `json:"tokens_per_s"`
	CPUSPerMTok float64 `json:"cpu_s_per_mtok,omitempty"`
	CPUUtil     float64 `json:"cpu_utilization"` // client CPU / (wall × cores)
	ReqPerS     float64 `json:"requests_per_s,omitempty"`
	CPUUsPerReq float64 `json:"cpu_us_per_request,omitempty"`
	ErrP50Ms    float64 `json:"chunk_err_p50_ms,omitempty"`
	ErrP99Ms    float64 `json:"chunk_err_p99_ms,omitempty"`
	ErrMaxMs    float64 `json:"chunk_err_max_ms,omitempty"`
	ErrMinMs    float64 `json:"chunk_err_min_ms,omitempty"`
	SteadyP99Ms float64 `json:"steady_chunk_err_p99_ms,omitempty"`
	SteadyFrom  int     `json:"steady_from_chunk,omitempty"` // SteadyP99Ms counts each request's chunks from this one (0-based)
	Offered     float64 `json:"offered_tokens_per_s,omitempty"`
	TTFTErrP50  float64 `json:"ttft_err_p50_ms,omitempty"`
	TTFTErrP99  float64 `json:"ttft_err_p99_ms,omitempty"`
	QueueP50Ms  float64 `json:"queue_p50_ms,omitempty"`
	QueueP99Ms  float64 `json:"queue_p99_ms,omitempty"`
	QueueMaxMs  float64 `json:"queue_max_ms,omitempty"`
	SentPerS    float64 `json:"sent_per_s,omitempty"` // open loop: requests sent per second, first send to last
	IdleHeapKB  float64 `json:"idle_go_kb_per_stream,omitempty"`
	IdleRSSKB   float64 `json:"idle_rss_kb_per_stream,omitempty"`
	PeakRSSMB   float64 `json:"peak_rss_mb"`
	// The first scenario: the transport (http, https or h2), the TCP
	// connections the server accepted during the level, and the TTFT error
	// (recorded TTFT − true TTFT from the server's instants) of each user's
	// first request, of its second, and of all; the smallest and largest
	// true TTFT.
	Mode          string          `json:"mode,omitempty"`
	Accepted      int             `json:"accepted_conns,omitempty"`
	FirstReqErr   *Spread         `json:"ttft_err_first_request,omitempty"`
	SecondReqErr  *Spread         `json:"ttft_err_second_request,omitempty"`
	AllReqErr     *Spread         `json:"ttft_err_all_requests,omitempty"`
	TrueTTFTMinMs float64         `json:"true_ttft_min_ms,omitempty"`
	TrueTTFTMaxMs float64         `json:"true_ttft_max_ms,omitempty"`
	Warnings      []string        `json:"warnings,omitempty"`
	Client        json.RawMessage `json:"client,omitempty"`
	Sends         *Sends          `json:"sends,omitempty"`
}

// Spread is the distribution of one figure over N requests, in ms.
type Spread struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50_ms"`
	P99 float64 `json:"p99_ms"`
	Max float64 `json:"max_ms"`
	Min float64 `json:"min_ms"`
}

// spread sorts v and summarizes it; nil when v is empty.
func spread(v []float64) *Spread {
	if len(v) == 0 {
		return nil
	}
	slices.Sort(v)
	return &Spread{N: len(v), P50: metrics.Percentile(v, 50), P99: metrics.Percentile(v, 99), Max: v[len(v)-1], Min: v[0]}
}

// run parses the flags, starts the server and runs the scenarios asked
// for, in order. It is long because it is the harness's table of contents:
// one block per scenario, each a few lines calling the scenario's own
// function.
func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("harness", flag.ContinueOnError)
	levels := fs.String("levels", "1,100,1000,5000", "concurrent streams of the paced scenarios")
	only := fs.String("only", "", "run one scenario kind: idle, ticker, pacing, send, paced, reader, stress, burst, requests, flat or first")
	readerLevels := fs.String("reader-levels", "500", "concurrent streams of the reader scenarios (tokbench beside a bare reader)")
	sendRates := fs.String("send-rates", "1,10,48,500,5000", "open-loop rates (req/s) of the send scenarios")
	sendTraces := fs.Bool("send-traces", true, "the send scenarios also replay a sparse, a bursty and a long-prompt trace")
	serverCPUs := fs.String("server-cpus", "", "run the server on these CPUs (taskset -c), e.g. 0; run the harness itself on the others: taskset -c 1 go run ./bench/harness …")
	burstLevels := fs.String("burst-levels", "1000", "concurrent streams of the burst scenarios")
	stressLevels := fs.String("stress-levels", "1000", "concurrent streams of the stress scenarios")
	requestLevels := fs.String("request-levels", "1,100,1000", "concurrent users of the requests scenarios")
	firstLevels := fs.String("first-levels", "100,500", "concurrent users of the first scenarios (fresh connections, two requests each)")
	firstModes := fs.String("first-modes", "http,https,h2server,h2", "transports of the first scenarios: http, https (HTTP/1.1 over TLS), h2server (tokbench's default HTTP/1.1 over TLS to a server that offers HTTP/2) and h2 (HTTP/2 over TLS, bench --http2)")
	server := fs.String("server", "", "fakeserver binary (default: go build ./bench/fakeserver)")
	out := fs.String("json", "", "also write the results as JSON to this file")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the client to this file")
	memProfile := fs.String("memprofile", "", "write a profile of the client's allocations to this file at the end")
	execTrace := fs.String("trace", "", "write a runtime execution trace of the client to this file (go tool trace): what ran when a send or a chunk was late")
	offered := fs.Float64("offered", 25000, "tokens/s the paced and burst scenarios offer across all streams (each stream at most 500)")
	stressOffered := fs.Float64("stress-offered", 50000, "tokens/s the stress scenarios offer across all streams")
	step := fs.Bool("step", false, "paced and burst streams write on one step grid, every stream's chunk at the same instant, as a batching engine's decode steps")
	serverProfile := fs.String("server-cpuprofile", "", "have the server write a CPU profile of itself to this file")
	keepAwake := fs.Bool("keep-awake", false, "run tokbench with --keep-awake (and the send scenarios' floors beside the same loops): a busy loop at SCHED_IDLE on each of the harness's processors while a level runs")
	rxStamp := fs.Bool("rxstamp", true, "stamp chunks with the kernel's receive instant, as tokbench bench does (false: the instant the client read them)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	benchutil.RaiseFileLimit()
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
	if *execTrace != "" {
		f, err := os.Create(*execTrace)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := trace.Start(f); err != nil {
			return err
		}
		defer trace.Stop()
	}
	if *memProfile != "" {
		runtime.MemProfileRate = 64 << 10
		defer func() {
			if f, err := os.Create(*memProfile); err == nil {
				pprof.Lookup("allocs").WriteTo(f, 0)
				f.Close()
			}
		}()
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
	firsts, err := counts("-first-levels", *firstLevels)
	if err != nil {
		return err
	}
	var modes []string
	for _, m := range strings.Split(*firstModes, ",") {
		switch m = strings.TrimSpace(m); m {
		case "http", "https", "h2server", "h2":
			modes = append(modes, m)
		default:
			return fmt.Errorf("-first-modes: %q is not http, https, h2server or h2", m)
		}
	}
	bin, cleanup, err := buildServer(*server)
	if err != nil {
		return err
	}
	defer cleanup()
	tok, err := tokenize.Get("cl100k_base")
	if err != nil {
		return err
	}
	h := &harness{tok: tok, rxStamp: *rxStamp, keepAwake: *keepAwake, offered: *offered, stressOffered: *stressOffered, step: *step}
	// The first scenarios start servers of their own; the others share one.
	where := "servers of its own"
	if *only != "first" {
		srv, err := startServer(bin, serverOpts{cpuProfile: *serverProfile, cpus: *serverCPUs})
		if err != nil {
			return err
		}
		defer srv.stop()
		h.base = "http://" + srv.addr + "/v1"
		where = srv.addr
	}
	fmt.Fprintf(stdout, "tokbench harness: GOMAXPROCS=%d NumCPU=%d, server %s (separate process), kernel receive stamps %v\n", runtime.GOMAXPROCS(0), runtime.NumCPU(), where, *rxStamp)
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
	if want("ticker") {
		if err := emit(h.ticker()); err != nil {
			return err
		}
	}
	if want("send") {
		rates, err := counts("-send-rates", *sendRates)
		if err != nil {
			return err
		}
		if err := h.sends(rates, *sendTraces, emit); err != nil {
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
	if want("reader") {
		cs, err := counts("-reader-levels", *readerLevels)
		if err != nil {
			return err
		}
		for _, c := range cs {
			if err := h.reader(c, emit); err != nil {
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
	if want("first") {
		for _, mode := range modes {
			// A server per transport: a fresh process whose connection
			// count is the client's alone.
			srv, err := startServer(bin, serverOpts{tls: mode != "http", h2: mode == "h2" || mode == "h2server"})
			if err != nil {
				return err
			}
			for _, c := range firsts {
				if err := emit(h.first(srv, mode, c)); err != nil {
					srv.stop()
					return err
				}
			}
			srv.stop()
		}
	}
	if *out != "" {
		b, err := json.MarshalIndent(results, "", "  ")
		if err != nil {
			return err
		}
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
	if r.Mode != "" {
		load += " " + r.Mode
	}
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
	if r.Mode != "" {
		fmt.Fprintf(w, "        %d connections accepted, true TTFT %.2f–%.2f ms; TTFT error (recorded − true):", r.Accepted, r.TrueTTFTMinMs, r.TrueTTFTMaxMs)
		for _, g := range []struct {
			name string
			s    *Spread
		}{{"1st request", r.FirstReqErr}, {"2nd request", r.SecondReqErr}, {"all", r.AllReqErr}} {
			if g.s != nil {
				fmt.Fprintf(w, "  %s (%d) p50 %.3f p99 %.3f max %.3f min %.3f ms", g.name, g.s.N, g.s.P50, g.s.P99, g.s.Max, g.s.Min)
			}
		}
		fmt.Fprintln(w)
	}
	if s := r.Sends; s != nil {
		printSends(w, s)
	}
	if len(r.Client) > 0 {
		fmt.Fprintf(w, "        client self-check %s\n", r.Client)
	}
	for _, wn := range r.Warnings {
		fmt.Fprintf(w, "        warning: %s\n", wn)
	}
}

type harness struct {
	base          string // the shared server's, for every scenario but first
	tok           tokenize.Tokenizer
	rxStamp       bool
	keepAwake     bool
	offered       float64 // tokens/s the paced and burst streams offer in all (at most 500 per stream)
	stressOffered float64 // the same for the stress streams
	step          bool    // paced and burst streams write on a step grid shared by all streams
}

// options are the client options tokbench bench measures with by default,
// with -rxstamp=false a plain dialer instead of kernel receive stamps.
func (h *harness) options() benchmark.ClientOptions {
	o := benchmark.ClientOptions{Timeout: 2 * time.Minute, KeepAwake: h.keepAwake}
	if !h.rxStamp {
		o.Dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	return o
}

// levelRun is one scenario's level: what benchmark.Run (the code path of
// tokbench bench) is given.
type levelRun struct {
	client benchmark.ClientOptions
	base   string // the server's base URL
	// ad reads the send stamps (nil: one that only replaces them with a
	// word, as every answer's are).
	ad *stampAdapter
	// warm, when it has users, is an unmeasured level run first on the
	// same connections (warmSrc its requests).
	warm    load.Level
	warmSrc load.Source
	lv      load.Level
	src     load.Source
	// started, when set, is given the runner as the measured level starts.
	started func(*load.Runner)
}

// level runs one level through benchmark.Run and fills the common figures
// from the measured level alone: CPU, wall time and peak RSS from its
// start to its end; its summary and records.
func (h *harness) level(name string, lr levelRun) (Result, load.Result, error) {
	debug.FreeOSMemory() // a collection, and the freed memory back to the system
	ownPeak := resetPeakRSS()
	levels, sources := []load.Level{lr.lv}, []load.Source{lr.src}
	if lr.warm.Load.Concurrency > 0 {
		levels, sources = []load.Level{lr.warm, lr.lv}, []load.Source{lr.warmSrc, lr.src}
	}
	measured := len(levels) - 1
	collect := lr.ad != nil
	if !collect {
		lr.ad = &stampAdapter{}
	}
	plan := &benchmark.Plan{
		URL: lr.base, API: "openai-chat", Model: "fake", ContinuousUsage: benchmark.Off,
		Client: lr.client, Levels: levels, Repeat: 1,
		Workload: benchmark.Workload{Tokenizer: h.tok, Inputs: []workload.Dist{workload.Fixed(2)}, Output: workload.Fixed(1)},
	}
	var (
		mu      sync.Mutex
		started int
		inLevel bool
		// Sized for the level's requests where it has a count: grown by
		// append, it would copy megabytes at a time under the client
		// being measured.
		records = make([]metrics.Record, 0, max(lr.lv.Requests, 0))
		cpu     time.Duration
		wall    time.Duration
	)
	hooks := benchmark.Hooks{
		Source: func(idx int, _ load.Level) load.Source { return sources[idx] },
		Runner: func(r *load.Runner, _ metrics.Target) error {
			r.Sink = func(rec metrics.Record) {
				mu.Lock()
				if inLevel {
					records = append(records, rec)
				}
				mu.Unlock()
			}
			return nil
		},
		Level: func(r *load.Runner, _ load.Level) func() {
			if started++; started-1 != measured {
				return func() {}
			}
			if collect {
				lr.ad.start()
			}
			if lr.started != nil {
				lr.started(r)
			}
			mu.Lock()
			inLevel = true
			mu.Unlock()
			cpu0, t0 := cpuTime(), time.Now()
			return func() {
				wall, cpu = time.Since(t0), cpuTime()-cpu0
				mu.Lock()
				inLevel = false
				mu.Unlock()
			}
		},
	}
	hooks.Adapter = func(a api.Adapter) api.Adapter { lr.ad.Adapter = a; return lr.ad }
	run, err := benchmark.Run(context.Background(), plan, hooks)
	if err != nil {
		return Result{}, load.Result{}, fmt.Errorf("%s: %w", name, err)
	}
	idx := measured
	if run.NewIndex != nil {
		idx = run.NewIndex[measured]
	}
	res := load.Result{Level: run.Summary.Levels[idx], Records: records}
	l := res.Level
	out := Result{Scenario: name, Streams: lr.lv.Load.Concurrency, RateRPS: lr.lv.Load.RateRPS,
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
