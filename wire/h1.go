// Package wire is the HTTP client tokbench measures with: its own HTTP/1.1
// connections, read and written by the request's goroutine, with the
// kernel's receive stamp of every read (SO_TIMESTAMPING on Linux). It knows
// nothing of LLM protocols: package api builds the requests and decodes the
// streams on top of it.
//
// A Transport is safe for concurrent use; each connection carries one
// request at a time, and an answer's body returns its connection to the
// pool at its clean end.
package wire

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Transport is the HTTP transport tokbench measures with. HTTP and HTTPS
// requests run on its own HTTP/1.1 connections (TLS by crypto/tls, ALPN
// "http/1.1", as the OpenAI and Anthropic SDKs speak): the caller's
// goroutine writes the request and reads the response itself, where
// net/http hands each request to two more goroutines per connection (a
// writer and a reader) and wakes three threads per request to do so. That
// costs a fraction of the CPU per request and per token chunk, two
// goroutine stacks less per open stream, and keeps the kernel's receive
// stamp of every read with the stream that read it. Proxied requests,
// bodies of unknown length and, with HTTP2, every request go through
// Fallback, a net/http transport.
//
// Connections stay open between requests (any number per host), stamp
// received data with the kernel's receive instant where the kernel allows
// (ReceiveTimestampDialer), and report their phases to the request's
// httptrace.ClientTrace: GetConn; DNS and connect (from the dialer);
// TLSHandshakeStart and Done; GotConn at the instant the request's write
// begins, on an open connection; WroteRequest once its last byte was
// handed to the kernel; GotFirstResponseByte. A request sent again on a
// new connection (its idle one had been closed by the server) reports the
// new connection's phases again.
type Transport struct {
	// Fallback serves what Transport does not, and dials for it:
	// Transport's own connections come from Fallback.DialContext, so
	// setting that (or TLSClientConfig, Proxy) configures both.
	Fallback *http.Transport
	// HTTP2 sends every request speaking HTTP/2 only: through Fallback,
	// negotiated by ALPN, over TLS; with prior knowledge over plain HTTP, on
	// connections Transport opens with Fallback (NewClientConn) and shares,
	// one per origin while it has streams free. Set it before the first
	// request. Streams of one HTTP/2 connection
	// share its reads, so their chunks carry the instants they were read
	// (Response.ProtoMajor 2), not the kernel's.
	HTTP2 bool

	h2once  sync.Once
	tlsOnce sync.Once
	tlsBase *tls.Config // Fallback's TLS configuration as the first dial found it
	mu      sync.Mutex
	idle    map[string][]*h1conn // origin (scheme://host:port) → idle connections, most recent last
	h2      h2cPool
}

// NewTransport is the transport tokbench bench runs with (and the bench/
// harness measures with): kernel receive stamps, any number of connections
// per host kept open, no response header timeout (a server may hold the
// first byte back for a long prefill), and 2 KiB read and write buffers
// per connection instead of net/http's 4 KiB, since every stream holds
// them for its whole life: a request's headers and a token chunk's event
// are a few hundred bytes, a larger body is written past the buffer, and a
// larger chunk is read straight into the SSE decoder's buffer (which grows
// with a fast stream).
func NewTransport() *Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = ReceiveTimestampDialer(&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second})
	t.MaxIdleConns = 0
	t.MaxIdleConnsPerHost = 10000
	t.MaxConnsPerHost = 0
	t.ResponseHeaderTimeout = 0
	t.WriteBufferSize = h1Buffer
	t.ReadBufferSize = h1Buffer
	return &Transport{Fallback: t}
}

const (
	h1Buffer = 2 << 10
	// h1InlineBody: a body up to this size goes out in the same write as
	// the request's head; a larger one follows it in a write of its own.
	h1InlineBody = 64 << 10
)

