package proxy

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime/debug"
	"sync/atomic"
	"time"
)

// bodies is the budget of memory the request bodies being held take, all
// requests together: a body is read into memory (the proxy reads what it
// is before sending it), and eight clients of 60 MB each took 1.6 GB.
// A body reserves its bytes before it holds them — all it declares
// (Content-Length) before its first byte is read, one without a length
// as its buffer grows — and gives them back when its request ends. When
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
