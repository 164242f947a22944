package wire

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"strconv"
	"strings"
	"syscall"
	"time"
)

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
	// The head and the body go in one write: over TCP a vectored one, the
	// body uncopied; else (TLS) the body appended to the head, up to
	// h1InlineBody. A short body is appended either way.
	tc := tcpOf(c.conn)
	if len(body) <= h1Buffer || tc == nil && len(body) <= h1InlineBody {
		b = append(b, body...)
		body = nil
	}
	c.head = b
	if cap(c.head) > 4<<10 { // keep no large body around between requests
		c.head = nil
	}
	if len(body) > 0 && tc != nil {
		bufs := net.Buffers{b, body}
		_, err := bufs.WriteTo(tc)
		return err
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

// HandshakeError is a TLS handshake that failed, whatever its cause
// (crypto/tls says many of them in words only); its text is the cause's.
// A handshake the context or the connection ended wraps that cause too.
type HandshakeError struct{ Err error }

func (e *HandshakeError) Error() string { return e.Err.Error() }
func (e *HandshakeError) Unwrap() error { return e.Err }

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