// CloseIdleConnections closes the connections no request is using.
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = nil
	t.mu.Unlock()
	for _, cs := range idle {
		for _, c := range cs {
			c.conn.Close()
		}
	}
	t.h2.closeIdle()
	t.Fallback.CloseIdleConnections()
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.h2c(req) {
		return t.roundTripH2C(req)
	}
	if !t.handles(req) {
		return t.fallback().RoundTrip(req)
	}
	err := checkHeader(req.Header)
	if err == nil {
		err = checkTarget(req)
	}
	if err != nil {
		closeBody(req)
		return nil, err
	}
	ctx := req.Context()
	// A request whose context already ended is not sent: on an idle
	// connection the write would beat the cancellation (net/http checks
	// first too).
	if err := ctx.Err(); err != nil {
		closeBody(req)
		return nil, err
	}
	body, err := requestBody(req)
	if err != nil {
		return nil, err
	}
	key := originOf(req.URL)
	trace := httptrace.ContextClientTrace(ctx)
	for attempt := 0; ; attempt++ {
		if trace != nil && trace.GetConn != nil {
			trace.GetConn(key.addr)
		}
		c, err := t.conn(ctx, key, attempt > 0)
		if err != nil {
			return nil, err
		}
		resp, err := c.roundTrip(ctx, req, body)
		if err == nil {
			return resp, nil
		}
		c.conn.Close()
		// A kept connection the server closed fails before any byte of
		// the answer: send the request again, once, on a new connection.
		// Servers close kept connections at will, some without a word
		// (llama.cpp's closes after a streamed answer, often just as the
		// next request goes out), and net/http sends such a POST again
		// only where it could not look at the connection first: a
		// measured request would fail for the server's housekeeping. That
		// close comes at once; one long after the request went out whole
		// is the server (or a proxy) dropping a request it was running —
		// a crash in a long prefill — and sending it again could run it
		// twice: then only a request that may run twice goes again, as in
		// net/http. The trace reports the new connection (a second
		// GetConn), and the request's clock restarts there.
		late := c.sent && time.Since(c.wrote) > resendWindow
		if !c.reused || !errors.Is(err, errNoAnswer) || attempt > 0 || ctx.Err() != nil || late && !replayable(req) {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, err
		}
	}
}

// fallback is Fallback, set up for HTTP/2 when HTTP2 asks for it.
func (t *Transport) fallback() *http.Transport {
	t.h2once.Do(func() {
		if !t.HTTP2 {
			return
		}
		var p http.Protocols
		p.SetHTTP2(true)
		p.SetUnencryptedHTTP2(true)
		t.Fallback.Protocols = &p
		t.Fallback.ForceAttemptHTTP2 = true
	})
	return t.Fallback
}

// Runs reports whether requests to u run on Transport's own connections
// (rather than through Fallback).
func (t *Transport) Runs(u *url.URL) bool {
	return t.handles(&http.Request{Method: http.MethodPost, URL: u, Header: http.Header{}})
}

// resendWindow: a kept connection that fails this soon after the request
// went out whole was being closed by the server as the request arrived.
const resendWindow = 100 * time.Millisecond

// replayable reports whether a request may reach the server twice:
// net/http's rule, an idempotent method or an idempotency key (the body is
// held in memory, so it can always be sent again).
func replayable(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	_, key := req.Header["Idempotency-Key"]
	_, xkey := req.Header["X-Idempotency-Key"]
	return key || xkey
}

// handles reports whether the request is one for Transport's own
// connections: HTTP or HTTPS, not HTTP/2, no proxy, a body of known
// length, no 100-continue.
func (t *Transport) handles(req *http.Request) bool {
	if t.HTTP2 || req.URL == nil || (req.URL.Scheme != "http" && req.URL.Scheme != "https") || req.URL.Host == "" {
		return false
	}
	if req.Body != nil && req.Body != http.NoBody && req.ContentLength <= 0 {
		return false
	}
	if req.Header.Get("Expect") != "" || req.Header.Get("Upgrade") != "" {
		return false
	}
	if t.Fallback.Proxy != nil {
		if u, err := t.Fallback.Proxy(req); err != nil || u != nil {
			return false
		}
	}
	return true
}

// requestBody reads the request's body, which RoundTrip must close.
func requestBody(req *http.Request) ([]byte, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, nil
	}
	defer req.Body.Close()
	b := make([]byte, req.ContentLength)
	if _, err := io.ReadFull(req.Body, b); err != nil {
		return nil, fmt.Errorf("http: reading the request body: %w", err)
	}
	return b, nil
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// checkHeader refuses header names and values that would break the
// request's framing (a CR or LF smuggling a header in), as net/http does.
func checkHeader(h http.Header) error {
	for k, vs := range h {
		if k == "" || strings.ContainsAny(k, " :\r\n\t") {
			return fmt.Errorf("net/http: invalid header field name %q", k)
		}
		for _, v := range vs {
			if strings.ContainsAny(v, "\r\n\x00") {
				return fmt.Errorf("net/http: invalid header field value for %q", k)
			}
		}
	}
	return nil
}

