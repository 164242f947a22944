package api

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// TestSendAt: a request given an instant is prepared, then handed to its
// wait with that instant, and reaches the server no sooner; the wait is
// not counted against --stall-timeout; a retry of it goes at once.
func TestSendAt(t *testing.T) {
	var mu sync.Mutex
	var arrived []time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		arrived = append(arrived, time.Now())
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n")
	}))
	defer srv.Close()
	cl := &Client{HTTP: srv.Client(), Adapter: OpenAI{Chat: true}, BaseURL: srv.URL + "/v1", StallTimeout: 200 * time.Millisecond}
	prep := cl.Prepare(&Request{Messages: []Message{{Role: "user", Content: "hello"}}, MaxTokens: 4})

	// The wait is twice --stall-timeout; the answer, on loopback, comes
	// well inside it even on a busy machine.
	at := time.Now().Add(400 * time.Millisecond)
	var waited []time.Time
	wait := func(due time.Time) {
		waited = append(waited, due)
		time.Sleep(time.Until(due))
	}
	resp := cl.DoPrepared(SendAt(context.Background(), at, wait), prep)
	if resp.Failed() {
		t.Fatalf("the request failed: %s %s (a wait of 400 ms, longer than --stall-timeout's 200 ms, must not count)", resp.ErrorClass, resp.Error)
	}
	if len(waited) != 1 || !waited[0].Equal(at) {
		t.Fatalf("wait was called with %v, want once with the instant %v", waited, at)
	}
	mu.Lock()
	got := append([]time.Time(nil), arrived...)
	mu.Unlock()
	if len(got) != 1 {
		t.Fatalf("the server saw %d requests, want 1", len(got))
	}
	if got[0].Before(at) {
		t.Errorf("the request reached the server %v before its instant", at.Sub(got[0]))
	}
	if resp.Start.Before(at) {
		t.Errorf("the request's t0 is %v before its instant", at.Sub(resp.Start))
	}

	// An instant already past (a retry's) sends at once, through the same
	// wait, which returns at once.
	waited = nil
	past := time.Now().Add(-time.Second)
	resp = cl.DoPrepared(SendAt(context.Background(), past, wait), cl.Prepare(&Request{Messages: []Message{{Role: "user", Content: "again"}}, MaxTokens: 4}))
	if resp.Failed() || len(waited) != 1 || !waited[0].Equal(past) {
		t.Errorf("a past instant: failed %q, waits %v", resp.ErrorClass, waited)
	}
}
