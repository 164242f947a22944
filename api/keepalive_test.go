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
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &Client{HTTP: &http.Client{Transport: tr}, Adapter: OpenAI{Chat: true}, BaseURL: srv.URL}
	const requests = 20
	for range requests {
		if r := c.Do(context.Background(), req1); r.Failed() {
			t.Fatalf("class %q (%s)", r.ErrorClass, r.Error)
		}
	}
	// The transport returns a drained connection to its pool from another
	// goroutine, so a request may now and then dial before it is back; a
	// client that never reuses would open one per request.
	if n := conns.Load(); n > requests/2 {
		t.Errorf("%d sequential requests opened %d connections, want them reused", requests, n)
	}
}
