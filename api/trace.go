package api

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"time"

	"github.com/tokbench/tokbench/wire"
)

// Phases are the instants of a request's way to the server, from the
// transport's httptrace events; zero where a phase did not happen (no
// DNS for an address, no connect on a kept connection).
type Phases struct {
	// Begin: the request was handed to the transport and waits for a
	// connection (httptrace's GetConn; the last one when the request was
	// sent again on a new connection).
	Begin                    time.Time
	DNSStart, DNSDone        time.Time
	ConnectStart, ConnectEnd time.Time
	TLSStart, TLSEnd         time.Time
	// GotConn: the connection is open and the request's write begins
	// (tokbench's own transport reports it right before the write).
	GotConn time.Time
	// WroteHeaders is net/http's (HTTP/2, proxies): its writer has the
	// head. Zero on tokbench's own connections, which write head and body
	// at once.
	WroteHeaders time.Time
	// Wrote: the request's last byte was handed to the kernel.
	Wrote time.Time
	// FirstByte: the answer's first byte arrived (the kernel's stamp where
	// the stream has them).
	FirstByte time.Time
	// Reused is true when the request went on a connection that carried
	// an earlier one.
	Reused bool
	// Reconnects counts the times the transport sent the request again on
	// a new connection because its kept one had been closed.
	Reconnects int
	// Redirects counts the same-origin redirects followed (see
	// FollowSameOrigin); the other phases are the first hop's, FirstByte
	// the final answer's.
	Redirects int
	// HTTP and TLS are the protocol versions the answer came over
	// ("HTTP/1.1", "TLS 1.3"; TLS empty over plain HTTP).
	HTTP, TLS string
}

// requestTrace gathers a request's phases. net/http calls some of the
// hooks from its own goroutines, hence the lock.
type requestTrace struct {
	mu      sync.Mutex
	p       Phases
	gets    int
	conn    net.Conn
	fbNow   time.Time // when the first byte was seen, and
	fbStamp int64     // the kernel's stamp of the read that brought it (0: none)
	// first holds the first hop's phases once a redirect is followed;
	// hops counts the hops followed; refused says why one was not.
	first   *Phases
	hops    int
	refused string
}

// redirected is told that the request follows a redirect: the phases so
// far are the first hop's and stay the request's.
func (t *requestTrace) redirected() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.first == nil {
		p := t.p
		t.first = &p
	}
	t.hops++
}

func (t *requestTrace) refusal() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.refused
}

func (t *requestTrace) refuse(why string) {
	t.mu.Lock()
	t.refused = why
	t.mu.Unlock()
}

func (t *requestTrace) context(ctx context.Context) context.Context {
	now := func(at *time.Time) {
		n := time.Now()
		t.mu.Lock()
		*at = n
		t.mu.Unlock()
	}
	ctx = context.WithValue(ctx, traceKey{}, t)
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GetConn: func(string) {
			n := time.Now()
			t.mu.Lock()
			defer t.mu.Unlock()
			t.gets++
			// A request sent again starts its phases anew (a redirect's
			// hop too; finish keeps the first hop's).
			t.p = Phases{Begin: n, Reconnects: t.gets - 1 - t.hops}
		},
		DNSStart:          func(httptrace.DNSStartInfo) { now(&t.p.DNSStart) },
		DNSDone:           func(httptrace.DNSDoneInfo) { now(&t.p.DNSDone) },
		ConnectStart:      func(string, string) { now(&t.p.ConnectStart) },
		ConnectDone:       func(string, string, error) { now(&t.p.ConnectEnd) },
		TLSHandshakeStart: func() { now(&t.p.TLSStart) },
		TLSHandshakeDone:  func(tls.ConnectionState, error) { now(&t.p.TLSEnd) },
		GotConn: func(info httptrace.GotConnInfo) {
			n := time.Now()
			t.mu.Lock()
			defer t.mu.Unlock()
			t.p.GotConn = n
			t.p.Reused = info.Reused
			t.conn = info.Conn
		},
		WroteHeaders: func() { now(&t.p.WroteHeaders) },
		WroteRequest: func(httptrace.WroteRequestInfo) { now(&t.p.Wrote) },
		GotFirstResponseByte: func() {
			n := time.Now()
			t.mu.Lock()
			defer t.mu.Unlock()
			t.fbNow = n
			if rs := wire.Stamper(t.conn); rs != nil {
				t.fbStamp = rs.LastReceived()
			}
		},
	})
}

// Sent is the request's t0, the instant its bytes went to the kernel on
// an open connection: GotConn on tokbench's own connections, where the
// write follows at once; net/http's WroteHeaders where it wrote (its
// writer runs on a goroutine of its own, after GotConn); Begin when
// neither came (the request failed before).
func (p *Phases) Sent() time.Time {
	switch {
	case !p.WroteHeaders.IsZero():
		return p.WroteHeaders
	case !p.GotConn.IsZero():
		return p.GotConn
	}
	return p.Begin
}

// finish returns the phases once the answer's head arrived (or the
// request failed), with the first byte on the kernel's clock when kernel
// is set, and the stream's connection.
func (t *requestTrace) finish(kernel bool) (Phases, net.Conn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.p
	if t.first != nil {
		// The request's clock and set-up are its first hop's; its
		// connection, protocol and first byte the final answer's.
		last := p
		p = *t.first
		p.Redirects = t.hops
		p.Reused, p.Reconnects = last.Reused, last.Reconnects // GetConn's count runs over every hop
	}
	if !t.fbNow.IsZero() {
		p.FirstByte = t.fbNow
		if kernel {
			p.FirstByte = wire.StampTime(t.fbNow, t.fbStamp)
		}
	}
	return p, t.conn
}

// Settle completes phases p of an answer that came: its protocol
// versions, and one clock that never goes back from t0 (start) to the
// request's write and the first byte.
func (p *Phases) Settle(resp *http.Response, start time.Time) {
	p.HTTP = resp.Proto
	if resp.TLS != nil {
		p.TLS = tlsVersion(resp.TLS.Version)
	}
	if p.FirstByte.Before(start) {
		p.FirstByte = start
	}
	if p.Wrote.After(p.FirstByte) {
		p.Wrote = p.FirstByte // the server answered it: it was written by then
	}
}

// tlsVersion names a TLS version as run.json shows it.
func tlsVersion(v uint16) string {
	if v == 0 {
		return ""
	}
	return tls.VersionName(v)
}
