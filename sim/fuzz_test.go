package sim

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// apiPaths are the routes FuzzAPI sends bodies to: every completion API the
// simulator speaks.
var apiPaths = []string{
	"/v1/chat/completions", "/v1/completions", "/api/chat", "/api/generate",
	"/completion", "/generate_stream", "/v1/messages",
}

// FuzzAPI sends arbitrary bodies to every completion route. Whatever the
// body, the handler answers (no panic, no hang: a short context length
// bounds every stream), with a status a client can act on, a JSON error
// body for every refusal, and nothing left in flight.
func FuzzAPI(f *testing.F) {
	for _, seed := range []string{
		`{"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"stream":true}`,
		`{"prompt":"a","max_tokens":9223372036854775807}`,
		`{"prompt":"a","max_tokens":-1}`,
		`{"prompt":[1,2,3],"max_tokens":3,"min_tokens":2,"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true}}`,
		`{"prompt":["a","b"]}`,
		`{"prompt":"a","n":2}`,
		`{"model":"x","prompt":"a","options":{"num_predict":4}}`,
		`{"prompt":"a","n_predict":-1,"stream":true}`,
		`{"inputs":"a","parameters":{"max_new_tokens":3}}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"a"}]}],"max_completion_tokens":2}`,
		`{"prompt":"a","min_tokens":9223372036854775807}`,
		`{"messages":null}`, `[]`, `null`, `{`, ``,
	} {
		for i := range apiPaths {
			f.Add(uint8(i), []byte(seed))
		}
	}
	cfg := DefaultConfig()
	cfg.Cost = fixedCost(20*time.Microsecond, 4096)
	cfg.MaxModelLen = 64
	cfg.MaxBodyBytes = 64 << 10
	s, err := NewServer(cfg)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = s.Close() })
	h := s.Handler()
	f.Fuzz(func(t *testing.T, path uint8, body []byte) {
		p := apiPaths[int(path)%len(apiPaths)]
		req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, p, bytes.NewReader(body))
		w := httptest.NewRecorder()
		done := make(chan struct{})
		go func() { defer close(done); h.ServeHTTP(w, req) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s %q: no answer in 10 s", p, body)
		}
		switch w.Code {
		case http.StatusOK:
		case http.StatusBadRequest, http.StatusNotFound, http.StatusRequestEntityTooLarge:
			var e struct {
				Error struct {
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error.Message == "" {
				t.Fatalf("%s %q: status %d with body %q, want a JSON error", p, body, w.Code, w.Body.String())
			}
		default:
			t.Fatalf("%s %q: status %d", p, body, w.Code)
		}
		if w.Code == http.StatusOK && strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream") &&
			!bytes.HasSuffix(w.Body.Bytes(), []byte("\n\n")) {
			t.Fatalf("%s %q: stream does not end with a whole event: %q", p, body, tail(w.Body.Bytes()))
		}
		if n := s.inflight.Load(); n != 0 {
			t.Fatalf("%s %q: %d requests still in flight after the answer", p, body, n)
		}
	})
}

func tail(b []byte) []byte { return b[max(0, len(b)-200):] }
