// Package proxy is a reverse proxy that measures the streams it carries:
// applications point their SDK at it instead of the endpoint, every
// request and answer passes through unchanged (each chunk flushed to the
// client the moment it arrives), and each streamed completion becomes a
// metrics.Record with the upstream's TTFT and decode rate — counted from
// the instant the proxy handed the request to the upstream connection —
// and the client-facing ones, tokens exact from usage or the tokenizer.
//
// Which requests are measured is decided by method and path, as
// api.ForPath names them: POST to …/chat/completions and …/completions
// (OpenAI), …/messages (Anthropic), /api/chat and /api/generate (Ollama)
// and /completion (llama.cpp), and the embeddings endpoints …/embeddings
// (OpenAI), /api/embed and /api/embeddings (Ollama) and /embed (TEI).
// Each is measured by an api.Exchange, the one bench measures its own
// requests by, so both give a request the same instants and the same
// failure class. A non-streamed answer is measured as one chunk at its
// last byte (its TTFT is its E2E: the client sees no token before it),
// tokens from its usage. An embeddings answer is no token stream: it is
// recorded as bench records its embeddings requests (inputs counted from
// the request body, latency t0 to the answer's last byte, tokens from the
// answer's count or else the tokenizer's count of the inputs), read within
// bench's bound of api.MaxEmbeddingAnswer; past it the client still gets
// the whole answer and the record says event_too_large. Everything else
// (models, tokenize) passes through unmeasured.
package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/tokbench/tokbench/api"
	"github.com/tokbench/tokbench/load"
	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/tokenize"
	"github.com/tokbench/tokbench/wire"
)

// Config is a proxy's upstream and what it does with its measurements.
type Config struct {
	// Upstream is the endpoint's base URL: a request for /v1/x goes to
	// Upstream's scheme and host, at Upstream's path joined with /v1/x
	// less the part Upstream's path already holds.
	Upstream *url.URL
	// Transport carries requests upstream (nil: completions on wire's
	// connections, tokbench bench's own: HTTP/1.1, over TLS too, keeping
	// the kernel's receive stamps, read by the handler's goroutine; the
	// requests the proxy does not measure — uploads among them — on its
	// net/http Fallback, which reads an early answer while a body still
	// goes out; no compression asked for, so streams stay plain).
	Transport http.RoundTripper
	// TLS configures the default Transport's connections to an HTTPS
	// upstream (nil: Go's defaults).
	TLS *tls.Config
	// Tokenizer counts output tokens an answer's usage does not give.
	Tokenizer tokenize.Tokenizer
	// Sink gets every measured request's record (nil: none); it is called
	// from many goroutines at once.
	Sink func(metrics.Record)
	// MaxBody bounds a request body the proxy reads to decide what it is
	// (default 64 MiB); a longer one is answered 413.
	MaxBody int64
	// MaxBodies bounds the memory the bodies of all requests being read
	// or sent upstream hold together (default 256 MiB, at least twice
	// MaxBody; a body is given back once the upstream has it, so a long
	// stream holds none of its request): a body that would pass it is
	// answered 503 with Retry-After, before any of it is read when it
	// declares its length. A completion's body counts twice with the
	// default Transport, which keeps a copy of it while it sends it.
	MaxBodies int64
	// SlowClient is how long one write to the client may block before the
	// record says the client was slow (default 50 ms).
	SlowClient time.Duration
	// MaxMeasured bounds the bytes of one streamed answer the proxy
	// decodes (default 32 MiB, some 200,000 tokens of SSE): past it the
	// client still gets the stream, but the record stops, as
	// overlong_stream, so a stream without end costs bounded memory.
	MaxMeasured int64
	// AskUsage adds stream_options.include_usage to an OpenAI streamed
	// request that does not ask for usage, so its tokens are the server's
	// count, and keeps the usage chunk that brings from the client.
	AskUsage bool
}

