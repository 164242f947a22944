package api

import (
	"encoding/json"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// ErrorMessage extracts the human message from an error body: OpenAI's
// {"error": {"message": …}}, {"error": "…"}, {"message": …}, {"detail": …},
// or the text itself, shortened.
func ErrorMessage(body []byte) string {
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Detail  json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(body, &v) == nil {
		if len(v.Error) > 0 {
			var inner struct {
				Message string `json:"message"`
			}
			if json.Unmarshal(v.Error, &inner) == nil && inner.Message != "" {
				return shorten(inner.Message)
			}
			var s string
			if json.Unmarshal(v.Error, &s) == nil && s != "" {
				return shorten(s)
			}
		}
		if v.Message != "" {
			return shorten(v.Message)
		}
		if len(v.Detail) > 0 {
			var s string
			if json.Unmarshal(v.Detail, &s) == nil {
				return shorten(s)
			}
			return shorten(string(v.Detail))
		}
	}
	s := strings.TrimSpace(string(body))
	if s == "" {
		return "(empty body)"
	}
	return shorten(s)
}

func shorten(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	s = strings.ToValidUTF8(s, "\uFFFD")
	const limit = 300
	if len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// stallReader fails reads once no bytes have arrived for the stall timeout
// (0: no limit), by closing the underlying body from a timer. Tail sets a
// final limit after which reading ends even if bytes keep coming.
type stallReader struct {
	r       io.ReadCloser
	mu      sync.Mutex
	timeout time.Duration
	timer   *time.Timer
	fired   atomic.Bool
	tailed  bool
	// over, when set, reports that the stream went on too long: reading
	// ends with errOverlong.
	over func() bool
	// clock stamps arrivals with the kernel's receive instant when the
	// connection keeps one (see ReceiveTimestampDialer); nil: time.Now.
	clock func() time.Time
}

// ArrivalClock is how sse decoders reading this body stamp arrivals.
func (s *stallReader) ArrivalClock() func() time.Time { return s.clock }

func newStallReader(r io.ReadCloser, timeout time.Duration) *stallReader {
	s := &stallReader{r: r, timeout: timeout}
	if timeout > 0 {
		s.timer = time.AfterFunc(timeout, s.fire)
	}
	return s
}

func (s *stallReader) fire() {
	s.fired.Store(true)
	s.r.Close()
}

func (s *stallReader) Read(p []byte) (int, error) {
	if s.over != nil && s.over() {
		return 0, errOverlong
	}
	n, err := s.r.Read(p)
	if n > 0 && !s.fired.Load() {
		s.mu.Lock()
		if s.timer != nil && !s.tailed {
			s.timer.Reset(s.timeout)
		}
		s.mu.Unlock()
	}
	return n, err
}

// Tail ends reading d from now at the latest.
func (s *stallReader) Tail(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tailed {
		return
	}
	s.tailed = true
	if s.timer != nil {
		s.timer.Stop()
	}
	s.timer = time.AfterFunc(d, s.fire)
}

// stalled reports whether the stall timeout (not a Tail) ended the body.
func (s *stallReader) stalled() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fired.Load() && !s.tailed
}

func (s *stallReader) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.timer != nil {
		s.timer.Stop()
	}
}
