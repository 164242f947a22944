package proxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tokbench/tokbench/api"
	"github.com/tokbench/tokbench/internal/fakellm"
	"github.com/tokbench/tokbench/load"
	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/results"
	"github.com/tokbench/tokbench/wire"
)

// BenchmarkProxyStreams sends 100 concurrent streams through the proxy
// and reports how far its recorded upstream TTFT is from the fake
// server's own first flush (p50, p99, in ms): the measurement's error at
// that load, against the truth no client can bend.
func BenchmarkProxyStreams(b *testing.B) {
	up := fakellm.New(fakellm.Script{TTFT: 30 * time.Millisecond, Gap: 5 * time.Millisecond, Tokens: 24, Usage: true})
	defer up.Close()
	base, records := proxied(b, up.URL)
	var errs []float64
	for b.Loop() {
		var wg sync.WaitGroup
		for range 100 {
			wg.Go(func() {
				if st, _ := chat(b, base, http.Header{}); st != 200 {
					b.Errorf("status %d", st)
				}
			})
		}
		wg.Wait()
	}
	first := map[string]time.Time{}
	for _, s := range up.Streams() {
		if len(s.Flushes) > 0 {
			first[s.ID] = s.Flushes[0]
		}
	}
	for _, r := range records() {
		if f, ok := first[r.ResponseID]; ok && r.OK {
			errs = append(errs, r.TTFTMs-float64(f.Sub(r.Start))/1e6)
		}
	}
	slices.Sort(errs)
	b.ReportMetric(metrics.Percentile(errs, 50), "ttft-err-p50-ms")
	b.ReportMetric(metrics.Percentile(errs, 99), "ttft-err-p99-ms")
}

