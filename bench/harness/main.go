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
	"bufio"
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
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
	offered := fs.Float64("offered", 25000, "tokens/s the paced and burst scenarios offer across all streams (each stream at most 500)")
	stressOffered := fs.Float64("stress-offered", 50000, "tokens/s the stress scenarios offer across all streams")
	step := fs.Bool("step", false, "paced and burst streams write on one step grid, every stream's chunk at the same instant, as a batching engine's decode steps")
	serverProfile := fs.String("server-cpuprofile", "", "have the server write a CPU profile of itself to this file")
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
	h := &harness{tok: tok, rxStamp: *rxStamp, offered: *offered, stressOffered: *stressOffered, step: *step}
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
// send instant, compared with the chunk's recorded arrival; the first
// chunk's " t<ns> r<ns>" also gives the request's arrival at the server.
// The text is then replaced by an ordinary word, so the runner's token
// counting sees what a real stream gives it (repeating short words) rather
// than unique numbers.
type stampAdapter struct {
	api.Adapter // the run's own (set by the Adapter hook)
	mu          sync.Mutex
	collect     bool      // from the measured level's start: warm-up answers are not figures
	errs        []float64 // ms, every token chunk
	steady      []float64 // ms, token chunks from a request's steadyFrom-th on
	steadyFrom  int
	first       []float64 // ms, the first token chunk of each request
	bad         int
	// truth holds, by the response's Start (unix ns), each answer's true
	// TTFT from the server's instants (first chunk sent − request
	// arrived) beside the TTFT the client records for it, so that the
	// first scenario can pair them with the level's records afterwards.
	truth map[int64][]firstTruth
}

// firstTruth is one answer's TTFT: as the record gives it (first chunk's
// recorded arrival − Start, as load.Record computes it) and as the server's
// instants give it, in ms.
type firstTruth struct {
	recorded, truth float64
	arrival         int64 // unix ns: the server's kernel receive stamp of the request
}

// parseStamp reads a chunk's " t<send ns>", or " t<send ns> r<arrival ns>"
// when first (arrival 0 when the r part is absent).
func parseStamp(text string, first bool) (sent, arrival int64, err error) {
	s := strings.TrimPrefix(text, " t")
	if first {
		if st, r, ok := strings.Cut(s, " r"); ok {
			if arrival, err = strconv.ParseInt(r, 10, 64); err != nil {
				return 0, 0, err
			}
			s = st
		}
	}
	sent, err = strconv.ParseInt(s, 10, 64)
	return sent, arrival, err
}

// start collects from now on.
func (a *stampAdapter) start() {
	a.mu.Lock()
	a.collect = true
	a.mu.Unlock()
}