// checkTarget refuses a Host or a request target holding a control byte (a
// line break would add lines of the caller's to the request's head), as
// net/http does.
func checkTarget(req *http.Request) error {
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	if strings.ContainsFunc(host, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return errors.New("http: invalid Host header")
	}
	if strings.ContainsFunc(req.URL.RequestURI(), func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return errors.New("net/http: can't write control character in Request.URL")
	}
	return nil
}

// origin is where a connection goes: the pool's key, and what a dial needs.
type origin struct {
	key  string // scheme://host:port
	addr string // host:port
	host string // the name TLS verifies
	tls  bool
}

func originOf(u *url.URL) origin {
	o := origin{host: u.Hostname(), tls: u.Scheme == "https"}
	port := u.Port()
	switch {
	case port != "":
	case o.tls:
		port = "443"
	default:
		port = "80"
	}
	o.addr = net.JoinHostPort(o.host, port)
	o.key = u.Scheme + "://" + o.addr
	return o
}

// conn returns an idle connection to o, or dials one (always, if fresh).
// An idle connection the server closed, or sent bytes on, is closed and
// the next one tried.
func (t *Transport) conn(ctx context.Context, o origin, fresh bool) (*h1conn, error) {
	for !fresh {
		t.mu.Lock()
		cs := t.idle[o.key]
		if len(cs) == 0 {
			t.mu.Unlock()
			break
		}
		c := cs[len(cs)-1]
		cs[len(cs)-1] = nil
		t.idle[o.key] = cs[:len(cs)-1]
		t.mu.Unlock()
		if c.expired(time.Now()) {
			c.conn.Close()
			continue
		}
		usable, known := c.idleUsable()
		if !usable {
			c.conn.Close()
			continue
		}
		c.reused, c.checked = true, known
		return c, nil
	}
	return t.dial(ctx, o)
}

// dial opens a connection to o: TCP, then for HTTPS the TLS handshake.
func (t *Transport) dial(ctx context.Context, o origin) (*h1conn, error) {
	dial := t.Fallback.DialContext
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	nc, err := dial(ctx, "tcp", o.addr)
	if err != nil {
		return nil, err
	}
	c := &h1conn{t: t, key: o.key, conn: nc}
	if o.tls {
		tc := tls.Client(nc, t.tlsConfig(o.host))
		trace := httptrace.ContextClientTrace(ctx)
		if trace != nil && trace.TLSHandshakeStart != nil {
			trace.TLSHandshakeStart()
		}
		hctx := ctx
		if d := t.Fallback.TLSHandshakeTimeout; d > 0 {
			// net/http's bound (10 s in its default transport): a server
			// that stalls the handshake fails the request, not holds it.
			var cancel context.CancelFunc
			hctx, cancel = context.WithTimeout(ctx, d)
			defer cancel()
		}
		err := tc.HandshakeContext(hctx)
		state := tc.ConnectionState()
		if trace != nil && trace.TLSHandshakeDone != nil {
			trace.TLSHandshakeDone(state, err)
		}
		if err != nil {
			nc.Close()
			return nil, err
		}
		c.conn, c.tls = tc, &state
	}
	c.lr = headLimit{r: c.conn, budget: -1}
	c.br = bufio.NewReaderSize(&c.lr, h1Buffer)
	return c, nil
}

// tlsConfig is Fallback's TLS configuration (verification, roots, client
// certificates) for one host, offering HTTP/1.1 only, with a session cache
// so that a connection opened again resumes its session.
func (t *Transport) tlsConfig(host string) *tls.Config {
	// Fallback's configuration is read once, at the first dial, and never
	// written: net/http reads it without a lock, and it may be the caller's.
	t.tlsOnce.Do(func() {
		if c := t.Fallback.TLSClientConfig; c != nil {
			t.tlsBase = c.Clone()
		} else {
			t.tlsBase = &tls.Config{}
		}
		if t.tlsBase.ClientSessionCache == nil {
			t.tlsBase.ClientSessionCache = tls.NewLRUClientSessionCache(0)
		}
	})
	cfg := t.tlsBase.Clone()
	if cfg.ServerName == "" {
		cfg.ServerName = host
	}
	cfg.NextProtos = []string{"http/1.1"}
	return cfg
}