// BenchmarkProxyOverhead: what the proxy adds to what a client gets, at
// 100 concurrent streams of steady traffic. The proxy runs in a process
// of its own, as it does in front of an application (in one process with
// the fake server and the clients, its goroutines would wait for
// theirs). Each round sends 100 clients' streams straight to a fake
// server, through the proxy, and through a bare TCP relay, with
// tokbench's own client (kernel receive stamps): each client asks for
// perClient streams one after another, the clients' first requests spread
// over one stream's length, so that streams start and end at every
// instant (156 a second) as an application's do, and only the streams
// between each client's first and last, all with 100 open, are measured.
// A chunk's delay is its arrival at the client less the server's flush
// of it; a request's TTFT delay is its way there (the server's kernel
// stamp of its arrival less the client's write) plus its first chunk's
// delay — the client's TTFT less the time the server took, which is the
// server's to choose. It reports the p50 and p99 of each through the
// proxy less the same percentile direct (added-request: the way there
// alone), the proxy process's CPU time per chunk it carried, and the same
// for the relay: the floor any proxy's hop costs on this machine.
// held-p50/p99 are each chunk's own time in the proxy, from the kernel's
// stamp of its arrival there to the kernel's stamp of its arrival at the
// client, and relay-held the relay's (to the end of its write; all its
// reads, the ramps' too): no other process's scheduling is in these.
// A round through Go's own httputil.ReverseProxy in the same process
// (flushing each read, its idle pool as large as the streams), which
// measures nothing, gives what an HTTP proxy on net/http costs:
// revproxy-*. Where socat is installed, a round through it (a process a
// connection, written in C) gives a floor without Go's scheduler:
// socat-*.
func BenchmarkProxyOverhead(b *testing.B) {
	const gap = 20 * time.Millisecond // 50 tokens/s a stream
	script := fakellm.Script{TTFT: 20 * time.Millisecond, Gap: gap, Tokens: 32, Usage: true}
	up := fakellm.New(script)
	defer up.Close()
	dir := b.TempDir()
	px := startChild(b, up.URL+"/v1", dir)
	const streams = 100
	// What a round measured of one way to the server.
	type sample struct {
		ttft, every, req []float64
		chunks           int
		cpu              time.Duration // the proxy process's
	}
	type side struct {
		name    string // its figures' prefix
		cl      *api.Client
		inChild bool // a hop in the proxy's process, whose CPU is counted
		got     sample
	}
	arrived := map[string][]time.Time{} // through the proxy: each chunk's arrival at the client
	client := func(u string) *api.Client {
		return &api.Client{HTTP: &http.Client{Transport: wire.NewTransport()}, Adapter: api.OpenAI{Chat: true}, BaseURL: u + "/v1"}
	}
	direct := &side{cl: client(up.URL)}
	through := &side{name: "proxy", cl: client(px.url), inChild: true}
	// The floors: a TCP relay in the proxy's process (a goroutine per
	// direction copying bytes), which any proxy's hop costs at least, and
	// Go's reverse proxy, which any on net/http does.
	hops := []*side{through,
		{name: "relay", cl: client(px.relay), inChild: true},
		{name: "revproxy", cl: client(px.revproxy), inChild: true}}
	if u := startSocat(b, up.URL); u != "" {
		hops = append(hops, &side{name: "socat", cl: client(u)})
	}
	all := append([]*side{direct}, hops...)
	const perClient = 4                                      // the first and last are the ramps up and down
	span := script.TTFT + time.Duration(script.Tokens-1)*gap // to a stream's last token
	round := func(sd *side) {
		cl, s := sd.cl, &sd.got
		resps := make([]*api.Response, streams*perClient)
		var wg sync.WaitGroup
		for i := range streams {
			wg.Go(func() {
				time.Sleep(time.Duration(i) * span / streams)
				for k := range perClient {
					resps[i*perClient+k] = cl.Do(context.Background(), &api.Request{Model: "m", MaxTokens: 32, Messages: []api.Message{{Role: "user", Content: "hi"}}})
				}
			})
		}
		wg.Wait()
		streams := map[string]fakellm.Stream{}
		for _, st := range up.Streams() {
			streams[st.ID] = st
		}
		for n, r := range resps {
			st := streams[r.ID]
			f := st.Flushes
			if r.Failed() || len(f) != len(r.Chunks) {
				b.Fatalf("stream %s: %s, %d chunks for %d flushes", r.ID, r.Error, len(r.Chunks), len(f))
			}
			s.chunks += len(r.Chunks) // as the CPU time, the round's
			if k := n % perClient; k == 0 || k == perClient-1 {
				continue
			}
			for i, c := range r.Chunks {
				d := float64(c.At.Sub(f[i])) / 1e6
				if i == 0 {
					way := float64(st.Arrived.Sub(r.Start)) / 1e6
					s.ttft, s.req = append(s.ttft, d+way), append(s.req, way)
				}
				s.every = append(s.every, d)
			}
			if sd == through {
				at := make([]time.Time, len(r.Chunks))
				for i, c := range r.Chunks {
					at[i] = c.At
				}
				arrived[r.ID] = at
			}
		}
	}
	rounds := func() {
		round(direct)
		for _, s := range hops {
			var cpu0 time.Duration
			if s.inChild {
				cpu0 = px.cpu(b)
			}
			round(s)
			if s.inChild {
				s.got.cpu += px.cpu(b) - cpu0
			}
		}
	}
	rounds() // connections open, code warm
	for _, s := range all {
		s.got = sample{}
	}
	clear(arrived)
	px.relayHeld(b) // the warm-up's
	for b.Loop() {
		rounds()
	}
	for _, s := range all {
		slices.Sort(s.got.ttft)
		slices.Sort(s.got.every)
		slices.Sort(s.got.req)
	}
	ttft := func(s *sample) []float64 { return s.ttft }
	every := func(s *sample) []float64 { return s.every }
	req := func(s *sample) []float64 { return s.req }
	added := func(s *side, p float64, pick func(*sample) []float64) float64 {
		return metrics.Percentile(pick(&s.got), p) - metrics.Percentile(pick(&direct.got), p)
	}
	b.ReportMetric(added(through, 50, ttft), "added-ttft-p50-ms")
	b.ReportMetric(added(through, 50, req), "added-request-p50-ms")
	b.ReportMetric(added(through, 50, every), "added-chunk-p50-ms")
	for _, s := range hops {
		prefix := s.name + "-" // the proxy's own figures have none
		if s == through {
			prefix = ""
		}
		b.ReportMetric(added(s, 99, ttft), prefix+"added-ttft-p99-ms")
		b.ReportMetric(added(s, 99, req), prefix+"added-request-p99-ms")
		b.ReportMetric(added(s, 99, every), prefix+"added-chunk-p99-ms")
		if s.inChild {
			b.ReportMetric(float64(s.got.cpu)/float64(s.got.chunks)/1e3, s.name+"-cpu-µs/chunk")
		}
	}
	relay50, relay99 := px.relayHeld(b)
	b.ReportMetric(relay50, "relay-held-p50-ms")
	b.ReportMetric(relay99, "relay-held-p99-ms")
	px.stop()
	recs, _, err := results.ReadRecords(dir)
	if err != nil {
		b.Fatal(err)
	}
	errs := recordedTTFTErrors(b, recs, up, (b.N+1)*streams*perClient, 32)
	b.ReportMetric(metrics.Percentile(errs, 50), "recorded-ttft-err-p50-ms")
	b.ReportMetric(metrics.Percentile(errs, 99), "recorded-ttft-err-p99-ms")
	held := heldInProxy(b, recs, arrived)
	b.ReportMetric(metrics.Percentile(held, 50), "held-p50-ms")
	b.ReportMetric(metrics.Percentile(held, 99), "held-p99-ms")
	b.ReportMetric(0, "ns/op")
}

