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

// errorMessage extracts the human message from an error body: OpenAI's
// {"error": {"message": …}}, {"error": "…"}, {"message": …}, {"detail": …},
// or the text itself, shortened.
func errorMessage(body []byte) string {
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

// stallReader fails reads once no bytes have arrived for the stall timeout,
// by closing the underlying body from a timer.
type stallReader struct {
	r       io.ReadCloser
	timeout time.Duration
	timer   *time.Timer
	fired   atomic.Bool
	once    sync.Once
}

func newStallReader(r io.ReadCloser, timeout time.Duration) *stallReader {
	s := &stallReader{r: r, timeout: timeout}
	s.timer = time.AfterFunc(timeout, func() {
		s.fired.Store(true)
		r.Close()
	})
	return s
}

func (s *stallReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if n > 0 && !s.fired.Load() {
		s.timer.Reset(s.timeout)
	}
	return n, err
}

func (s *stallReader) stalled() bool { return s.fired.Load() }

func (s *stallReader) stop() { s.once.Do(func() { s.timer.Stop() }) }
