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
// right before the write that carries it. The stream ends with a
// finish_reason chunk, a usage chunk and [DONE].
//
// To stay cheap at thousands of streams it does not run one goroutine per
// stream: a few writer loops each own a share of the streams and write
// whatever is due in one pass, with HTTP/1.1 chunked framing done by hand
// on the raw connection (keep-alive, so closed-loop clients reuse it).
package main

import (
	"bufio"
	"container/heap"
	"context"
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
	"syscall"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	maxRun := flag.Duration("max", 10*time.Minute, "exit after this long whatever happens")
	writers := flag.Int("writers", 4, "writer loops")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the server to this file")
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
	raiseFileLimit()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakeserver:", err)
		os.Exit(2)
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
	fmt.Printf("listening on %s\n", ln.Addr())
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	s.serve(ln)
}

func raiseFileLimit() {
	var l syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l) == nil && l.Cur < l.Max {
		l.Cur = l.Max
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
	}
}

// stream is one response being written.
type stream struct {
	conn      net.Conn
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

// conn serves the requests of one connection in turn.
func (s *server) conn(c net.Conn) {
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
		if req.Method != http.MethodPost || err != nil {
			msg := `{"error":{"message":"want a POST with a JSON body"}}`
			fmt.Fprintf(c, "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(msg), msg)
			continue
		}
		if b.MaxTokens <= 0 {
			b.MaxTokens = 64
		}
		if _, err := io.WriteString(c, header); err != nil {
			return
		}
		due := time.Now().Add(time.Duration(b.Bench.TTFTUs) * time.Microsecond)
		gap := time.Duration(b.Bench.GapUs) * time.Microsecond
		if b.Bench.Step && gap > 0 {
			due = stepStart.Add(due.Sub(stepStart).Truncate(gap) + gap) // the next step
		}
		st := &stream{conn: c, due: due,
			gap: gap, burst: max(b.Bench.Burst, 1),
			remaining: b.MaxTokens, tokens: b.MaxTokens, done: make(chan error, 1)}
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

// write sends the stream's next burst of token chunks (and the end of the
// answer after the last one) in one write, as one HTTP chunk.
func (st *stream) write() error {
	n := min(st.burst, st.remaining)
	st.remaining -= n
	b := append(st.buf[:0], "00000000\r\n"...) // size placeholder, filled below
	sent := time.Now().UnixNano()
	for range n {
		b = append(b, chunkHead...)
		b = strconv.AppendInt(b, sent, 10)
		b = append(b, chunkTail...)
	}
	if st.remaining == 0 {
		b = append(b, finish...)
		b = fmt.Appendf(b, `data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":0,"model":"fake","choices":[],"usage":{"prompt_tokens":8,"completion_tokens":%d,"total_tokens":%d}}`+"\n\ndata: [DONE]\n\n", st.tokens, st.tokens+8)
	}
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