// Proxy is an http.Handler.
type Proxy struct {
	cfg    Config
	rt     http.RoundTripper // measured requests
	passRT http.RoundTripper // the others
	ids    atomic.Int64
	start  time.Time
	// InFlight counts the measured requests being streamed now and those
	// ended but not yet recorded (a few ms at most behind).
	InFlight atomic.Int64
	handlers sync.WaitGroup // and records to make
	backlog  backlog
	bodies   *bodies
	creds    *credentials // what the lines it logs are scrubbed of
	// peakKept is the largest buffer a whole answer was kept in, for tests.
	peakKept atomic.Int64
}

// heldPeak notes that an answer keeps n bytes now.
func (p *Proxy) heldPeak(n int64) {
	for peak := p.peakKept.Load(); n > peak && !p.peakKept.CompareAndSwap(peak, n); peak = p.peakKept.Load() {
	}
}

// New returns the proxy of cfg.
func New(cfg Config) (*Proxy, error) {
	if cfg.Upstream == nil || cfg.Upstream.Scheme == "" || cfg.Upstream.Host == "" {
		return nil, errors.New("proxy: the upstream needs a scheme and host, e.g. http://host:8000/v1")
	}
	if cfg.Tokenizer == nil {
		tok, err := tokenize.Open(tokenize.Default)
		if err != nil {
			return nil, err
		}
		cfg.Tokenizer = tok
	}
	// Each chunk's text is counted to spread the usage's tokens over the
	// chunks; most are one short token that recurs, as bench counts them.
	cfg.Tokenizer = tokenize.Cached(cfg.Tokenizer, 1<<16)
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = 64 << 20
	}
	if cfg.MaxBodies <= 0 {
		cfg.MaxBodies = 256 << 20
	}
	cfg.MaxBodies = max(cfg.MaxBodies, 2*cfg.MaxBody)
	if cfg.MaxMeasured <= 0 {
		cfg.MaxMeasured = 32 << 20
	}
	if cfg.SlowClient <= 0 {
		cfg.SlowClient = 50 * time.Millisecond
	}
	rt, pass := cfg.Transport, cfg.Transport
	if rt == nil {
		// tokbench's own HTTP/1.1 connections, as bench measures with: the
		// handler's goroutine reads the answer's head and body itself (no
		// hop to a reader goroutine before the first chunk), and every read
		// keeps the kernel's receive stamp, so a chunk's instant is when it
		// reached this machine, not when the proxy got to reading it.
		t := wire.NewTransport()
		t.Fallback.DisableCompression = true
		if cfg.TLS != nil {
			t.Fallback.TLSClientConfig = cfg.TLS
		}
		rt, pass = t, t.Fallback
	}
	p := &Proxy{cfg: cfg, rt: rt, passRT: pass, start: time.Now(), bodies: &bodies{max: cfg.MaxBodies},
		creds: newCredentials(api.URLSecrets(cfg.Upstream.String()))}
	p.backlog.logf = func(format string, args ...any) { p.logf(nil, format, args...) }
	return p, nil
}

// hop-by-hop headers are the connection's, never forwarded (RFC 9110 7.6.1).
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func copyHeader(dst, src http.Header) {
	for k, vs := range src {
		for _, v := range vs {
			dst.Add(k, v)
		}
	}
	for _, h := range hopHeaders {
		dst.Del(h)
	}
	if c := src.Get("Connection"); c != "" {
		for _, f := range strings.Split(c, ",") {
			dst.Del(strings.TrimSpace(f))
		}
	}
}

// ConnContext is for the http.Server that serves the proxy, with a
// listener from wire.StampListener: a request's arrival, which the
// client-facing TTFT counts from, is then the kernel's receive stamp of
// its head, not the later start of its handler.
func (p *Proxy) ConnContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

type connKey struct{}

