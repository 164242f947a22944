package sim

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// connLimiter keeps at most n connections open. At the cap, a new
// connection takes the place of the connection that has waited longest
// without a request in progress (idle between keep-alive requests, or opened
// and silent), once it has waited evictGrace; until one has, Accept waits
// for a connection to close or to idle that long,
// so excess clients queue in the kernel's listen backlog rather than being
// refused. Without the eviction, finished clients' idle keep-alive
// connections would hold every slot and new clients would wait for ever.
type connLimiter struct {
	net.Listener
	sem       chan struct{}
	idle      chan struct{} // cap 1: "a connection went idle"
	done      chan struct{}
	closeOnce sync.Once

	mu    sync.Mutex
	conns map[*limitedConn]time.Time // idle since; zero while a request is in progress
}

func limitListener(l net.Listener, n int) *connLimiter {
	return &connLimiter{
		Listener: l, sem: make(chan struct{}, n), idle: make(chan struct{}, 1), done: make(chan struct{}),
		conns: make(map[*limitedConn]time.Time, min(n, 1024)),
	}
}

func (l *connLimiter) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	for {
		select {
		case l.sem <- struct{}{}:
			return l.track(c), nil
		default:
		}
		if l.evictIdle() {
			continue // its Close freed a slot
		}
		select {
		case l.sem <- struct{}{}:
			return l.track(c), nil
		case <-l.idle: // a connection went idle: it may be evicted soon
		case <-time.After(evictGrace / 4): // one may have idled past the grace
		case <-l.done:
			_ = c.Close()
			return nil, net.ErrClosed
		}
	}
}

// track wraps an admitted connection; it counts as idle until its first
// request starts.
func (l *connLimiter) track(c net.Conn) *limitedConn {
	lc := &limitedConn{Conn: c, l: l}
	l.mu.Lock()
	l.conns[lc] = time.Now()
	l.mu.Unlock()
	return lc
}

// evictGrace is how long a connection must have been idle (or, new, silent)
// before a waiting one may take its place: a client that just connected,
// or just sent its next request, is not cut off before the server has read
// it.
const evictGrace = 500 * time.Millisecond

// evictIdle closes the connection idle the longest, if it has been idle
// for evictGrace, and reports whether there was one. Its Close frees its
// slot.
func (l *connLimiter) evictIdle() bool {
	l.mu.Lock()
	var oldest *limitedConn
	var since time.Time
	cutoff := time.Now().Add(-evictGrace)
	for c, t := range l.conns {
		if !t.IsZero() && t.Before(cutoff) && (oldest == nil || t.Before(since)) {
			oldest, since = c, t
		}
	}
	if oldest != nil {
		delete(l.conns, oldest) // not chosen twice while it closes
	}
	l.mu.Unlock()
	if oldest == nil {
		return false
	}
	_ = oldest.Close()
	return true
}

// connState is the http.Server's ConnState hook: it tells the limiter which
// connections have a request in progress.
func (l *connLimiter) connState(c net.Conn, st http.ConnState) {
	lc, ok := c.(*limitedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, tracked := l.conns[lc]; !tracked {
		return // closed or being evicted
	}
	switch st {
	case http.StateActive, http.StateHijacked:
		l.conns[lc] = time.Time{}
	case http.StateIdle:
		l.conns[lc] = time.Now()
		select {
		case l.idle <- struct{}{}:
		default:
		}
	case http.StateClosed:
		delete(l.conns, lc)
	}
}

func (l *connLimiter) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

type limitedConn struct {
	net.Conn
	l    *connLimiter
	once sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
		<-c.l.sem
	})
	return err
}
