package proxy

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestProxyBodiesBudget: eight clients send 3 MiB bodies at once through
// a proxy whose bodies may hold 20 MiB together. Three fit (18 MiB: each
// twice, the proxy's and the transport's copy) and go upstream whole, where the upstream holds them until it has all three;
// the other five are answered 503 with Retry-After before their bytes are
// read. The proxy's heap while it holds the three grew by no more than
// its budget; once they end, the budget is empty and the memory goes
// back: the heap is within 4 MiB of where it started (one body held past
// its request would pass that).
func TestProxyBodiesBudget(t *testing.T) {
	const (
		clients = 8
		size    = 3 << 20
		budget  = 20 << 20
		fit     = budget / (2 * size) // 3: each held twice, the transport's copy too
	)
	content := bytes.Repeat([]byte("x"), size-64)
	body := append(append([]byte(`{"model":"m","stream":true,"messages":[{"role":"user","content":"`), content...), `"}]}`...)
	var mu sync.Mutex
	arrived, grew := 0, uint64(0)
	all := make(chan struct{})
	var baseline runtime.MemStats
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		if n != int64(len(body)) {
			t.Errorf("the upstream got %d bytes of a %d-byte body", n, len(body))
		}
		mu.Lock()
		if arrived++; arrived == fit {
			// Every body the budget lets in is held now: what is live.
			runtime.GC()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			grew = m.HeapAlloc - min(m.HeapAlloc, baseline.HeapAlloc)
			close(all)
		}
		mu.Unlock()
		select {
		case <-all:
		case <-time.After(10 * time.Second):
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
	}))
	defer up.Close()
	px, base, records := startProxy(t, up.URL, func(c *Config) { c.MaxBody, c.MaxBodies = 4<<20, budget })
	runtime.GC()
	runtime.ReadMemStats(&baseline)

	var ok, refused atomic.Int64
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			resp, err := http.Post(base+"/v1/chat/completions", "application/json", bytes.NewReader(body))
			if err != nil {
				t.Errorf("post: %v", err)
				return
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			switch {
			case resp.StatusCode == 200 && strings.HasSuffix(string(got), "[DONE]\n\n"):
				ok.Add(1)
			case resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") != "" &&
				strings.Contains(string(got), "budget of 20 MiB"):
				refused.Add(1)
			default:
				t.Errorf("status %d %q", resp.StatusCode, got)
			}
		})
	}
	wg.Wait()
	if ok.Load() != fit || refused.Load() != clients-fit {
		t.Fatalf("%d answered, %d refused; want %d and %d", ok.Load(), refused.Load(), fit, clients-fit)
	}
	if recs := records(); len(recs) != fit {
		t.Errorf("%d records, want %d", len(recs), fit)
	}
	if peak := px.bodies.peak.Load(); peak != 2*fit*int64(len(body)) {
		t.Errorf("the bodies reserved %d bytes at most, want %d (%d bodies of %d, twice)", peak, 2*fit*len(body), fit, len(body))
	}
	if grew > budget {
		t.Errorf("the heap grew by %.1f MiB while the bodies were held, past their budget of %d MiB", float64(grew)/(1<<20), budget>>20)
	}
	// The budget empties as the handlers end; then the memory is returned.
	deadline := time.Now().Add(10 * time.Second)
	for (px.bodies.used.Load() != 0 || px.bodies.returned.Load() == 0 || px.bodies.freeing.Load()) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if used, n := px.bodies.used.Load(), px.bodies.returned.Load(); used != 0 || n == 0 {
		t.Fatalf("after the requests the bodies hold %d bytes, memory returned %d times", used, n)
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if d := int64(after.HeapAlloc) - int64(baseline.HeapAlloc); d > 4<<20 {
		t.Errorf("the heap is %.1f MiB above where it started once the bodies were given back (peak growth %.1f MiB)", float64(d)/(1<<20), float64(grew)/(1<<20))
	}
	t.Logf("heap grew %.1f MiB holding %d bodies of %.1f MiB; %+.1f MiB after", float64(grew)/(1<<20), fit, float64(len(body))/(1<<20),
		float64(int64(after.HeapAlloc)-int64(baseline.HeapAlloc))/(1<<20))
}

