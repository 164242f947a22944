package api

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// TestConnectionReused: a complete stream leaves its connection in the pool,
// so consecutive requests do not pay a new TCP (or TLS) handshake each.
func TestConnectionReused(t *testing.T) {
	body := benchBody(3)
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(body)
		w.(http.Flusher).Flush() // chunked, as streaming servers answer
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	for _, tr := range benchTransports() {
		conns.Store(0)
		c := &Client{HTTP: &http.Client{Transport: tr.rt}, Adapter: OpenAI{Chat: true}, BaseURL: srv.URL}
		const requests = 20
		for range requests {
			if r := c.Do(context.Background(), req1); r.Failed() {
				t.Fatalf("%s: class %q (%s)", tr.name, r.ErrorClass, r.Error)
			}
		}
		tr.rt.CloseIdleConnections()
		// net/http returns a drained connection to its pool from another
		// goroutine, so a request may now and then dial before it is back;
		// tokbench's transport returns it before the last read returns. A
		// client that never reuses would open one per request.
		want := int64(requests / 2)
		if tr.name == "tokbench" {
			want = 1
		}
		if n := conns.Load(); n > want {
			t.Errorf("%s: %d sequential requests opened %d connections, want at most %d", tr.name, requests, n, want)
		}
	}
}
