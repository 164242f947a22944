// Command fakeserver is the loopback server of tokbench's performance
// harness: an OpenAI-compatible chat completions endpoint that streams
// tokens at known instants and writes the send instant of every chunk into
// it, so a client can compute its own timing error exactly.
//
//	fakeserver -addr 127.0.0.1:0
//
// It prints "listening on HOST:PORT" once ready, and exits when its stdin
// closes (the harness holds the pipe), on SIGINT/SIGTERM, or after -max.
//
// Each request's JSON body sets max_tokens (default 64) and, optionally,
// "bench": {"ttft_us": N, "gap_us": N, "burst": N, "step": true}: the first
// token chunk goes out ttft_us after the request was read, then a write of
// burst chunks (default 1) every gap_us (0: as fast as the socket takes
// them). With step, writes fall on a grid of gap_us shared by all streams
// (the first token at the first grid instant ttft_us after the request), as
// a batching engine emits every running sequence's token at each decode step. Every token
// chunk's content is " t<unix nanoseconds>", the wall-clock instant taken
// right before the write that carries it; the first token chunk's is
// " t<ns> r<ns>", the r part the request's arrival: the kernel's receive
// stamp (SO_TIMESTAMPING, realtime clock) of the read that delivered the
// request's last byte (wire.StampConn, as the client stamps its reads),
// or where the kernel gives none the instant the server read it (said once
// on stderr when a connection has no stamps at all). Send minus arrival is
// the request's true TTFT. The stream ends with a finish_reason chunk, a
// usage chunk and [DONE].
//
// GET /stats answers {"accepted": N, "requests": R, "h2_requests": H}: the
// TCP connections accepted, the completion requests read and how many of
// those came over HTTP/2, since start-up.
//
// To stay cheap at thousands of streams it does not run one goroutine per
// stream: a few writer loops each own a share of the streams and write
// whatever is due in one pass, with HTTP/1.1 chunked framing done by hand
// on the raw connection (keep-alive, so closed-loop clients reuse it).
//
// With -tls the same server speaks HTTPS (crypto/tls over each accepted
// connection, ALPN "http/1.1" only) with a self-signed ECDSA P-256
// certificate for 127.0.0.1, ::1 and localhost made at start-up; -cert-out
// writes it as PEM for the client to trust. With -h2 (implies -tls) the
// server is net/http's instead, HTTP/2 and HTTP/1.1 over TLS, one handler
// goroutine per stream (meant for at most a few hundred streams), with the
// same request body, pacing and chunks. There a request's arrival is the
// kernel stamp of the latest read on its TCP connection once the handler
// has read the request body to its end: on a connection that multiplexes
// several streams that read may have delivered another stream's bytes
// after this request's last one, so the arrival is an upper bound (≥ the
// true arrival) and the true TTFT a lower bound.
package main

import (
	"bufio"
	"container/heap"
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tokbench/tokbench/internal/benchutil"
	"github.com/tokbench/tokbench/wire"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	maxRun := flag.Duration("max", 10*time.Minute, "exit after this long whatever happens")
	writers := flag.Int("writers", 4, "writer loops")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the server to this file")
	useTLS := flag.Bool("tls", false, "serve HTTPS (HTTP/1.1 only) with a self-signed certificate made at start-up")
	useH2 := flag.Bool("h2", false, "serve HTTPS with HTTP/2 and HTTP/1.1 through net/http's server (implies -tls)")
	flag.DurationVar(&defaultTTFT, "ttft", 0, "first token this long after a request whose body sets no bench.ttft_us (a plain client such as tokbench bench)")
	flag.DurationVar(&defaultGap, "gap", 0, "gap between chunks for a request whose body sets no bench.gap_us")
	certOut := flag.String("cert-out", "", "with -tls or -h2: write the certificate (PEM) to this file, for the client to trust")
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "fakeserver:", err)
			os.Exit(2)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "fakeserver:", err)
			os.Exit(2)
		}
		defer pprof.StopCPUProfile()
	}
	benchutil.RaiseFileLimit()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakeserver:", err)
		os.Exit(2)
	}
	// Keep the kernel stamping received packets from now on, and give its
	// deferred switch-on a moment, so that the first requests are stamped.
	if wire.KeepStamping(ln) {
		time.Sleep(20 * time.Millisecond)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *maxRun)
	defer cancel()
	go func() { // the harness closes our stdin when it is done (or dies)
		io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	s := newServer(*writers)
	var cert tls.Certificate
	if *useTLS || *useH2 {
		var pemCert []byte
		if cert, pemCert, err = selfSigned(); err == nil && *certOut != "" {
			err = os.WriteFile(*certOut, pemCert, 0o644)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "fakeserver:", err)
			os.Exit(2)
		}
	}
	cl := &listener{Listener: ln, accepted: &s.accepted}
	fmt.Printf("listening on %s\n", ln.Addr())
	if *useH2 {
		serveH2(ctx, cl, cert, s)
		return
	}
	if *useTLS {
		s.tls = &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"http/1.1"}}
	}
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	s.serve(cl)
}

