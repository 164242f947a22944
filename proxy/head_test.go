package proxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestProxyForwardsHeadersAtOnce: an upstream that sends its 200 and
// headers, then writes nothing until the client has them, is seen by the
// client through the proxy as directly: the headers arrive while the
// upstream still waits, for a measured stream and a request passed
// through alike. Were the proxy to hold them for the body's first byte,
// the two would wait on each other until the upstream's patience (10 s)
// ran out.
func TestProxyForwardsHeadersAtOnce(t *testing.T) {
	got := make(chan struct{}, 1) // the client has the headers
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			w.Header().Set("Content-Type", "text/event-stream")
		}
		w.Header().Set("X-Upstream", "thinking")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select {
		case <-got:
		case <-time.After(10 * time.Second):
		}
		if r.Method == http.MethodPost {
			w.Write([]byte(`data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n"))
		} else {
			w.Write([]byte(`{"data":[]}`))
		}
	}))
	defer up.Close()
	base, records := proxied(t, up.URL)
	for _, c := range []struct{ method, path, body string }{
		{http.MethodPost, "/v1/chat/completions", `{"model":"m","stream":true}`},
		{http.MethodGet, "/v1/models", ""},
	} {
		req, _ := http.NewRequest(c.method, base+c.path, strings.NewReader(c.body))
		begin := time.Now()
		resp, err := http.DefaultClient.Do(req)
		waited := time.Since(begin)
		got <- struct{}{}
		if err != nil {
			t.Fatalf("%s %s: %v", c.method, c.path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.HasSuffix(string(body), "]\n\n") && !strings.HasSuffix(string(body), "}") {
			t.Errorf("%s %s: the client got %q", c.method, c.path, body)
		}
		if resp.StatusCode != 200 || resp.Header.Get("X-Upstream") != "thinking" {
			t.Errorf("%s %s: %d %v", c.method, c.path, resp.StatusCode, resp.Header)
		}
		// The headers came before the upstream's patience ran out: its
		// body waited for them (5 s is half of it, far above any delay).
		if waited > 5*time.Second {
			t.Errorf("%s %s: the headers took %v: held for the body", c.method, c.path, waited)
		}
	}
	if recs := records(); len(recs) != 1 || !recs[0].OK {
		t.Errorf("records %+v, want the stream's, good", recs)
	}
}