// ServeHTTP forwards one request and, for a streamed completion, measures
// it.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	if c, ok := r.Context().Value(connKey{}).(net.Conn); ok {
		arrived = wire.Arrival(c, arrived)
	}
	p.creds.enter(r)
	defer p.creds.leave(r)
	defer p.abortOnPanic(r) // before the credentials leave: its line is scrubbed of them
	p.handlers.Add(1)
	defer p.handlers.Done()
	// tokbench's own transport, which carries the completions, sends a
	// copy of the body it takes: theirs count twice in the budget.
	copies := int64(1)
	if p.cfg.Transport == nil && api.ForPath(r.Method, r.URL.Path) != nil {
		copies = 2
	}
	body, held, err := p.bodies.read(w, r, p.cfg.MaxBody, copies)
	if err != nil {
		p.bodies.give(held)
		p.bodies.refuse(w, err, p.cfg.MaxBody)
		return
	}
	a := api.ForPath(r.Method, r.URL.Path)
	var req api.Asked
	if a != nil {
		var ok bool
		if req, ok = api.ReadRequest(a, body); !ok {
			a = nil // not a JSON object: the server's to refuse, unmeasured
		}
	}
	asked := false
	if a != nil && req.Stream && p.cfg.AskUsage {
		body, asked = askUsage(a, body)
	}
	// An embeddings request's body is kept, in the budget, until its
	// record is made: its inputs' tokens are counted from it when the
	// answer does not give them (they are counted then, off the request's
	// way upstream).
	var kept []byte
	keptHeld := int64(0)
	if a != nil && api.IsEmbeddings(a) {
		kept, keptHeld, held = body, held, 0
	}
	recording := false // the record's job gives keptHeld back
	defer func() {
		if !recording {
			p.bodies.give(keptHeld)
		}
	}()
	// The body's budget is given back once the upstream has it (heldBody),
	// or when the request ends, whichever comes first.
	var sending io.ReadCloser = http.NoBody
	if len(body) > 0 {
		hb := newHeldBody(p.bodies, body, held)
		defer hb.release()
		sending = hb
	} else {
		defer p.bodies.give(held)
	}
	out, err := http.NewRequestWithContext(r.Context(), r.Method, p.target(r.URL), sending)
	if err != nil {
		http.Error(w, "tokbench proxy: "+err.Error(), http.StatusBadGateway)
		return
	}
	if hb, ok := sending.(*heldBody); ok {
		out.ContentLength, out.GetBody = int64(len(hb.buf)), hb.getBody
	}
	copyHeader(out.Header, r.Header)
	// The proxy has the whole body: an expectation of 100 Continue (curl
	// sends one with any body over 1 KB) was the client's of the proxy,
	// which net/http's server met; sent on, it would hold the request
	// for an interim answer the upstream may never give.
	out.Header.Del("Expect")
	out.Host = p.cfg.Upstream.Host
	if a == nil {
		p.pass(w, out)
		return
	}
	p.InFlight.Add(1)
	p.handlers.Add(1)
	queued := false
	defer func() {
		if !queued { // measure panicked (abortOnPanic logs it)
			p.handlers.Done()
			p.InFlight.Add(-1)
		}
	}()
	record, answer := p.measure(w, out, call{a: a, req: req, arrived: arrived, asked: asked, header: out.Header, url: out.URL, body: kept})
	queued, recording = true, true
	// The client has its answer; the record is made off its way.
	p.backlog.add(answer, func() {
		defer p.InFlight.Add(-1) // once the record is in
		defer p.handlers.Done()
		defer p.bodies.give(keptHeld)
		defer p.recordPanic(func() []string {
			return append(requestSecrets(r), api.RequestSecrets(out.Header, out.URL)...)
		})
		rec := record()
		if p.cfg.Sink != nil {
			p.cfg.Sink(rec)
		}
	})
}

// target is the upstream URL for a request's path and query: Upstream's
// path, then the request's less the segments Upstream's path already
// ends with (a base of /openai/v1 and a request for /v1/chat/completions
// give /openai/v1/chat/completions); Upstream's query, then the request's.
func (p *Proxy) target(u *url.URL) string {
	up := *p.cfg.Upstream
	base := strings.Split(strings.Trim(up.EscapedPath(), "/"), "/")
	req := strings.Split(strings.TrimPrefix(u.EscapedPath(), "/"), "/")
	if len(base) == 1 && base[0] == "" {
		base = nil
	}
	overlap := 0
	for k := min(len(base), len(req)); k > 0; k-- {
		if slices.Equal(base[len(base)-k:], req[:k]) {
			overlap = k
			break
		}
	}
	path := "/" + strings.Join(append(base, req[overlap:]...), "/")
	q := up.RawQuery
	if u.RawQuery != "" {
		if q != "" {
			q += "&"
		}
		q += u.RawQuery
	}
	return up.Scheme + "://" + up.Host + path + map[bool]string{true: "?" + q, false: ""}[q != ""]
}