// Preconnect opens connections to the origin of u (TCP, and for HTTPS the
// TLS handshake) until at least n are idle there, so that the requests that
// follow find them open and pay for no set-up. With HTTP2 it opens the one
// connection the streams share: over plain HTTP in Transport's own pool
// (prior knowledge), over TLS with one HEAD request to u through net/http,
// which leaves its connection open. Proxied requests are net/http's to
// connect: it opens none for them. It returns how many it opened, and the
// first error.
func (t *Transport) Preconnect(ctx context.Context, u *url.URL, n int) (int, error) {
	if t.h2c(&http.Request{Method: http.MethodHead, URL: u, Header: http.Header{}}) {
		return t.h2cOpen(ctx, u)
	}
	if t.HTTP2 {
		return t.preconnectHTTP2(ctx, u)
	}
	if !t.Runs(u) {
		return 0, nil
	}
	o := originOf(u)
	need := n - t.prune(o)
	if need <= 0 {
		return 0, nil
	}
	return t.open(ctx, o, need)
}

// open dials need connections to o, a few at a time, and puts them with
// the idle ones. It returns how many it opened, and the first error.
func (t *Transport) open(ctx context.Context, o origin, need int) (int, error) {
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		opened int
		first  error
	)
	sem := make(chan struct{}, preconnectParallel)
	for range need {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c, err := t.dial(ctx, o)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if first == nil {
					first = err
				}
				return
			}
			opened++
			t.put(c)
		}()
	}
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		first = ctx.Err()
	}
	return opened, first
}

// Spare opens connections to the origin of u until at least n are idle
// there, counting the idle ones as they stand (no check of each, unlike
// Preconnect, and none is taken out of the pool meanwhile): a caller
// running beside requests keeps spare connections ahead of them. Over
// HTTP/2 and through a proxy it opens none. It returns how many it opened,
// and the first error.
func (t *Transport) Spare(ctx context.Context, u *url.URL, n int) (int, error) {
	if t.HTTP2 || !t.Runs(u) {
		return 0, nil
	}
	o := originOf(u)
	t.mu.Lock()
	need := n - len(t.idle[o.key])
	t.mu.Unlock()
	if need <= 0 {
		return 0, nil
	}
	return t.open(ctx, o, need)
}

// prune closes the idle connections to o that cannot carry a request (the
// server closed them, or is about to) and returns how many are left.
func (t *Transport) prune(o origin) int {
	t.mu.Lock()
	cs := t.idle[o.key]
	delete(t.idle, o.key)
	t.mu.Unlock()
	now := time.Now()
	keep := cs[:0]
	for _, c := range cs {
		if usable, _ := c.idleUsable(); !usable || c.expired(now) {
			c.conn.Close()
			continue
		}
		keep = append(keep, c)
	}
	clear(cs[len(keep):])
	t.mu.Lock()
	if t.idle == nil {
		t.idle = make(map[string][]*h1conn)
	}
	t.idle[o.key] = append(t.idle[o.key], keep...)
	n := len(t.idle[o.key])
	t.mu.Unlock()
	return n
}

// preconnectHTTP2 opens the HTTP/2 connection to u's origin with a HEAD
// request (any answer will do), unless one is open already.
func (t *Transport) preconnectHTTP2(ctx context.Context, u *url.URL) (int, error) {
	opened := 0
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(i httptrace.GotConnInfo) {
			if !i.Reused {
				opened = 1
			}
		},
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, u.String(), nil)
	if err != nil {
		return 0, err
	}
	resp, err := t.fallback().RoundTrip(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return opened, nil
}

// preconnectParallel bounds the dials Preconnect runs at once: enough to
// open thousands of connections in well under a second on loopback, few
// enough not to flood a server's accept queue.
const preconnectParallel = 64

// put returns a connection whose last answer was read to its end; one
// holding bytes past that end (a server out of step) is closed instead.
func (t *Transport) put(c *h1conn) {
	if c.br.Buffered() > 0 || c.spent() {
		c.conn.Close()
		return
	}
	c.idleSince = time.Now()
	t.mu.Lock()
	if t.idle == nil {
		t.idle = make(map[string][]*h1conn)
	}
	t.idle[c.key] = append(t.idle[c.key], c)
	t.mu.Unlock()
}

