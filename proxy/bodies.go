package proxy

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// bodies is the budget of memory the request bodies being held take, all
// requests together: a body is read into memory (the proxy reads what it
// is before sending it), and eight clients of 60 MB each took 1.6 GB.
// A body reserves its bytes before it holds them — all it declares
// (Content-Length) before its first byte is read, one without a length
// as its buffer grows — and gives them back once it has been sent
// upstream (heldBody), or when its request ends, if that is sooner. When
// no body is held any more and a quarter of the budget has been given
// back since (or the whole budget, under load that never ends), the freed
// memory goes back to the system (a collection and a scavenge, one at a
// time), so an idle proxy does not keep the peak of a burst.
type bodies struct {
	max      int64
	used     atomic.Int64
	peak     atomic.Int64 // the most ever reserved, for tests
	freed    atomic.Int64 // given back since memory was last returned
	freeing  atomic.Bool
	returned atomic.Int64 // times memory was returned, for tests
}

// errBudget: the bodies held now leave no room for this one.
var errBudget = errors.New("request bodies budget")

// take reserves n bytes, or reports that the budget has no room.
func (b *bodies) take(n int64) bool {
	for {
		used := b.used.Load()
		if used+n > b.max {
			return false
		}
		if b.used.CompareAndSwap(used, used+n) {
			for peak := b.peak.Load(); used+n > peak && !b.peak.CompareAndSwap(peak, used+n); peak = b.peak.Load() {
			}
			return true
		}
	}
}

// give returns n bytes reserved once their body is no longer held.
func (b *bodies) give(n int64) {
	if n == 0 {
		return
	}
	used, freed := b.used.Add(-n), b.freed.Add(n)
	if (used > 0 || freed < b.max/4) && freed < b.max || !b.freeing.CompareAndSwap(false, true) {
		return
	}
	// A moment later, once the handlers that held the bodies have
	// returned (a body still on a stack is not garbage yet).
	time.AfterFunc(returnAfter, func() {
		defer b.freeing.Store(false)
		b.freed.Store(0)
		debug.FreeOSMemory()
		b.returned.Add(1)
	})
}

// returnAfter is how long after the bodies are given back their memory
// goes back to the system.
const returnAfter = 50 * time.Millisecond

// read reads r's body, up to limit bytes, reserving its memory from the
// budget first, copies times over (the transport that sends a measured
// request keeps a copy of its body while it does): the body, and the
// bytes reserved, to give back once the request has ended. A body past
// limit is an *http.MaxBytesError; one the budget has no room for,
// errBudget.
func (b *bodies) read(w http.ResponseWriter, r *http.Request, limit int64, copies int64) (body []byte, held int64, err error) {
	src := http.MaxBytesReader(w, r.Body, limit)
	declared := r.ContentLength
	if declared == 0 {
		return nil, 0, nil // none (net/http's server says -1 for a length not known)
	}
	size := int64(4 << 10)
	if declared > 0 {
		if declared > limit {
			return nil, 0, &http.MaxBytesError{Limit: limit}
		}
		// All of it reserved before a byte is read (the answer is then
		// a clean 503), but 1 MiB of it held before the bytes come: a
		// client that declares 64 MiB and sends nothing holds no more.
		if !b.take(declared * copies) {
			return nil, 0, errBudget
		}
		held, size = declared*copies, min(declared, 1<<20)
	}
	if !b.reserve(&held, size*copies) {
		return nil, held, errBudget
	}
	buf := make([]byte, 0, size)
	for {
		if len(buf) == cap(buf) {
			if declared > 0 && int64(len(buf)) == declared {
				// All it declared is here: the next read is its end
				// (net/http's body reader ends at Content-Length).
				var end [1]byte
				_, err := src.Read(end[:])
				if errors.Is(err, io.EOF) {
					return buf, held, nil
				}
				return nil, held, cmp.Or(err, io.ErrUnexpectedEOF)
			}
			// A body of known length grows to it at once (one copy of
			// its first MiB); one without doubles, up to limit+1, where
			// MaxBytesReader tells it is too long.
			next := min(2*int64(cap(buf)), limit+1)
			if declared > 0 {
				next = declared
			}
			if !b.reserve(&held, next*copies) {
				return nil, held, errBudget
			}
			grown := make([]byte, len(buf), next)
			copy(grown, buf)
			buf = grown
		}
		n, err := src.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			return buf, held, nil
		}
		if err != nil {
			return nil, held, err
		}
	}
}

