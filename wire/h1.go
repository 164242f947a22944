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
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/http/httputil"
	"net/textproto"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Transport is the HTTP transport tokbench measures with. Plain-HTTP
// requests (the local and in-cluster servers where the client's own cost
// matters most) run on its own HTTP/1.1 connections: the caller's goroutine
// writes the request and reads the response itself, where net/http hands
// each request to two more goroutines per connection (a writer and a
// reader) and wakes three threads per request to do so. That costs a
// fraction of the CPU per request and per token chunk, and two goroutine
// stacks less per open stream. HTTPS, proxied requests and bodies of
// unknown length go through Fallback, a net/http transport.
//
// Connections stay open between requests (any number per host), stamp
// received data with the kernel's receive instant where the kernel allows
// (ReceiveTimestampDialer), and report themselves to httptrace's GotConn.
type Transport struct {
	// Fallback serves what Transport does not, and dials for it:
	// Transport's own connections come from Fallback.DialContext, so
	// setting that (or TLSClientConfig, Proxy) configures both.
	Fallback *http.Transport

	mu   sync.Mutex
	idle map[string][]*h1conn // host:port → idle connections, most recent last
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
	t.Fallback.CloseIdleConnections()
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !t.handles(req) {
		return t.Fallback.RoundTrip(req)
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
	addr := hostPort(req.URL)
	for attempt := 0; ; attempt++ {
		c, err := t.conn(ctx, addr, attempt > 0)
		if err != nil {
			return nil, err
		}
		resp, err := c.roundTrip(ctx, req, body)
		if err == nil {
			return resp, nil
		}
		c.conn.Close()
		// A connection the server closed while it sat idle fails before
		// any byte of the answer: send the request again on a new one,
		// as net/http does. But conn found this one open just before
		// (checked), so once the request went out whole the server may
		// have it and be running it (a generation): then only a request
		// that may run twice is sent again, as in net/http. Where conn
		// could not look, a stale connection is the likely cause and the
		// request is sent again.
		if !c.reused || !errors.Is(err, errNoAnswer) || attempt > 0 || ctx.Err() != nil ||
			(c.sent && c.checked && !replayable(req)) {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, err
		}
	}
}

// handles reports whether the request is one for Transport's own
// connections: plain HTTP, no proxy, a body of known length, no 100-continue.
func (t *Transport) handles(req *http.Request) bool {
	if req.URL == nil || req.URL.Scheme != "http" || req.URL.Host == "" {
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

func hostPort(u interface {
	Hostname() string
	Port() string
}) string {
	port := u.Port()
	if port == "" {
		port = "80"
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// conn returns an idle connection to addr, or dials one (always, if fresh).
// An idle connection the server closed, or sent bytes on, is closed and
// the next one tried.
func (t *Transport) conn(ctx context.Context, addr string, fresh bool) (*h1conn, error) {
	for !fresh {
		t.mu.Lock()
		cs := t.idle[addr]
		if len(cs) == 0 {
			t.mu.Unlock()
			break
		}
		c := cs[len(cs)-1]
		cs[len(cs)-1] = nil
		t.idle[addr] = cs[:len(cs)-1]
		t.mu.Unlock()
		usable, known := idleUsable(c.conn)
		if !usable {
			c.conn.Close()
			continue
		}
		c.reused, c.checked = true, known
		return c, nil
	}
	dial := t.Fallback.DialContext
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	nc, err := dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return &h1conn{t: t, addr: addr, conn: nc, br: bufio.NewReaderSize(nc, h1Buffer)}, nil
}

// put returns a connection whose last answer was read to its end; one
// holding bytes past that end (a server out of step) is closed instead.
func (t *Transport) put(c *h1conn) {
	if c.br.Buffered() > 0 {
		c.conn.Close()
		return
	}
	t.mu.Lock()
	if t.idle == nil {
		t.idle = make(map[string][]*h1conn)
	}
	t.idle[c.addr] = append(t.idle[c.addr], c)
	t.mu.Unlock()
}

// idleUsable reports whether an idle connection can carry a request: the
// server has not closed it (a keep-alive timeout) nor sent bytes no request
// asked for (a server out of step, whose stray answer the next request
// would take for its own). net/http's reader goroutine sees both as they
// happen; here one read that does not wait looks (the socket does not
// block, so it says EAGAIN when all is well). known is false where it
// cannot look (Windows, a connection without a descriptor).
func idleUsable(nc net.Conn) (usable, known bool) {
	sc, ok := nc.(syscall.Conn)
	if !ok || runtime.GOOS == "windows" {
		return true, false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return true, false
	}
	var (
		rerr error
		b    [1]byte
	)
	if err := raw.Read(func(fd uintptr) bool {
		for {
			_, rerr = sysRead(syscall.Read, fd, b[:])
			if rerr != syscall.EINTR {
				return true
			}
		}
	}); err != nil {
		return false, true
	}
	return rerr == syscall.EAGAIN, true // not a byte, an end or an error
}

// sysRead calls syscall.Read, whose descriptor is an int on Unix and a
// Handle on Windows, so that this file builds on both.
func sysRead[FD ~int | ~uintptr](read func(FD, []byte) (int, error), fd uintptr, p []byte) (int, error) {
	return read(FD(fd), p)
}

// h1conn is one HTTP/1.1 connection, used by one request at a time.
type h1conn struct {
	t       *Transport
	addr    string
	conn    net.Conn
	br      *bufio.Reader
	head    []byte // the request head being written, reused
	reused  bool
	checked bool // reused, and idleUsable could look at it
	sent    bool // the current request went out whole
}

// errNoAnswer: the connection failed before any byte of the answer.
var errNoAnswer = errors.New("connection closed before any byte of the answer")

func (c *h1conn) roundTrip(ctx context.Context, req *http.Request, body []byte) (*http.Response, error) {
	if trace := httptrace.ContextClientTrace(ctx); trace != nil && trace.GotConn != nil {
		trace.GotConn(httptrace.GotConnInfo{Conn: c.conn, Reused: c.reused})
	}
	// A cancelled context ends any read or write in progress at once.
	stop := context.AfterFunc(ctx, func() { c.conn.SetDeadline(time.Unix(1, 0)) })
	c.sent = false
	if err := c.write(req, body); err != nil {
		stop()
		return nil, answerError(err, false)
	}
	c.sent = true
	resp, err := c.readHead(req)
	if err != nil {
		stop()
		return nil, err
	}
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

// readHead reads the status line and headers, skipping interim (1xx) answers.
func (c *h1conn) readHead(req *http.Request) (*http.Response, error) {
	if _, err := c.br.Peek(1); err != nil {
		return nil, answerError(err, false)
	}
	tp := textproto.NewReader(c.br)
	for {
		line, err := tp.ReadLine()
		if err != nil {
			return nil, err
		}
		proto, status, ok := strings.Cut(line, " ")
		major, minor, okProto := http.ParseHTTPVersion(proto)
		codeText, _, _ := strings.Cut(status, " ")
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
		resp.Close = req.Close || hasToken(resp.Header, "Connection", "close") ||
			(!resp.ProtoAtLeast(1, 1) && !hasToken(resp.Header, "Connection", "keep-alive"))
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