// idleUsable reports whether an idle connection can carry a request: the
// server has not closed it (a keep-alive timeout) nor sent bytes no request
// asked for (a server out of step, whose stray answer the next request
// would take for its own). net/http's reader goroutine sees both as they
// happen; here a look at the socket that does not wait (see peekIdle)
// tells. Over TLS, bytes waiting may be the server's session tickets
// rather than an answer: a short read through TLS takes them in, and only
// data it returns, or an end, condemns the connection. known is false
// where it cannot look (Windows, a connection without a descriptor).
func (c *h1conn) idleUsable() (usable, known bool) {
	if c.br.Buffered() > 0 {
		// Bytes past the last answer were read in with it: a stray
		// answer that came before the client had read its own.
		return false, true
	}
	nc := c.conn
	if c.tls != nil {
		nc = c.conn.(*tls.Conn).NetConn()
	}
	switch peekIdle(nc) {
	case idleUnknown:
		return true, false
	case idleQuiet:
		return true, true
	case idleClosed:
		return false, true
	}
	if c.tls == nil {
		return false, true
	}
	if c.conn.SetReadDeadline(time.Now().Add(tlsIdleLook)) != nil {
		return false, true
	}
	_, err := c.br.Peek(1)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		return false, true // an answer nobody asked for, an alert or an end
	}
	return c.conn.SetReadDeadline(time.Time{}) == nil, true
}

// tlsIdleLook is how long idleUsable reads through TLS when bytes wait on
// an idle connection; they are already there, so the read takes them at once.
const tlsIdleLook = time.Millisecond

// h1conn is one HTTP/1.1 connection, used by one request at a time.
type h1conn struct {
	t       *Transport
	key     string // the origin in the pool
	conn    net.Conn
	tls     *tls.ConnectionState // nil over plain TCP
	br      *bufio.Reader
	lr      headLimit // what br reads from: the connection, within the head's budget
	head    []byte    // the request head being written, reused
	reused  bool
	checked bool      // reused, and idleUsable could look at it
	sent    bool      // the current request went out whole
	wrote   time.Time // when it did

	// What the server said of the connection's life (Keep-Alive:
	// timeout=T, max=M): served counts the requests it carried, limit is
	// the most it may carry (0: no limit known), idleTimeout how long the
	// server keeps it idle (0: unknown), idleSince when it last went idle.
	served      int
	limit       int
	idleTimeout time.Duration
	idleSince   time.Time
}

// keepAlive reads a Keep-Alive header (timeout=T, max=M) into the
// connection's limits: max counts the requests the server takes after this
// answer's, counted conservatively as including it, and the lowest limit
// any answer implied stands.
func (c *h1conn) keepAlive(h http.Header) {
	for _, v := range h["Keep-Alive"] {
		for f := range strings.SplitSeq(v, ",") {
			k, val, _ := strings.Cut(strings.TrimSpace(f), "=")
			n, err := strconv.Atoi(strings.TrimSpace(val))
			if err != nil || n < 0 {
				continue
			}
			switch strings.ToLower(strings.TrimSpace(k)) {
			case "timeout":
				c.idleTimeout = time.Duration(n) * time.Second
			case "max":
				if l := c.served + n - 1; c.limit == 0 || l < c.limit {
					c.limit = max(l, c.served)
				}
			}
		}
	}
}

// spent reports whether the connection has carried all the requests the
// server said it would take.
func (c *h1conn) spent() bool { return c.limit > 0 && c.served >= c.limit }

// expired reports whether the connection sat idle so long that the server
// may be closing it: retired a second before the server's keep-alive
// timeout (half of it, when under two seconds), so a request never races
// the server's close.
func (c *h1conn) expired(now time.Time) bool {
	if c.idleTimeout <= 0 {
		return false
	}
	margin := time.Second
	if c.idleTimeout < 2*time.Second {
		margin = c.idleTimeout / 2
	}
	return now.Sub(c.idleSince) >= c.idleTimeout-margin
}

// errNoAnswer: the connection failed before any byte of the answer.
var errNoAnswer = errors.New("connection closed before any byte of the answer")