// reserve makes held, the bytes a body has reserved, at least n.
func (b *bodies) reserve(held *int64, n int64) bool {
	if n <= *held {
		return true
	}
	if !b.take(n - *held) {
		return false
	}
	*held = n
	return true
}

// refuse answers a request whose body could not be held: 413 past the
// bound of one body, 503 past the budget of all (a client may retry
// once others have ended), 400 for a body that could not be read.
func (b *bodies) refuse(w http.ResponseWriter, err error, maxBody int64) {
	switch {
	case errors.Is(err, errBudget):
		w.Header().Set("Retry-After", "1")
		http.Error(w, fmt.Sprintf("tokbench proxy: the request bodies held now leave no room for this one in their budget of %d MiB (Config.MaxBodies); retry", b.max>>20), http.StatusServiceUnavailable)
	case errors.As(err, new(*http.MaxBytesError)):
		http.Error(w, fmt.Sprintf("tokbench proxy: the request body is over %d MiB (Config.MaxBody)", maxBody>>20), http.StatusRequestEntityTooLarge)
	default:
		http.Error(w, "tokbench proxy: reading the request body: "+err.Error(), http.StatusBadRequest)
	}
}

// heldBody is a request body on its way upstream, as the outgoing
// request's Body. Its bytes leave the budget, and are let go, once the
// transport is done with them: it has closed the body (net/http does once
// the body is written; tokbench's own transport once it has its copy) and
// its RoundTrip has returned (no retry reads the body again, and the
// copy tokbench's transport sent from is gone). That is when the answer
// begins, not when it ends: a stream that runs for minutes holds none of
// its request's memory or budget. The handler's end gives back what a
// request that never got that far holds.
type heldBody struct {
	b            *bodies
	mu           sync.Mutex
	buf          []byte
	r            bytes.Reader
	held         int64
	closed, sent bool
}

// errBodyGone is a read of a body already given back.
var errBodyGone = errors.New("tokbench proxy: the request body was already sent")

// newHeldBody is body, which holds held bytes of b's budget, as a
// request body.
func newHeldBody(b *bodies, body []byte, held int64) *heldBody {
	h := &heldBody{b: b, buf: body, held: held}
	h.r.Reset(body)
	return h
}

func (h *heldBody) Read(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.buf == nil {
		return 0, errBodyGone
	}
	return h.r.Read(p)
}

// Close is the transport's: it is done reading.
func (h *heldBody) Close() error {
	h.mu.Lock()
	h.closed = true
	done := h.sent
	h.mu.Unlock()
	if done {
		h.release()
	}
	return nil
}

// getBody is the request's GetBody: the body anew, for a transport that
// sends it again before its RoundTrip returns.
func (h *heldBody) getBody() (io.ReadCloser, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.buf == nil {
		return nil, errBodyGone
	}
	return io.NopCloser(bytes.NewReader(h.buf)), nil
}

// forwarded says the RoundTrip that carried the body has returned.
func (h *heldBody) forwarded() {
	h.mu.Lock()
	h.sent = true
	done := h.closed
	h.mu.Unlock()
	if done {
		h.release()
	}
}

// release gives the body's bytes back to the budget and lets them go; the
// second and later calls do nothing.
func (h *heldBody) release() {
	h.mu.Lock()
	n := h.held
	h.held, h.buf = 0, nil
	h.r.Reset(nil)
	h.mu.Unlock()
	h.b.give(n)
}

// forwarded tells out's body, when the proxy holds it, that the
// RoundTrip that carried it has returned.
func forwarded(out *http.Request) {
	if h, ok := out.Body.(*heldBody); ok {
		h.forwarded()
	}
}
