package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/tokbench/tokbench/wire"
)

// TestReceiveStampsThroughClient: a stream over a stamping connection
// decodes as usual (keep-alive, EOF, every chunk) and its arrival instants
// lie within the request.
func TestReceiveStampsThroughClient(t *testing.T) {
	body := benchBody(50)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(body)
		w.(http.Flusher).Flush()
	}))
	defer srv.Close()
	tr := &http.Transport{DialContext: wire.ReceiveTimestampDialer(nil)}
	defer tr.CloseIdleConnections()
	c := &Client{HTTP: &http.Client{Transport: tr}, Adapter: OpenAI{Chat: true}, BaseURL: srv.URL}
	for range 3 {
		r := c.Do(context.Background(), req1)
		if r.Failed() || len(r.Chunks) != 50 || r.Usage == nil {
			t.Fatalf("class %q (%s), %d chunks", r.ErrorClass, r.Error, len(r.Chunks))
		}
		for i, ch := range r.Chunks {
			if ch.At.Before(r.Start) || ch.At.After(r.Done) {
				t.Fatalf("chunk %d at %v, outside the request %v..%v", i, ch.At, r.Start, r.Done)
			}
		}
	}
}
