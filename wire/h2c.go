package wire

import (
	"context"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"sync"
)

// h2cPool holds the HTTP/2 connections (prior knowledge, no TLS) that
// Transport opens itself with HTTP2 set. net/http's own pool can open a
// second connection for requests that follow one another: its dialing
// goroutine hands the new connection to the first request and only then
// puts it in the pool, so a short first request can end and the next one
// look before it is there. Here a connection is in the pool before any
// request uses it, and one origin has one dial at a time.
type h2cPool struct {
	mu      sync.Mutex
	conns   map[string][]*h2cConn    // origin → open connections, oldest first
	dialing map[string]chan struct{} // origin → closed when its dial ends
}

type h2cConn struct {
	cc   *http.ClientConn
	used bool // a request went on it (GotConn's Reused)
}

// h2c reports whether req goes on an h2cPool connection: HTTP2 set, plain
// HTTP, no proxy.
func (t *Transport) h2c(req *http.Request) bool {
	if !t.HTTP2 || req.URL == nil || req.URL.Scheme != "http" || req.URL.Host == "" {
		return false
	}
	if t.Fallback.Proxy != nil {
		if u, err := t.Fallback.Proxy(req); err != nil || u != nil {
			return false
		}
	}
	return true
}

// roundTripH2C sends req on a connection of the pool with a stream free,
// reporting GetConn and GotConn to its trace as net/http does.
func (t *Transport) roundTripH2C(req *http.Request) (*http.Response, error) {
	o := originOf(req.URL)
	trace := httptrace.ContextClientTrace(req.Context())
	if trace != nil && trace.GetConn != nil {
		trace.GetConn(o.addr)
	}
	c, reused, err := t.h2cReserve(req.Context(), o)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	if trace != nil && trace.GotConn != nil {
		trace.GotConn(httptrace.GotConnInfo{Reused: reused})
	}
	return c.cc.RoundTrip(req)
}

// h2cReserve returns a connection to o with a stream reserved for one
// request, opening a connection when none has one free.
func (t *Transport) h2cReserve(ctx context.Context, o origin) (*h2cConn, bool, error) {
	p := &t.h2
	for {
		p.mu.Lock()
		if c := p.free(o.key); c != nil {
			reused := c.used
			c.used = true
			p.mu.Unlock()
			return c, reused, nil
		}
		if wait, ok := p.dialing[o.key]; ok {
			p.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, false, ctx.Err()
			}
		}
		done := make(chan struct{})
		if p.dialing == nil {
			p.dialing = make(map[string]chan struct{})
		}
		p.dialing[o.key] = done
		p.mu.Unlock()

		cc, err := t.fallback().NewClientConn(ctx, "http", o.addr)
		p.mu.Lock()
		delete(p.dialing, o.key)
		close(done)
		if err != nil {
			p.mu.Unlock()
			return nil, false, err
		}
		if p.conns == nil {
			p.conns = make(map[string][]*h2cConn)
		}
		c := &h2cConn{cc: cc}
		p.conns[o.key] = append(p.conns[o.key], c)
		p.mu.Unlock()
	}
}

// free drops o's connections that can no longer carry a request and
// reserves a stream on the first that has one. p.mu is held.
func (p *h2cPool) free(key string) *h2cConn {
	if len(p.conns[key]) == 0 {
		return nil
	}
	cs := p.conns[key][:0]
	var got *h2cConn
	for _, c := range p.conns[key] {
		if c.cc.Err() != nil {
			c.cc.Close()
			continue
		}
		cs = append(cs, c)
		if got == nil && c.cc.Reserve() == nil {
			got = c
		}
	}
	p.conns[key] = cs
	return got
}

// h2cOpen opens a connection to u's origin unless one is open, and
// returns how many it opened. Like a kept HTTP/1.1 connection, the
// connection it opens is a reused one to the request that takes it first.
func (t *Transport) h2cOpen(ctx context.Context, u *url.URL) (int, error) {
	c, reused, err := t.h2cReserve(ctx, originOf(u))
	if err != nil {
		return 0, err
	}
	c.cc.Release()
	if reused {
		return 0, nil
	}
	return 1, nil
}

// closeIdle closes the pool's connections no request is using.
func (p *h2cPool) closeIdle() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for key, cs := range p.conns {
		kept := cs[:0]
		for _, c := range cs {
			if c.cc.Err() != nil || c.cc.InFlight() == 0 {
				c.cc.Close()
				continue
			}
			kept = append(kept, c)
		}
		p.conns[key] = kept
	}
}