// pass forwards a request the proxy does not measure.
func (p *Proxy) pass(w http.ResponseWriter, out *http.Request) {
	resp, err := p.passRT.RoundTrip(out)
	forwarded(out)
	if err != nil {
		upstreamError(w, out, err)
		return
	}
	defer resp.Body.Close()
	writeHead(w, resp)
	_, _, _ = flushCopy(w, resp.Body, tap{}) // unmeasured: what the client got is what came
}

// writeHead sends the client the upstream's status and headers now, not
// with the first byte of the body: an upstream that answers 200 and then
// thinks (or hangs) shows the client its answer began, as it would
// directly. A client gone is seen at the body's first write.
func writeHead(w http.ResponseWriter, up *http.Response) {
	copyHeader(w.Header(), up.Header)
	w.WriteHeader(up.StatusCode)
	_ = http.NewResponseController(w).Flush()
}

// upstreamError answers a request the upstream did not answer: 502, the
// error without the request's credentials (its URL may hold a key).
func upstreamError(w http.ResponseWriter, out *http.Request, err error) {
	msg := api.Scrub(err.Error(), api.RequestSecrets(out.Header, out.URL))
	http.Error(w, "tokbench proxy: upstream: "+msg, http.StatusBadGateway)
}

// tap is what flushCopy tells of each read from the upstream: stamp
// gives the instant it is known by, taken before anything else is done
// with it; read is given its bytes and that instant once they were
// written to the client (decoding stays off the client's path); written
// that instant and the one the write and flush to the client ended. Any
// may be nil.
type tap struct {
	stamp   func() time.Time
	read    func(b []byte, at time.Time)
	written func(read, written time.Time)
}

// flushCopy copies src to w, flushing after every read, telling t of
// each. It returns how long one write to the client blocked at most, the
// client's error and the read's (io.EOF at a clean end).
func flushCopy(w http.ResponseWriter, src io.Reader, t tap) (maxWrite time.Duration, clientErr, srcErr error) {
	rc := http.NewResponseController(w)
	bp := copyBuffers.Get().(*[copyBuffer]byte)
	defer copyBuffers.Put(bp)
	buf := bp[:]
	for {
		n, err := src.Read(buf)
		if n > 0 {
			var at time.Time
			if t.stamp != nil {
				at = t.stamp()
			}
			if clientErr == nil {
				begin := time.Now()
				if _, werr := w.Write(buf[:n]); werr != nil {
					clientErr = werr
				} else if ferr := rc.Flush(); ferr != nil && !errors.Is(ferr, http.ErrNotSupported) {
					clientErr = ferr
				}
				done := time.Now()
				maxWrite = max(maxWrite, done.Sub(begin))
				if clientErr == nil && t.written != nil {
					t.written(at, done)
				}
			}
			if t.read != nil {
				t.read(buf[:n], at)
			}
		}
		if err != nil {
			return maxWrite, clientErr, err
		}
	}
}

// copyBuffer is the size of flushCopy's reads; its buffers are shared
// (a stream's first chunk does not wait for 32 KiB to be zeroed, and 100
// streams do not make the collector run for their buffers).
const copyBuffer = 32 << 10

var copyBuffers = sync.Pool{New: func() any { return new([copyBuffer]byte) }}

