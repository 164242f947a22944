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
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
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
	if wb, ok := req.Body.(*Body); ok {
		if b, whole := wb.whole(); whole && int64(len(b)) == req.ContentLength {
			return b, nil
		}
	}
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
