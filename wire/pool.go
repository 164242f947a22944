package wire

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"sync"
	"time"
)

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
			return nil, &HandshakeError{Err: err}
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