// measure forwards a completion and returns how to make its record, to be
// called once the client has its answer, and the bytes of the answer it
// keeps until then: the upstream's answer decoded by the protocol's
// adapter (the arrival instants are the proxy's reads), the client's as
// they were written to it. Its instants and classes are api.Exchange's,
// as bench's are.
func (p *Proxy) measure(w http.ResponseWriter, out *http.Request, c call) (record func() metrics.Record, kept int64) {
	resp := &api.Response{}
	// The stream must reach the decoder as the protocol's plain events:
	// the client's Accept-Encoding (gzip from some SDKs) stays here.
	out.Header.Set("Accept-Encoding", "identity")
	ctx := out.Context() // the client's: it ends when the client goes
	x, traced := api.NewExchange(ctx, resp)
	out = out.WithContext(traced)
	sent := time.Now()
	up, err := p.rt.RoundTrip(out)
	// As bench's: t0 is the instant the request's bytes went to the
	// upstream connection, its first byte and chunks on the kernel's
	// clock over HTTP/1.1.
	x.Answered(sent, false, up, err)
	forwarded(out)
	// max_tokens is a cap in live traffic, not a length asked for: no
	// shortfall is counted against it.
	info := load.RecordInfo{ID: int(p.ids.Add(1)), LevelStart: p.start}
	if err != nil {
		x.FailTransport(ctx, err)
		upstreamError(w, out, err)
		return func() metrics.Record { return p.record(resp, c, info, nil) }, 0
	}
	defer up.Body.Close()
	writeHead(w, up)
	if up.StatusCode/100 != 2 {
		var msg bytes.Buffer
		_, cerr, _ := flushCopy(w, up.Body, tap{read: func(b []byte, _ time.Time) {
			if msg.Len() < maxErrorBody {
				msg.Write(b[:min(len(b), maxErrorBody-msg.Len())])
			}
		}})
		x.FailHTTP(up, out.Method, out.URL.Path, msg.Bytes())
		return func() metrics.Record { return p.record(resp, c, info, &clientSide{err: cerr}) }, int64(msg.Cap())
	}
	clock := x.Clock()
	if clock == nil {
		clock = time.Now
	}
	// An answer no decoder can read (encoded) is forwarded, not kept.
	plain := x.Plain(up)
	send, finish, size := p.collect(c, resp, plain)
	client := &clientSide{arrived: c.arrived, usageAdded: c.asked, whole: !c.req.Stream}
	dst, strip := w, (*usageStripper)(nil)
	if c.asked {
		strip = &usageStripper{w: w}
		dst = strippingWriter{w, strip}
	}
	var srcErr error
	client.maxWrite, client.err, srcErr = flushCopy(dst, up.Body, tap{stamp: clock, read: send, written: client.wrote})
	if strip != nil && client.err == nil {
		// What the stripper held back (an unfinished last event).
		if client.err = strip.Close(); client.err == nil {
			if err := http.NewResponseController(w).Flush(); !errors.Is(err, http.ErrNotSupported) {
				client.err = err
			}
		}
	}
	done := time.Now()
	// What ends with the handler (the client's context among it) is read
	// now; the record is made later. The client left if its going cut the
	// upstream's answer: one that ended cleanly it had whole (it may have
	// hung up on its last byte, as a Content-Length lets it).
	gone := ctx.Err() != nil && !errors.Is(srcErr, io.EOF)
	contentType := up.Header.Get("Content-Type")
	if !c.req.Stream {
		contentType = "" // one JSON document, as asked
	}
	return func() metrics.Record {
		if plain {
			finish(srcErr)
			if resp.Done.IsZero() {
				resp.Done = done
			}
			var cut api.Class
			var why string
			if gone {
				// The client left (a stop button): its request, not the server's failure.
				cut, why = ClassClientClosed, fmt.Sprintf("the client closed the connection after %d chunks", len(resp.Chunks))
			}
			x.Ended(cut, why, contentType)
		}
		return p.record(resp, c, info, client)
	}, size() + int64(cap(client.spans))*spanBytes
}

// maxErrorBody bounds the bytes of an error answer the proxy keeps for
// its record's message; the client gets the whole answer.
const maxErrorBody = 4 << 10

// maxWhole bounds the copy of a non-streamed answer the proxy keeps to
// read its tokens from; the client gets the whole answer however long.
const maxWhole = 16 << 20