func (a *stampAdapter) Decode(body io.Reader, resp *api.Response) {
	a.Adapter.Decode(body, resp)
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := range resp.Chunks {
		c := &resp.Chunks[i]
		sent, arrival, err := parseStamp(c.Text, i == 0)
		c.Text = " the"
		if err != nil {
			a.bad++
			continue
		}
		if !a.collect {
			continue
		}
		if i == 0 && arrival > 0 {
			if a.truth == nil {
				a.truth = make(map[int64][]firstTruth)
			}
			k := resp.Start.UnixNano()
			a.truth[k] = append(a.truth[k], firstTruth{
				recorded: float64(c.At.Sub(resp.Start)) / float64(time.Millisecond),
				truth:    float64(sent-arrival) / 1e6,
				arrival:  arrival,
			})
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

// options are the client options tokbench bench measures with by default,
// with -rxstamp=false a plain dialer instead of kernel receive stamps.
func (h *harness) options() benchmark.ClientOptions {
	o := benchmark.ClientOptions{Timeout: 2 * time.Minute}
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
		records []metrics.Record
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
	// Warm-up requests (one per stream, not recorded) open the connections
	// first, so that the figures are the steady state, not c dials at once.
	src := source{tokens: tokens, ttft: 5 * time.Millisecond, gap: gap, burst: 1, step: h.step}
	warm := load.Level{Load: metrics.Load{Mode: metrics.ModeConcurrency, Concurrency: c}, Requests: c, Lockstep: true}
	ad := &stampAdapter{steadyFrom: min(16, tokens/2)}
	// Without a ramp (burst), every user starts in the same instant.
	lv := load.Level{Load: metrics.Load{Mode: metrics.ModeConcurrency, Concurrency: c}, Requests: max(c*rounds, 20), Lockstep: !ramp}
	if ramp {
		lv.RampUp = src.ttft + time.Duration(tokens)*gap
	}
	out, _, err := h.level(name, levelRun{client: h.options(), base: h.base, ad: ad,
		warm: warm, warmSrc: source{tokens: 2, ttft: time.Millisecond, gap: time.Millisecond}, lv: lv, src: src})
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
	lv := load.Level{Load: metrics.Load{Mode: metrics.ModeConcurrency, Concurrency: c}, Requests: max(20*c, 2000), Lockstep: true}
	out, _, err := h.level("requests", levelRun{client: h.options(), base: h.base, lv: lv, src: source{tokens: 1}})
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
	requests := max(2*c, 100)
	if c >= 1000 {
		requests = c
	}
	lv := load.Level{Load: metrics.Load{Mode: metrics.ModeConcurrency, Concurrency: c}, Requests: requests, Lockstep: true}
	out, _, err := h.level("flat", levelRun{client: h.options(), base: h.base, lv: lv, src: source{tokens: tokens, burst: 16}})
	return out, err
}

// first: c closed-loop users on a fresh transport, with no warm-up, all
// starting at the same instant, two short answers each (8 tokens, the first
// 100 ms after the request, then one every 5 ms), over mode: http
// (tokbench's own HTTP/1.1 connections), https (HTTP/1.1 over TLS) or h2
// (HTTP/2 over TLS), each against a server process of its own (srv). Every
// user's first request opens a connection (the dial, and the TLS
// handshake), as a real run's first requests do; its second should find
// that connection open. The truth is the server's: the request's arrival
// (the kernel receive stamp of its last byte) and the first chunk's send
// instant, both carried in the first chunk. The TTFT error of a request is
// its record's TTFT − (send − arrival): the request's way to the server
// after the client's t0 (whatever of connection set-up, writing and the
// kernel the t0 leaves inside the TTFT) plus the first chunk's way back
// (the same as the paced TTFT error).
func (h *harness) first(srv *serverProc, mode string, c int) (Result, error) {
	o := h.options()
	scheme := "http"
	if mode != "http" {
		scheme = "https"
		o.TLS = &tls.Config{RootCAs: srv.roots}
	}
	o.HTTP2 = mode == "h2"
	ad := &stampAdapter{}
	before, err := srv.stats()
	if err != nil {
		return Result{}, err
	}
	lv := load.Level{Load: metrics.Load{Mode: metrics.ModeConcurrency, Concurrency: c}, Requests: 2 * c, Lockstep: true} // all users at once, on purpose
	src := source{tokens: 8, ttft: 100 * time.Millisecond, gap: 5 * time.Millisecond, burst: 1}
	out, res, err := h.level("first", levelRun{client: o, base: scheme + "://" + srv.addr + "/v1", ad: ad, lv: lv, src: src})
	if err != nil {
		return out, err
	}
	after, err := srv.stats()
	if err != nil {
		return out, err
	}
	out.Mode = mode
	// Each stats call opens a connection of its own, counted in what it
	// returns: the level's are those between the two, less the second's.
	out.Accepted = after.Accepted - before.Accepted - 1
	if n := after.Requests - before.Requests; n != out.Requests {
		out.Warnings = append(out.Warnings, fmt.Sprintf("the server read %d requests, the client sent %d", n, out.Requests))
	}
	if n := after.H2Requests - before.H2Requests; mode == "h2" && n != out.Requests || mode != "h2" && n != 0 {
		out.Warnings = append(out.Warnings, fmt.Sprintf("%d of %d requests came to the server over HTTP/2", n, out.Requests))
	}
	if ad.bad > 0 {
		out.Warnings = append(out.Warnings, fmt.Sprintf("%d chunks without a send stamp", ad.bad))
	}

	// Pair each record with its answer's truth (by Start, the same
	// time.Time in both; several answers of one Start instant by their
	// recorded TTFT).
	type request struct {
		start      time.Time
		doneMs     float64
		has        bool
		err, truth float64
	}
	reqs := make([]request, 0, len(res.Records))
	var unmatched, mismatched int
	for _, rec := range res.Records {
		q := request{start: rec.Start, doneMs: rec.DoneMs}
		if k := rec.Start.UnixNano(); rec.OK {
			ts := ad.truth[k]
			if len(ts) == 0 {
				unmatched++
			} else {
				j := 0
				for i := range ts {
					if math.Abs(ts[i].recorded-rec.TTFTMs) < math.Abs(ts[j].recorded-rec.TTFTMs) {
						j = i
					}
				}
				if math.Abs(ts[j].recorded-rec.TTFTMs) > 1e-6 {
					mismatched++
				}
				q.has, q.truth, q.err = true, ts[j].truth, rec.TTFTMs-ts[j].truth
				ad.truth[k] = slices.Delete(ts, j, j+1)
			}
		}
		reqs = append(reqs, q)
	}
	if unmatched > 0 {
		out.Warnings = append(out.Warnings, fmt.Sprintf("%d answers without the server's arrival instant in their first chunk", unmatched))
	}
	if mismatched > 0 {
		out.Warnings = append(out.Warnings, fmt.Sprintf("%d answers whose record's TTFT is not the one their first chunk gave", mismatched))
	}

	// Which request of its user each one is. The runner does not say, but
	// a closed loop has an order that does: a user sends its next request
	// only after its previous one ended, so a user's k-th request starts at
	// least k−1 shortest requests (DoneMs, t0 to the end of the response)
	// after the level's first start. Sorted by start, then, the first c
	// requests are exactly the users' first ones when the c-th started
	// within one shortest request of the first (every user has sent its
	// first request before any sends a second), and the rest are exactly
	// the second ones when the last started within two (no user got to a
	// third and left another with one). Both hold by a wide margin here:
	// c users start at one instant and a request takes over 135 ms. When
	// they do not, the split is by start order and the result says so.
	slices.SortFunc(reqs, func(a, b request) int { return a.start.Compare(b.start) })
	if len(reqs) == 2*c {
		shortest := math.Inf(1)
		for _, q := range reqs {
			shortest = min(shortest, q.doneMs)
		}
		t0 := reqs[0].start
		if spreadMs := float64(reqs[c-1].start.Sub(t0)) / 1e6; spreadMs >= shortest {
			out.Warnings = append(out.Warnings, fmt.Sprintf("first requests by start order: the %d-th request started %.1f ms after the first, more than the shortest request (%.1f ms)", c, spreadMs, shortest))
		}
		if spreadMs := float64(reqs[2*c-1].start.Sub(t0)) / 1e6; spreadMs >= 2*shortest {
			out.Warnings = append(out.Warnings, fmt.Sprintf("second requests by start order: the last request started %.1f ms after the first, more than two shortest requests (%.1f ms)", spreadMs, 2*shortest))
		}
	} else {
		out.Warnings = append(out.Warnings, fmt.Sprintf("%d records for %d users × 2 requests: first and second requests by start order", len(reqs), c))
	}
	var firstErr, secondErr, allErr, truths []float64
	nonFinite := 0
	for i, q := range reqs {
		if !q.has {
			continue
		}
		if math.IsNaN(q.err) || math.IsInf(q.err, 0) || math.IsNaN(q.truth) || math.IsInf(q.truth, 0) {
			nonFinite++
			continue
		}
		allErr = append(allErr, q.err)
		truths = append(truths, q.truth)
		if i < c {
			firstErr = append(firstErr, q.err)
		} else {
			secondErr = append(secondErr, q.err)
		}
	}
	if nonFinite > 0 {
		out.Warnings = append(out.Warnings, fmt.Sprintf("%d requests whose TTFT error is not a finite number", nonFinite))
	}
	out.FirstReqErr, out.SecondReqErr, out.AllReqErr = spread(firstErr), spread(secondErr), spread(allErr)
	if t := spread(truths); t != nil {
		out.TrueTTFTMinMs, out.TrueTTFTMaxMs = t.Min, t.Max
	}
	return out, nil
}

// idle: n streams whose server holds back the first token for 3 s; the
// client's memory is sampled once all are open and waiting.
func (h *harness) idle(n int) (Result, error) {
	heap0, rss0 := memNow()
	runner := make(chan *load.Runner, 1)
	type done struct {
		out Result
		err error
	}
	ch := make(chan done, 1)
	go func() {
		lv := load.Level{Load: metrics.Load{Mode: metrics.ModeConcurrency, Concurrency: n}, Requests: n, Lockstep: true}
		out, _, err := h.level("idle", levelRun{client: h.options(), base: h.base, lv: lv,
			src: source{tokens: 1, ttft: 3 * time.Second}, started: func(r *load.Runner) { runner <- r }})
		ch <- done{out, err}
	}()
	var r *load.Runner
	select {
	case r = <-runner:
	case d := <-ch:
		return d.out, cmp.Or(d.err, errors.New("idle: the level ended before it started"))
	}
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
	lv := load.Level{Load: metrics.Load{Mode: metrics.ModeRate, RateRPS: rate, Arrival: load.ArrivalConstant}, Requests: requests}
	out, res, err := h.level("pacing", levelRun{client: h.options(), base: h.base, lv: lv,
		src: source{tokens: 2, ttft: time.Millisecond, gap: time.Millisecond}})
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

type serverProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	addr   string
	scheme string         // http, or https with -tls and -h2
	roots  *x509.CertPool // https: the server's certificate, to trust
	dir    string
}

// buildServer builds the fake server unless bin names one; cleanup
// removes what it built.
func buildServer(bin string) (path string, cleanup func(), err error) {
	if bin != "" {
		return bin, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "tokbench-harness-")
	if err != nil {
		return "", nil, err
	}
	bin = filepath.Join(dir, "fakeserver")
	build := exec.Command("go", "build", "-o", bin, "github.com/tokbench/tokbench/bench/fakeserver")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("build fakeserver: %w", err)
	}
	return bin, func() { os.RemoveAll(dir) }, nil
}

// serverOpts are a fake server's flags.
type serverOpts struct {
	cpuProfile string
	tls        bool   // HTTPS, HTTP/1.1 only (-tls)
	h2         bool   // HTTPS through net/http's server, HTTP/2 and HTTP/1.1 (-h2)
	cpus       string // taskset -c list the server runs on ("": any)
}

// startServer starts the fake server bin, and waits for its address (and
// with TLS reads the certificate it made).
func startServer(bin string, o serverOpts) (*serverProc, error) {
	p := &serverProc{scheme: "http"}
	args := []string{"-addr", "127.0.0.1:0", "-max", "15m"}
	if o.cpuProfile != "" {
		args = append(args, "-cpuprofile", o.cpuProfile)
	}
	var certFile string
	if o.tls || o.h2 {
		dir, err := os.MkdirTemp("", "tokbench-harness-cert-")
		if err != nil {
			return nil, err
		}
		p.dir, p.scheme = dir, "https"
		certFile = filepath.Join(dir, "cert.pem")
		args = append(args, "-tls", "-cert-out", certFile)
		if o.h2 {
			args = append(args, "-h2")
		}
	}
	p.cmd = exec.Command(bin, args...)
	if o.cpus != "" {
		p.cmd = exec.Command("taskset", append([]string{"-c", o.cpus, bin}, args...)...)
	}
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
		if p.dir != "" {
			os.RemoveAll(p.dir)
		}
		return nil, fmt.Errorf("start fakeserver: %w", err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on ")
	if err != nil || !ok {
		p.stop()
		return nil, errors.New("fakeserver did not report its address")
	}
	p.addr = addr
	if certFile != "" {
		pemCert, err := os.ReadFile(certFile)
		p.roots = x509.NewCertPool()
		if err != nil || !p.roots.AppendCertsFromPEM(pemCert) {
			p.stop()
			return nil, fmt.Errorf("fakeserver's certificate: %v", err)
		}
	}
	return p, nil
}

// serverStats is the fake server's GET /stats: counts since it started.
type serverStats struct {
	Accepted   int `json:"accepted"`    // TCP connections
	Requests   int `json:"requests"`    // completion requests
	H2Requests int `json:"h2_requests"` // of those, over HTTP/2
}

// stats reads the server's counts over a connection of its own, closed
// after the answer (HTTP/1.1, no keep-alive): every call adds one accepted
// connection, its own, which the count it returns includes.
func (p *serverProc) stats() (serverStats, error) {
	tr := &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{RootCAs: p.roots}}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get(p.scheme + "://" + p.addr + "/stats")
	if err != nil {
		return serverStats{}, fmt.Errorf("fakeserver stats: %w", err)
	}
	defer resp.Body.Close()
	var st serverStats
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || resp.StatusCode != http.StatusOK {
		return serverStats{}, fmt.Errorf("fakeserver stats: HTTP %d, %v", resp.StatusCode, err)
	}
	return st, nil
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