// listener counts the connections it accepts and turns on kernel receive
// stamps on each.
type listener struct {
	net.Listener
	accepted *atomic.Int64
}

func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.accepted.Add(1)
	return wire.StampConn(c), nil
}

// stream is one response being written.
type stream struct {
	conn      net.Conn
	arrival   int64 // the request's arrival, unix ns: the first token chunk carries it
	due       time.Time
	gap       time.Duration
	burst     int
	remaining int
	tokens    int
	done      chan error
	buf       []byte
}

type server struct {
	shards []*shard
	next   int
	mu     sync.Mutex
	tls    *tls.Config // -tls: each connection speaks TLS

	accepted   atomic.Int64 // TCP connections accepted
	requests   atomic.Int64 // completion requests read
	h2Requests atomic.Int64 // of those, over HTTP/2
	noStamp    sync.Once
}

// shard is one writer loop and the streams it owns.
type shard struct {
	mu      sync.Mutex
	pending []*stream
	wake    chan struct{}
}

func newServer(writers int) *server {
	s := &server{}
	for range max(writers, 1) {
		sh := &shard{wake: make(chan struct{}, 1)}
		s.shards = append(s.shards, sh)
		go sh.run()
	}
	return s
}

func (s *server) serve(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go s.conn(c)
	}
}

type body struct {
	MaxTokens int `json:"max_tokens"`
	Bench     struct {
		TTFTUs int64 `json:"ttft_us"`
		GapUs  int64 `json:"gap_us"`
		Burst  int   `json:"burst"`
		Step   bool  `json:"step"`
	} `json:"bench"`
}

// stepStart is the origin of the step grid.
var stepStart = time.Now()

const header = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n"

// statsJSON is what GET /stats answers.
func (s *server) statsJSON() []byte {
	return fmt.Appendf(nil, `{"accepted":%d,"requests":%d,"h2_requests":%d}`, s.accepted.Load(), s.requests.Load(), s.h2Requests.Load())
}

// arrival is the arrival instant, unix ns, of a request whose last byte
// the latest read on tcp delivered: that read's kernel receive stamp
// (wire.StampConn stamps a read the kernel left unstamped with its own
// instant), or now on a connection without stamps (said once on stderr).
func (s *server) arrival(tcp net.Conn) int64 {
	if rs, ok := tcp.(wire.ReceiveStamper); ok {
		if ns := rs.LastReceived(); ns > 0 {
			return ns
		}
	}
	s.noStamp.Do(func() {
		fmt.Fprintln(os.Stderr, "fakeserver: a request without a kernel receive stamp: its arrival (r<ns> in the first chunk) is the instant the server finished reading it")
	})
	return time.Now().UnixNano()
}

// defaultTTFT and defaultGap (-ttft, -gap) pace requests whose body does
// not say how.
var defaultTTFT, defaultGap time.Duration

// newStream schedules the answer to a request read now.
func newStream(b body, arrival int64) *stream {
	if b.Bench.TTFTUs == 0 && b.Bench.GapUs == 0 {
		b.Bench.TTFTUs, b.Bench.GapUs = defaultTTFT.Microseconds(), defaultGap.Microseconds()
	}
	if b.MaxTokens <= 0 {
		b.MaxTokens = 64
	}
	due := time.Now().Add(time.Duration(b.Bench.TTFTUs) * time.Microsecond)
	gap := time.Duration(b.Bench.GapUs) * time.Microsecond
	if b.Bench.Step && gap > 0 {
		due = stepStart.Add(due.Sub(stepStart).Truncate(gap) + gap) // the next step
	}
	return &stream{arrival: arrival, due: due, gap: gap, burst: max(b.Bench.Burst, 1),
		remaining: b.MaxTokens, tokens: b.MaxTokens}
}

// conn serves the requests of one connection in turn. tcp is the accepted
// connection, whose reads keep the kernel's receive stamps; with -tls the
// requests are read through TLS over it.
func (s *server) conn(tcp net.Conn) {
	c := tcp
	if s.tls != nil {
		c = tls.Server(tcp, s.tls)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		var b body
		err = json.NewDecoder(req.Body).Decode(&b)
		io.Copy(io.Discard, req.Body)
		req.Body.Close()
		if req.Method == http.MethodGet && req.URL.Path == "/stats" {
			msg := s.statsJSON()
			conn := ""
			if req.Close {
				conn = "Connection: close\r\n"
			}
			if _, err := fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n%s", len(msg), conn, msg); err != nil || req.Close {
				return
			}
			continue
		}
		if req.Method != http.MethodPost || err != nil {
			msg := `{"error":{"message":"want a POST with a JSON body"}}`
			fmt.Fprintf(c, "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(msg), msg)
			continue
		}
		// The body is read to its end: the latest read delivered the
		// request's last byte (a closed-loop client sends nothing more
		// before the answer, so no later bytes share that read).
		arrival := s.arrival(tcp)
		s.requests.Add(1)
		if _, err := io.WriteString(c, header); err != nil {
			return
		}
		st := newStream(b, arrival)
		st.conn, st.done = c, make(chan error, 1)
		s.mu.Lock()
		sh := s.shards[s.next%len(s.shards)]
		s.next++
		s.mu.Unlock()
		sh.add(st)
		if err := <-st.done; err != nil {
			return
		}
	}
}