func (c *h1conn) roundTrip(ctx context.Context, req *http.Request, body []byte) (*http.Response, error) {
	trace := httptrace.ContextClientTrace(ctx)
	// A cancelled context ends any read or write in progress at once.
	stop := context.AfterFunc(ctx, func() { c.conn.SetDeadline(time.Unix(1, 0)) })
	c.sent = false
	// GotConn is the request's t0: nothing stands between it and the write.
	if trace != nil && trace.GotConn != nil {
		trace.GotConn(httptrace.GotConnInfo{Conn: c.conn, Reused: c.reused})
	}
	if err := c.write(req, body); err != nil {
		stop()
		return nil, answerError(err, false)
	}
	c.sent, c.wrote = true, time.Now()
	c.served++
	if trace != nil && trace.WroteRequest != nil {
		trace.WroteRequest(httptrace.WroteRequestInfo{})
	}
	resp, err := c.readHead(req, trace)
	if err != nil {
		stop()
		return nil, err
	}
	resp.TLS = c.tls
	c.body(ctx, req, resp, stop)
	return resp, nil
}

// answerError marks failures before the answer's first byte as errNoAnswer
// (with the cause kept), so a reused connection's request can be retried.
func answerError(err error, gotBytes bool) error {
	if gotBytes {
		return err
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return fmt.Errorf("%w: %w", errNoAnswer, err)
	}
	return err
}

func (c *h1conn) write(req *http.Request, body []byte) error {
	b := c.head[:0]
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	b = append(b, method...)
	b = append(b, ' ')
	b = append(b, req.URL.RequestURI()...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, host...)
	b = append(b, "\r\n"...)
	for k, vs := range req.Header {
		switch k {
		case "Host", "Content-Length", "Connection", "Transfer-Encoding":
			continue
		}
		for _, v := range vs {
			b = append(b, k...)
			b = append(b, ": "...)
			b = append(b, v...)
			b = append(b, "\r\n"...)
		}
	}
	if _, ok := req.Header["User-Agent"]; !ok {
		b = append(b, "User-Agent: Go-http-client/1.1\r\n"...)
	}
	if body != nil || method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch {
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, int64(len(body)), 10)
		b = append(b, "\r\n"...)
	}
	if req.Close {
		b = append(b, "Connection: close\r\n"...)
	}
	b = append(b, "\r\n"...)
	if len(body) <= h1InlineBody {
		b = append(b, body...)
		body = nil
	}
	c.head = b
	if cap(c.head) > 4<<10 { // keep no large body around between requests
		c.head = nil
	}
	if _, err := c.conn.Write(b); err != nil {
		return err
	}
	if len(body) > 0 {
		if _, err := c.conn.Write(body); err != nil {
			return err
		}
	}
	return nil
}

// Limits on an answer's head, as net/http's: its bytes (status lines and
// header fields of the interim answers and the final one together; a
// server sending a gigabyte of headers fails rather than fills memory),
// and how many interim (1xx) answers may come before the final one (an
// endless series of 103 Early Hints must not hold a request).
const (
	maxHeadBytes    = 1 << 20
	maxInterimHeads = 5
)

// ErrHeadTooLarge: the answer's head passed maxHeadBytes.
var ErrHeadTooLarge = errors.New("the answer's headers passed 1 MiB")

// ErrTooManyInterim reports more interim (1xx) answers than a request may
// get before its final one.
var ErrTooManyInterim = fmt.Errorf("more than %d interim (1xx) answers before the final one", maxInterimHeads)

// headLimit is what a connection's buffered reader reads from: the
// connection, failing once more than the budget was read while a budget
// is set (reading an answer's head). The buffer reads ahead, so the limit
// is exact to a buffer's size.
type headLimit struct {
	r      io.Reader
	budget int64 // bytes left; <0: no limit
}

func (l *headLimit) Read(p []byte) (int, error) {
	if l.budget >= 0 {
		if l.budget == 0 {
			return 0, ErrHeadTooLarge
		}
		p = p[:min(int64(len(p)), l.budget)]
	}
	n, err := l.r.Read(p)
	if l.budget >= 0 {
		l.budget -= int64(n)
	}
	return n, err
}