// recordedTTFTErrors checks the records a proxy wrote, one for each of
// the want streams up served, every one with tokens tokens, and returns,
// sorted, how far each recorded upstream TTFT is from the server's own
// (its kernel stamp of the request to its first flush): the way there and
// back on loopback, and any error of the proxy's clock.
func recordedTTFTErrors(b *testing.B, recs []metrics.Record, up *fakellm.Server, want, tokens int) []float64 {
	b.Helper()
	if len(recs) != want {
		b.Fatalf("%d records for %d streams through the proxy", len(recs), want)
	}
	truth := map[string]fakellm.Stream{}
	for _, st := range up.Streams() {
		truth[st.ID] = st
	}
	var errs []float64
	for _, r := range recs {
		st, ok := truth[r.ResponseID]
		if !ok || !r.OK || r.OutputTokens != tokens || len(st.Flushes) == 0 {
			b.Fatalf("record %d: stream %q, ok %v, %d tokens", r.ID, r.ResponseID, r.OK, r.OutputTokens)
		}
		errs = append(errs, r.TTFTMs-float64(st.Flushes[0].Sub(st.Arrived))/1e6)
	}
	slices.Sort(errs)
	return errs
}

// heldInProxy returns, sorted, how long each token-carrying chunk of the
// records spent in the proxy: its kernel receive stamp at the client
// (arrived, by response id) less its kernel receive stamp at the proxy
// (the record's start and chunk offset). Both are the kernel's instants:
// neither the server's scheduling nor the client's is in them.
func heldInProxy(b *testing.B, recs []metrics.Record, arrived map[string][]time.Time) []float64 {
	b.Helper()
	var held []float64
	for _, r := range recs {
		at, ok := arrived[r.ResponseID]
		if !ok {
			continue // a warm-up round's, or a ramp's
		}
		if len(at) < len(r.ChunkMs) {
			b.Fatalf("record %d: %d chunks, the client got %d", r.ID, len(r.ChunkMs), len(at))
		}
		for i, ms := range r.ChunkMs {
			in := r.Start.Add(time.Duration(ms * 1e6))
			held = append(held, float64(at[i].Sub(in))/1e6)
		}
	}
	if len(held) == 0 {
		b.Fatal("no chunks through the proxy")
	}
	slices.Sort(held)
	return held
}