func (sh *shard) add(st *stream) {
	sh.mu.Lock()
	sh.pending = append(sh.pending, st)
	sh.mu.Unlock()
	select {
	case sh.wake <- struct{}{}:
	default:
	}
}

// run writes whatever is due, then sleeps until the next stream is due or
// a new one arrives. Streams wait in a heap by due time, so a wake-up costs
// the streams it writes, not every stream the loop owns. A pass writes each
// due stream once, so streams written flat out take turns with each other
// and with new arrivals.
func (sh *shard) run() {
	var due dueHeap
	var batch []*stream
	timer := time.NewTimer(time.Hour)
	for {
		sh.mu.Lock()
		for _, st := range sh.pending {
			heap.Push(&due, st)
		}
		clear(sh.pending)
		sh.pending = sh.pending[:0]
		sh.mu.Unlock()
		now := time.Now()
		batch = batch[:0]
		for len(due) > 0 && !now.Before(due[0].due) {
			batch = append(batch, heap.Pop(&due).(*stream))
		}
		for _, st := range batch {
			if err := st.write(); err != nil || st.remaining == 0 {
				st.done <- err
				continue
			}
			if st.gap == 0 {
				st.due = time.Now()
			} else {
				st.due = st.due.Add(st.gap)
			}
			heap.Push(&due, st)
		}
		clear(batch)
		if len(batch) > 0 {
			continue // look again: new streams, and whatever fell due meanwhile
		}
		wait := time.Hour
		if len(due) > 0 {
			if wait = time.Until(due[0].due); wait <= 0 {
				continue
			}
		}
		timer.Reset(wait)
		select {
		case <-timer.C:
		case <-sh.wake:
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		}
	}
}

// dueHeap orders streams by when their next write is due.
type dueHeap []*stream

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h dueHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)        { *h = append(*h, x.(*stream)) }
func (h *dueHeap) Pop() any {
	old := *h
	st := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return st
}

const (
	chunkHead = `data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":0,"model":"fake","choices":[{"index":0,"delta":{"content":" t`
	chunkTail = `"},"finish_reason":null}]}` + "\n\n"
	finish    = `data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":0,"model":"fake","choices":[{"index":0,"delta":{},"finish_reason":"length"}]}` + "\n\n"
)

// events appends the stream's next burst of token chunks (and the end of
// the answer after the last one) as SSE events, each token chunk stamped
// with the instant taken here, right before the write that carries them;
// the answer's first token chunk also carries the request's arrival, in
// its text and in its id.
func (st *stream) events(b []byte) []byte {
	n := min(st.burst, st.remaining)
	first := st.remaining == st.tokens
	st.remaining -= n
	sent := time.Now().UnixNano()
	for i := range n {
		if first && i == 0 {
			// The answer's id names the request (its arrival), so that a
			// record (response_id) and its stream in a packet capture match.
			b = append(b, `data: {"id":"chatcmpl-r`...)
			b = strconv.AppendInt(b, st.arrival, 10)
			b = append(b, chunkHead[len(`data: {"id":"chatcmpl-bench`):]...)
		} else {
			b = append(b, chunkHead...)
		}
		b = strconv.AppendInt(b, sent, 10)
		if first && i == 0 {
			b = append(b, " r"...)
			b = strconv.AppendInt(b, st.arrival, 10)
		}
		b = append(b, chunkTail...)
	}
	if st.remaining == 0 {
		b = append(b, finish...)
		b = fmt.Appendf(b, `data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":0,"model":"fake","choices":[],"usage":{"prompt_tokens":8,"completion_tokens":%d,"total_tokens":%d}}`+"\n\ndata: [DONE]\n\n", st.tokens, st.tokens+8)
	}
	return b
}

// write sends the stream's next burst of token chunks (and the end of the
// answer after the last one) in one write, as one HTTP chunk.
func (st *stream) write() error {
	b := append(st.buf[:0], "00000000\r\n"...) // size placeholder, filled below
	b = st.events(b)
	size := len(b) - 10
	hex := strconv.AppendInt(nil, int64(size), 16)
	copy(b[8-len(hex):8], hex)
	for i := 0; i < 8-len(hex); i++ {
		b[i] = '0'
	}
	b = append(b, "\r\n"...)
	if st.remaining == 0 {
		b = append(b, "0\r\n\r\n"...)
	}
	st.buf = b
	_, err := st.conn.Write(b)
	return err
}