// readHead reads the status line and headers, skipping interim (1xx) answers.
func (c *h1conn) readHead(req *http.Request, trace *httptrace.ClientTrace) (*http.Response, error) {
	if c.lr.r != nil { // (a connection made by hand, in tests, has no limit)
		c.lr.budget = maxHeadBytes
		defer func() { c.lr.budget = -1 }()
	}
	if _, err := c.br.Peek(1); err != nil {
		return nil, answerError(err, false)
	}
	if trace != nil && trace.GotFirstResponseByte != nil {
		trace.GotFirstResponseByte()
	}
	tp := textproto.NewReader(c.br)
	for interim := 0; ; interim++ {
		if interim > maxInterimHeads {
			return nil, ErrTooManyInterim
		}
		line, err := tp.ReadLine()
		if err != nil {
			return nil, err
		}
		proto, status, ok := strings.Cut(line, " ")
		major, minor, okProto := http.ParseHTTPVersion(proto)
		codeText, _, _ := strings.Cut(strings.TrimLeft(status, " "), " ")
		code, err := strconv.Atoi(codeText)
		if !ok || !okProto || len(codeText) != 3 || err != nil || code < 100 {
			return nil, fmt.Errorf("malformed HTTP response %q", line)
		}
		hdr, err := tp.ReadMIMEHeader()
		if err != nil {
			return nil, fmt.Errorf("malformed HTTP response headers: %w", err)
		}
		if code < 200 && code != http.StatusSwitchingProtocols {
			continue // 100 Continue, 103 Early Hints
		}
		resp := &http.Response{
			Status:     strings.TrimSpace(status),
			StatusCode: code,
			Proto:      proto,
			ProtoMajor: major,
			ProtoMinor: minor,
			Header:     http.Header(hdr),
			Request:    req,
		}
		c.keepAlive(resp.Header)
		resp.Close = req.Close || hasToken(resp.Header, "Connection", "close") ||
			(!resp.ProtoAtLeast(1, 1) && !hasToken(resp.Header, "Connection", "keep-alive")) || c.spent()
		return resp, nil
	}
}

// hasToken reports whether a comma-separated header holds the token.
func hasToken(h http.Header, key, token string) bool {
	for _, v := range h[key] {
		for f := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(f), token) {
				return true
			}
		}
	}
	return false
}

// body sets up the answer's body reader by its framing: chunked, a
// Content-Length, or the rest of the connection.
func (c *h1conn) body(ctx context.Context, req *http.Request, resp *http.Response, stop func() bool) *h1body {
	b := &h1body{c: c, ctx: ctx, stop: stop, reuse: !resp.Close}
	resp.Body = b
	switch {
	case req.Method == http.MethodHead || resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusNotModified:
		resp.ContentLength = 0
		b.r = bytes.NewReader(nil)
	case resp.ProtoAtLeast(1, 1) && hasToken(resp.Header, "Transfer-Encoding", "chunked"):
		// (Before HTTP/1.1 there is no chunked coding: net/http reads such a
		// body to the connection's end, and so does this.)
		resp.TransferEncoding = []string{"chunked"}
		resp.ContentLength = -1
		resp.Header.Del("Transfer-Encoding")
		// Chunked framing overrides a length sent with it (RFC 9112 6.3),
		// and the length must not reach whoever forwards the body (a
		// proxy), as net/http drops it too.
		resp.Header.Del("Content-Length")
		b.r = httputil.NewChunkedReader(c.br)
		b.chunked = true
	case resp.Header.Get("Content-Length") != "":
		// Digits only, and repeated only with the same value (net/http's
		// rule): with two lengths there is no telling where the answer
		// ends, and a wrong guess leaves its rest on the connection to be
		// taken for the next answer.
		cl := resp.Header["Content-Length"]
		n, err := strconv.ParseUint(strings.TrimSpace(cl[0]), 10, 63)
		for _, v := range cl[1:] {
			if strings.TrimSpace(v) != strings.TrimSpace(cl[0]) {
				err = errors.New("differing values")
			}
		}
		if err != nil {
			b.err = fmt.Errorf("malformed Content-Length %q", cl)
			break
		}
		resp.ContentLength = int64(n)
		b.r = io.LimitReader(c.br, int64(n))
		b.length = int64(n)
	default: // the body runs to the end of the connection
		resp.ContentLength = -1
		resp.Close = true
		b.reuse = false
		b.r = c.br
	}
	if b.err != nil {
		b.releaseLocked(false)
	} else if resp.ContentLength == 0 {
		b.err = io.EOF // nothing to read: the connection is free now
		b.releaseLocked(b.reuse)
	}
	return b
}