// collect keeps what the answer needs to be measured, read by read
// (send), and measures it once it has ended with the read error end
// (finish; kept is the memory that holds until then): a stream's reads
// with their instants, decoded by c's protocol (up to MaxMeasured); a
// whole answer's bytes (up to maxWhole), read as one chunk at its last
// read. Past its bound the answer ends, for its decoder, as
// overlong_stream. An answer that is not plain keeps nothing.
func (p *Proxy) collect(c call, resp *api.Response, plain bool) (send func(b []byte, at time.Time), finish func(end error), kept func() int64) {
	if !plain {
		return nil, func(error) {}, func() int64 { return 0 }
	}
	log := getLog()
	embed := api.IsEmbeddings(c.a)
	bound, over := p.cfg.MaxMeasured, &api.ClassError{Class: api.ClassOverlongStream}
	switch {
	case embed:
		// bench's bound: a vector of 1 MiB an input, and 64 KiB more.
		bound = api.MaxEmbeddingAnswer(c.req.Inputs)
		over.Class, over.Msg = api.ClassEventTooLarge, fmt.Sprintf(
			"the embeddings answer is larger than %d bytes (%d inputs, %d MiB each at most): forwarded to the client, not measured",
			bound, max(c.req.Inputs, 1), api.MaxEmbeddingBytes>>20)
	case c.req.Stream:
		over.Msg = fmt.Sprintf("measured the first %d MiB of the stream; the client got all of it", bound>>20)
	default:
		bound, over.Msg = maxWhole, fmt.Sprintf("a non-streamed answer over %d MiB: forwarded, not measured", maxWhole>>20)
	}
	measured, last := int64(0), time.Time{}
	send = func(b []byte, at time.Time) {
		last = at
		if measured += int64(len(b)); measured > bound {
			if log.end == nil {
				log.end = over
				if !c.req.Stream {
					log.buf, log.reads = nil, nil // no part of a whole answer is read
				}
			}
		} else if c.req.Stream {
			log.add(b, at)
		} else {
			log.keep(b, bound)
			p.heldPeak(int64(cap(log.buf)))
		}
	}
	finish = func(end error) {
		// A failed read (the upstream cut the answer) wins over the bound.
		if log.end == nil || !errors.Is(end, io.EOF) {
			log.end = end
		}
		switch {
		case embed:
			resp.Done = last
			api.DecodeEmbedding(c.a, log.buf, measured, log.end, c.req.Inputs, resp)
		case c.req.Stream:
			c.a.Decode(log, resp)
		default:
			resp.Done = last
			api.DecodeWhole(c.a, log.buf, log.end, resp)
		}
		log.release()
	}
	return send, finish, log.size
}

// strippingWriter writes an answer to the client through a
// usageStripper; Unwrap lets http.ResponseController flush it.
type strippingWriter struct {
	http.ResponseWriter
	s *usageStripper
}