// startSocat starts socat relaying a port of loopback to the server at
// upstream (an http:// URL), a process for each connection, and returns
// its URL; "" when socat is not installed.
func startSocat(b *testing.B, upstream string) string {
	b.Helper()
	path, err := exec.LookPath("socat")
	if err != nil {
		b.Log("socat is not installed: no floor without Go's scheduler")
		return ""
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0") // a free port, for socat
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(path, "TCP-LISTEN:"+port+",bind=127.0.0.1,reuseaddr,fork,nodelay", "TCP:"+strings.TrimPrefix(upstream, "http://")+",nodelay")
	cmd.Stderr = os.Stderr
	// Its children end with it (a group), and it with the benchmark's
	// process, even one a timeout or an interrupt ends.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	b.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); <-exited })
	for range 100 { // until it listens, at most a second
		select {
		case err := <-exited:
			exited <- err // for the cleanup
			b.Fatalf("socat ended before it listened on %s: %v", addr, err)
		default:
		}
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return "http://" + addr
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.Fatalf("socat does not listen on %s", addr)
	return ""
}

// child is a proxy in a process of its own: the test binary run again
// with childEnv set (TestMain).
type child struct {
	url      string
	relay    string // a TCP relay to the same upstream, for the floor
	revproxy string // Go's httputil.ReverseProxy to it
	in       io.WriteCloser
	out      *bufio.Reader
	stop     func() // ends the process and waits for it
}

const (
	childEnv    = "TOKBENCH_PROXY_CHILD_UPSTREAM"
	childOutEnv = "TOKBENCH_PROXY_CHILD_OUT"
)

// startChild starts a proxy process in front of upstream, recording to
// the run directory dir.
func startChild(b *testing.B, upstream, dir string) *child {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+upstream, childOutEnv+"="+dir)
	cmd.Stderr = os.Stderr
	in, _ := cmd.StdinPipe()
	outPipe, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	stop := sync.OnceFunc(func() { in.Close(); cmd.Wait() })
	b.Cleanup(stop)
	c := &child{in: in, out: bufio.NewReader(outPipe), stop: stop}
	line, err := c.out.ReadString('\n')
	if err != nil {
		b.Fatalf("the proxy process: %v", err)
	}
	if f := strings.Fields(line); len(f) == 3 {
		c.url, c.relay, c.revproxy = f[0], f[1], f[2]
	} else {
		b.Fatalf("the proxy process's URLs: %q", line)
	}
	return c
}

// cpu asks the proxy process for its CPU time so far.
func (c *child) cpu(b *testing.B) time.Duration {
	b.Helper()
	line, err := c.ask("cpu")
	ns, perr := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
	if err != nil || perr != nil {
		b.Fatalf("the proxy process's CPU: %q %v", line, err)
	}
	return time.Duration(ns)
}

// ask sends the proxy process a line and reads its answer's.
func (c *child) ask(q string) (string, error) {
	io.WriteString(c.in, q+"\n")
	return c.out.ReadString('\n')
}

// relayHeld asks the proxy process for the p50 and p99 of its relay's
// held times since it last asked, in ms.
func (c *child) relayHeld(b *testing.B) (p50, p99 float64) {
	b.Helper()
	line, err := c.ask("held")
	if _, serr := fmt.Sscan(line, &p50, &p99); err != nil || serr != nil {
		b.Fatalf("the relay's held times: %q %v %v", line, err, serr)
	}
	return p50, p99
}

// relay serves a TCP relay to addr and returns its URL. Its answers are
// read with the kernel's receive stamps, and each read's time in the
// relay (from its stamp to the end of its write to the client) kept in
// held: the floor of what a hop costs a chunk on this machine.
func relay(addr string, held *heldLog) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				up, err := net.Dial("tcp", addr)
				if err != nil {
					return
				}
				go func() { io.Copy(up, c); up.Close() }()
				stamped := wire.StampConn(up)
				buf := make([]byte, copyBuffer)
				for {
					n, err := stamped.Read(buf)
					if n > 0 {
						at := wire.Arrival(stamped, time.Now())
						if _, err := c.Write(buf[:n]); err != nil {
							return
						}
						held.add(time.Since(at))
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

// reverseProxy serves Go's httputil.ReverseProxy to upstream and returns
// its URL: each read flushed to the client at once, as tokbench's proxy
// does, and as many idle connections upstream as the benchmark's streams
// (Go's default keeps two, and would dial for most requests).
func reverseProxy(upstream *url.URL) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 128
	target := &url.URL{Scheme: upstream.Scheme, Host: upstream.Host}
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target) }, FlushInterval: -1, Transport: t}
	go (&http.Server{Handler: rp}).Serve(ln)
	return "http://" + ln.Addr().String()
}

// heldLog keeps how long a relay held each read, for the benchmark to ask.
type heldLog struct {
	mu sync.Mutex
	ms []float64
}

