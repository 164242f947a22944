package wire

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"time"
)

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