func (w strippingWriter) Write(b []byte) (int, error) { return w.s.Write(b) }
func (w strippingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// call is what the proxy knows of a completion request before sending it:
// its protocol and what its body asks for, when it arrived, whether the
// proxy asked for usage, and its credentials' places.
type call struct {
	a       api.Adapter
	req     api.Asked
	arrived time.Time
	asked   bool
	// header and url are the request as sent upstream, whose credentials
	// (the client's and Upstream's) its record must not hold.
	header http.Header
	url    *url.URL
	// body is an embeddings request's, whose inputs' tokens are counted
	// when the answer does not give them (nil for a completion).
	body []byte
}

// ClassClientClosed is a proxied request whose client closed its
// connection before the answer ended.
const ClassClientClosed api.Class = "client_closed"

// clientSide is what the client got: when its request arrived, when
// each read from the upstream had been written to it, the longest a write
// to it blocked, and how the connection to it failed.
type clientSide struct {
	arrived    time.Time
	usageAdded bool
	whole      bool // a non-streamed answer
	spans      []span
	maxWrite   time.Duration
	err        error
}

// span is one read from the upstream: the instant it is known by (the
// kernel's receive stamp where there is one) and the instant its write
// and flush to the client ended.
type span struct{ read, written time.Time }

const spanBytes = int64(unsafe.Sizeof(span{}))

func (c *clientSide) wrote(read, written time.Time) {
	if len(c.spans) < maxSpans {
		c.spans = append(c.spans, span{read, written})
	}
}

// maxSpans bounds the reads a record keeps the client's instants of
// (12 MiB): past it a stream's client-side E2E and decode rate are not
// known (its TTFT still is).
const maxSpans = 1 << 18

// at is when the client had the bytes read at read: the write of the
// first read known by that instant or later.
func (c *clientSide) at(read time.Time) (time.Time, bool) {
	for _, s := range c.spans {
		if !s.read.Before(read) {
			return s.written, true
		}
	}
	return time.Time{}, false
}

// timing is the client's side of rec: its TTFT from the request's
// arrival at the proxy, its decode rate as Record.DecodeTPS counts it, and
// the most the proxy held one chunk (from its read to its write's end).
func (c *clientSide) timing(resp *api.Response, rec *metrics.Record, slow time.Duration) *metrics.ProxyTiming {
	pr := &metrics.ProxyTiming{SlowClient: c.maxWrite >= slow, MaxWriteMs: ms(c.maxWrite), UsageAdded: c.usageAdded, NotStreamed: c.whole}
	if c.err != nil {
		pr.ClientError = c.err.Error()
	}
	for _, s := range c.spans {
		pr.MaxHeldMs = max(pr.MaxHeldMs, ms(s.written.Sub(s.read)))
	}
	if resp.Embedding != nil && !resp.Failed() && !c.arrived.IsZero() && len(c.spans) > 0 {
		// No token stream: the client's latency is its last byte's write.
		if last, ok := c.at(resp.Done); ok {
			pr.ClientE2EMs = ms(last.Sub(c.arrived))
		}
		return pr
	}
	if len(resp.Chunks) == 0 || c.arrived.IsZero() {
		return pr
	}
	first, ok1 := c.at(resp.Chunks[0].At)
	last, ok2 := c.at(resp.Chunks[len(resp.Chunks)-1].At)
	if !ok1 || !ok2 {
		return pr // the client went before the answer's end
	}
	pr.ClientTTFTMs = ms(first.Sub(c.arrived))
	pr.ClientE2EMs = ms(last.Sub(c.arrived))
	if span := last.Sub(first); rec.OutputTokens >= 2 && len(resp.Chunks) >= 2 && span > 0 {
		pr.ClientDecodeTPS = float64(rec.OutputTokens-1) / span.Seconds()
	}
	return pr
}

// record is the request's record, with the client's side in Proxy.
func (p *Proxy) record(resp *api.Response, c call, info load.RecordInfo, client *clientSide) metrics.Record {
	if api.IsEmbeddings(c.a) {
		info.EmbedInputs = c.req.Inputs
		if em := resp.Embedding; em != nil && em.PromptTokens == 0 && !resp.Failed() {
			// No count from the server: the inputs', as bench counts the
			// inputs it sent.
			_, info.EmbedTokens = api.EmbedInputs(c.a, c.body, p.cfg.Tokenizer.Count)
		}
	}
	rec := load.Record(resp, p.cfg.Tokenizer, info)
	rec.Model, rec.API = c.req.Model, c.a.Name()
	if client != nil {
		rec.Proxy = client.timing(resp, &rec, p.cfg.SlowClient)
	}
	scrub(&rec, api.RequestSecrets(c.header, c.url))
	return rec
}

// scrub takes secrets, in every encoding api.Scrub knows, out of each of
// rec's texts that an upstream or a client wrote: what the record holds
// reaches requests.jsonl, the summary, the report and /metrics' labels.
func scrub(rec *metrics.Record, secrets []string) {
	if len(secrets) == 0 {
		return
	}
	for _, s := range []*string{&rec.Error, &rec.ResponseID, &rec.FinishReason, &rec.Model} {
		*s = api.Scrub(*s, secrets)
	}
	for i := range rec.RetryErrors {
		rec.RetryErrors[i] = api.Scrub(rec.RetryErrors[i], secrets)
	}
	if rec.Proxy != nil {
		rec.Proxy.ClientError = api.Scrub(rec.Proxy.ClientError, secrets)
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