func (h *heldLog) add(d time.Duration) {
	h.mu.Lock()
	h.ms = append(h.ms, float64(d)/1e6)
	h.mu.Unlock()
}

// take returns what was kept, sorted, and forgets it.
func (h *heldLog) take() []float64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	ms := h.ms
	h.ms = nil
	slices.Sort(ms)
	return ms
}

// TestMain runs the proxy process BenchmarkProxyOverhead starts: a proxy
// in front of the upstream childEnv names, recording to the directory
// childOutEnv names, printing its URL with the relay's and the reverse
// proxy's, then answering each line read on stdin, until stdin closes.
func TestMain(m *testing.M) {
	upstream := os.Getenv(childEnv)
	if upstream == "" {
		goleak.VerifyTestMain(m) // fails the tests when a goroutine outlives them
		return
	}
	u, _ := url.Parse(upstream)
	if path := os.Getenv("TOKBENCH_PROXY_CHILD_PROFILE"); path != "" {
		f, _ := os.Create(path)
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	out, err := results.Create(os.Getenv(childOutEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, stop := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	go func() {
		if _, err := Run(ctx, Options{Listen: "127.0.0.1:0", Config: Config{Upstream: u}, Out: out, Ready: func(p, _ string) { ready <- p }}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}()
	var held heldLog
	fmt.Println(<-ready, relay(u.Host, &held), reverseProxy(u))
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		switch sc.Text() {
		case "cpu":
			fmt.Println(int64(cpuTime()))
		case "held":
			ms := held.take()
			fmt.Println(metrics.Percentile(ms, 50), metrics.Percentile(ms, 99))
		}
	}
	stop()
	pprof.StopCPUProfile()
	select {} // Run returns and exits
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkRecordEnded is the work an ended stream of 32 tokens leaves
// the proxy, off its client's way: decoding the kept reads, making the
// record, folding it into the summary and appending it to requests.jsonl.
func BenchmarkRecordEnded(b *testing.B) {
	const tokens = 32
	var events [][]byte
	const head = `data: {"id":"chatcmpl-0123456789abcdef","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[{"index":0,`
	for i := range tokens {
		events = append(events, fmt.Appendf(nil, head+`"delta":{"content":" w%d"},"logprobs":null,"finish_reason":null}]}`+"\n\n", i))
	}
	events = append(events, []byte(head+`"delta":{},"logprobs":null,"finish_reason":"length"}]}`+"\n\n"+
		`data: {"id":"chatcmpl-0123456789abcdef","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[],"usage":{"prompt_tokens":12,"total_tokens":44,"completion_tokens":32}}`+"\n\n"+
		"data: [DONE]\n\n"))
	out, err := results.Create(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer out.Close()
	rec := NewRecorder(out, time.Minute, nil)
	u, _ := url.Parse("http://127.0.0.1:1/v1")
	p, err := New(Config{Upstream: u, Sink: rec.Add})
	if err != nil {
		b.Fatal(err)
	}
	c := call{a: api.OpenAI{Chat: true}, req: api.Asked{Model: "m", Stream: true}}
	start := time.Now()
	for b.Loop() {
		// The exchange's trace is the request's way there, not its
		// record's: set up off the clock, as before it was in measure.
		b.StopTimer()
		resp := &api.Response{Start: start, Status: 200}
		x, _ := api.NewExchange(context.Background(), resp)
		b.StartTimer()
		send, finish, _ := p.collect(c, resp, true)
		client := &clientSide{arrived: start.Add(-time.Millisecond)}
		for i, e := range events {
			at := start.Add(time.Duration(i+1) * 20 * time.Millisecond)
			send(e, at)
			client.wrote(at, at.Add(20*time.Microsecond))
		}
		resp.Done = start.Add(time.Second)
		finish(io.EOF)
		x.Ended("", "", "text/event-stream")
		r := p.record(resp, c, load.RecordInfo{ID: 1, LevelStart: start}, client)
		if r.OutputTokens != tokens || !r.OK {
			b.Fatalf("record: %d tokens, %s %s", r.OutputTokens, r.ErrorClass, r.Error)
		}
		rec.Add(r)
	}
}