// TestProxyStreamsHoldNoBody: a request's body leaves the budget, and
// memory, once it has gone upstream, not when its answer ends. Six
// clients send 3 MiB bodies, one after another, through a proxy whose
// bodies may hold 20 MiB (three at once, each counted twice); each answer
// starts and then stays open until the test ends it: completions
// (measured, on tokbench's transport) and uploads (passed, on net/http's).
// Held for their streams, the bodies would have the fourth answered 503;
// given back, each stream is open while the budget holds nothing, all six
// are streaming at once, the memory has gone back to the system, and the
// heap holds less than one body more than before them.
func TestProxyStreamsHoldNoBody(t *testing.T) {
	const (
		streams = 6
		size    = 3 << 20
		budget  = 20 << 20
	)
	content := bytes.Repeat([]byte("x"), size-64)
	body := append(append([]byte(`{"model":"m","stream":true,"messages":[{"role":"user","content":"`), content...), `"}]}`...)
	end := make(chan struct{})
	var ending sync.Once
	stop := func() { ending.Do(func() { close(end) }) }
	defer stop() // a failure ends the streams too
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		if n != int64(len(body)) {
			t.Errorf("the upstream got %d bytes of a %d-byte body", n, len(body))
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"content":"a"}}]}`+"\n\n")
		w.(http.Flusher).Flush()
		select { // the stream goes on until the test ends it
		case <-end:
		case <-time.After(20 * time.Second):
		}
		io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"content":"b"},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
	}))
	defer up.Close()
	px, base, records := startProxy(t, up.URL, func(c *Config) { c.MaxBody, c.MaxBodies = 4<<20, budget })
	var baseline runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&baseline)

	var open []*http.Response
	defer func() {
		for _, resp := range open {
			resp.Body.Close()
		}
	}()
	for i := range streams {
		path := "/v1/chat/completions"
		if i%2 == 1 {
			path = "/v1/uploads" // not measured: net/http's transport carries it
		}
		resp, err := http.Post(base+path, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
		open = append(open, resp)
		first, err := bufio.NewReader(resp.Body).ReadString('\n')
		if resp.StatusCode != 200 || err != nil || !strings.HasPrefix(first, "data: ") {
			got, _ := io.ReadAll(resp.Body)
			t.Fatalf("stream %d (%s): %d %q %q (%v), want its stream begun; the budget holds %d bytes", i, path, resp.StatusCode, first, got, err, px.bodies.used.Load())
		}
		// Its stream open, its body is given back (net/http's transport
		// closes a body it sent a moment after the answer has begun).
		for deadline := time.Now().Add(10 * time.Second); px.bodies.used.Load() != 0 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		if used := px.bodies.used.Load(); used != 0 {
			t.Fatalf("stream %d (%s) is open and the bodies hold %d bytes, want none", i, path, used)
		}
	}
	// All six are streaming. Their bodies were given back as each was
	// sent, and the memory returned a moment after (returnAfter).
	deadline := time.Now().Add(10 * time.Second)
	for (px.bodies.used.Load() != 0 || px.bodies.returned.Load() == 0 || px.bodies.freeing.Load()) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if used, n := px.bodies.used.Load(), px.bodies.returned.Load(); used != 0 || n == 0 {
		t.Fatalf("with %d streams open the bodies hold %d bytes, memory returned %d times; want none held, returned", streams, used, n)
	}
	if peak := px.bodies.peak.Load(); peak > 2*int64(len(body)) {
		t.Errorf("the bodies reserved %d bytes at most, want one body's (twice: %d)", peak, 2*len(body))
	}
	runtime.GC()
	var during runtime.MemStats
	runtime.ReadMemStats(&during)
	grew := int64(during.HeapAlloc) - int64(baseline.HeapAlloc)
	if grew > size {
		t.Errorf("with %d streams open the heap is %.1f MiB above where it started, more than one body of %.1f MiB", streams, float64(grew)/(1<<20), float64(size)/(1<<20))
	}
	stop()
	for i, resp := range open {
		rest, _ := io.ReadAll(resp.Body)
		if !strings.HasSuffix(string(rest), "data: [DONE]\n\n") {
			t.Errorf("stream %d ended %q", i, rest)
		}
	}
	if recs := records(); len(recs) != streams/2 {
		t.Errorf("%d records, want %d (the completions)", len(recs), streams/2)
	} else {
		for _, r := range recs {
			if !r.OK {
				t.Errorf("a completion's record: %s %s", r.ErrorClass, r.Error)
			}
		}
	}
	t.Logf("heap %+.1f MiB with %d streams of %.1f MiB bodies open", float64(grew)/(1<<20), streams, float64(len(body))/(1<<20))
}