// h1body is an answer's body. At its clean end the connection goes back to
// the pool; closed early or broken, the connection is closed. Close may
// come from another goroutine while a Read waits (a stall timer): it
// closes the connection, which ends that Read.
type h1body struct {
	c       *h1conn
	ctx     context.Context
	stop    func() bool
	r       io.Reader
	chunked bool
	length  int64 // Content-Length, when framed by it
	read    int64 // touched by one reader at a time (reading, draining)
	reuse   bool

	mu       sync.Mutex
	err      error // sticky: io.EOF at the clean end, or why reading ended
	done     bool  // the connection was released
	reading  bool  // a Read waits outside mu
	draining bool  // Close reads the rest of the answer
	cut      bool  // a second Close cut the connection while Close drained
}

var errClosedBody = errors.New("http: read on closed response body")

// Close reads what is left of an answer for at most drainWait and
// drainMax bytes before giving up its connection: a reader that stops at
// the answer's last event (an SSE decoder at [DONE]) leaves the chunked
// end marker unread, often still on its way, and the connection can carry
// the next request once it is read. net/http reads up to 256 KB on Close,
// without a time limit.
const (
	drainWait = 50 * time.Millisecond
	drainMax  = 64 << 10
)

func (b *h1body) Read(p []byte) (int, error) {
	b.mu.Lock()
	if err := b.err; err != nil {
		b.mu.Unlock()
		return 0, err
	}
	b.reading = true
	b.mu.Unlock()
	n, end := b.next(p)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reading = false
	if end == nil {
		return n, nil
	}
	if b.err != nil { // closed while the read waited
		return n, b.err
	}
	if end == io.EOF {
		b.err = io.EOF
		b.releaseLocked(b.reuse)
		if n > 0 {
			return n, nil
		}
		return 0, io.EOF
	}
	if b.ctx.Err() != nil {
		end = b.ctx.Err()
	}
	b.err = end
	b.releaseLocked(false)
	return n, end
}

// next reads from the answer's framing and says whether the body ended:
// nil (more to come), io.EOF (its clean end), or why reading failed.
func (b *h1body) next(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.read += int64(n)
	switch {
	case err == io.EOF && b.chunked:
		// The last chunk may be followed by trailer fields, then a blank line.
		if _, terr := textproto.NewReader(b.c.br).ReadMIMEHeader(); terr != nil {
			return n, fmt.Errorf("reading the body's trailer: %w", terr)
		}
		return n, io.EOF
	case err == io.EOF && b.read < b.length:
		return n, io.ErrUnexpectedEOF
	case err != nil:
		return n, err
	case b.length > 0 && b.read == b.length:
		return n, io.EOF // the whole body: free the connection without another read
	}
	return n, nil
}

// releaseLocked ends the request's hold on the connection: back to the
// pool when keep is set and the context never cut it, closed otherwise.
func (b *h1body) releaseLocked(keep bool) {
	if b.done {
		return
	}
	b.done = true
	if !b.stop() { // the context fired: the connection's deadline is spent
		keep = false
	}
	if keep {
		b.c.reused = false
		b.c.t.put(b.c)
		return
	}
	b.c.conn.Close()
}

// Close ends the body. Called while a Read waits (a stall timer), it cuts
// the connection, which ends that Read; otherwise it first reads the rest
// of the answer, briefly, to keep the connection (see drainWait).
func (b *h1body) Close() error {
	b.mu.Lock()
	switch {
	case b.draining: // a second Close while the first drains: cut it short
		b.cut = true
		b.c.conn.Close()
		b.mu.Unlock()
		return nil
	case b.done:
		b.mu.Unlock()
		return nil
	}
	b.err = errClosedBody
	if b.reading || !b.reuse {
		b.releaseLocked(false)
		b.mu.Unlock()
		return nil
	}
	b.draining = true
	b.mu.Unlock()
	keep := b.drain()
	b.mu.Lock()
	b.draining = false
	b.releaseLocked(keep && !b.cut)
	b.mu.Unlock()
	return nil
}

// drain reads the rest of the answer within drainWait and drainMax and
// reports whether it reached the clean end.
func (b *h1body) drain() bool {
	if b.c.conn.SetReadDeadline(time.Now().Add(drainWait)) != nil {
		return false
	}
	var buf [512]byte
	for total := 0; total <= drainMax; {
		n, end := b.next(buf[:])
		total += n
		switch {
		case end == io.EOF:
			return b.c.conn.SetReadDeadline(time.Time{}) == nil
		case end != nil:
			return false
		}
	}
	return false
}
