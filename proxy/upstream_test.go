package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tokbench/tokbench/internal/fakellm"
	"github.com/tokbench/tokbench/metrics"
)

// TestProxyHTTPSUpstream: over an HTTPS upstream the proxy measures as
// over HTTP: TTFT at the server's first flush, tokens exact.
func TestProxyHTTPSUpstream(t *testing.T) {
	up := fakellm.NewTLS(fakellm.Script{TTFT: 15 * time.Millisecond, Gap: 20 * time.Millisecond, Tokens: 10, Usage: true})
	defer up.Close()
	pool := x509.NewCertPool()
	pool.AddCert(up.Certificate())
	base, records := proxiedWith(t, up.URL, func(c *Config) { c.TLS = &tls.Config{RootCAs: pool} })
	for range 3 {
		if st, body := chat(t, base, nil); st != 200 || !strings.Contains(body, "data: [DONE]") {
			t.Fatalf("status %d, body %q", st, body)
		}
	}
	streams := up.Streams()
	for i, r := range records() {
		off := streams[i].OffMs(sameRead(r.ChunkMs, 0), r.Start, r.TTFTMs)
		if !r.OK || r.OutputTokens != 10 || off > ttftTolMs {
			t.Errorf("record %d: ok %v, %d tokens, TTFT %.3f ms, %.3f ms from the server's sending", i, r.OK, r.OutputTokens, r.TTFTMs, off)
		}
		// HTTP/1.1 over TLS, as bench runs: the kernel's stamps hold.
		if ph := r.Phases; ph == nil || ph.TLS == "" || ph.HTTP != "HTTP/1.1" || !ph.KernelStamps || ph.Reused != (i > 0) {
			t.Errorf("record %d: phases %+v", i, ph)
		}
	}
}

// ollamaServer streams Ollama's NDJSON: n lines of one token each, gap
// apart after ttft, then the final line with eval_count, recording for
// each line the span it was on its way: from just before its write to
// the return of its flush (the proxy's stamp of it lies within, whatever
// held the server between its clock and its write).
func ollamaServer(t *testing.T, ttft, gap time.Duration, n int) (*httptest.Server, func() [][2]time.Time) {
	var mu sync.Mutex
	var flushes [][2]time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-ndjson")
		time.Sleep(ttft)
		for i := range n {
			before := time.Now()
			fmt.Fprintf(w, `{"model":"m","message":{"role":"assistant","content":"w%d "},"done":false}`+"\n", i)
			w.(http.Flusher).Flush()
			mu.Lock()
			flushes = append(flushes, [2]time.Time{before, time.Now()})
			mu.Unlock()
			time.Sleep(gap)
		}
		fmt.Fprintf(w, `{"model":"m","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","prompt_eval_count":4,"eval_count":%d}`+"\n", n)
	}))
	t.Cleanup(srv.Close)
	return srv, func() [][2]time.Time { mu.Lock(); defer mu.Unlock(); return append([][2]time.Time(nil), flushes...) }
}

// TestProxyNDJSONUpstream: an Ollama /api/chat stream (NDJSON, streamed
// unless told not to) is measured line by line: TTFT at the first line's
// flush, every gap, tokens from eval_count.
func TestProxyNDJSONUpstream(t *testing.T) {
	up, flushes := ollamaServer(t, 20*time.Millisecond, 20*time.Millisecond, 8) // no read takes two lines
	base, records := proxiedWith(t, up.URL, nil)
	resp, err := http.Post(base+"/api/chat", "application/json", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Count(string(body), "\n") != 9 || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("the client got %q (%s)", body, resp.Header.Get("Content-Type"))
	}
	recs := records()
	if len(recs) != 1 {
		t.Fatalf("%d records", len(recs))
	}
	r := recs[0]
	if !r.OK || r.API != "ollama-chat" || r.OutputTokens != 8 || r.TokenSource != metrics.SourceUsage || len(r.ChunkMs) != 8 {
		t.Fatalf("record %+v", r)
	}
	fl := flushes()
	if len(fl) != len(r.ChunkMs) {
		t.Fatalf("%d lines flushed, %d recorded", len(fl), len(r.ChunkMs))
	}
	for i := range fl {
		span := fl[sameRead(r.ChunkMs, i)]
		lo, hi := float64(span[0].Sub(r.Start))/1e6, float64(span[1].Sub(r.Start))/1e6
		if r.ChunkMs[i] < lo-ttftTolMs || r.ChunkMs[i] > hi+ttftTolMs {
			t.Errorf("line %d at %.3f ms, on its way from %.3f to %.3f", i, r.ChunkMs[i], lo, hi)
		}
	}
}

// TestProxySlowClientBackpressure: a client that stops reading holds the
// upstream back through the proxy — which buffers a few reads, not the
// stream — and its record says it was slow; once it reads again it gets
// the stream whole and the tokens are exact.
func TestProxySlowClientBackpressure(t *testing.T) {
	const events = 5000                  // 4 KiB each: 20 MiB, far past the kernel's socket buffers
	text := strings.Repeat("word ", 820) // 4,100 bytes
	var written atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for range events {
			if _, err := fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":%q}}]}\n\n", text); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			written.Add(1)
		}
		fmt.Fprintf(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":%d}}\n\ndata: [DONE]\n\n", events)
	}))
	defer up.Close()
	// The usage's tokens are spread over the chunks by their text's
	// count: a count of words, not tiktoken's of 20 MiB, which takes the
	// race detector half a minute.
	base, records := proxiedWith(t, up.URL, func(c *Config) { c.Tokenizer = words{} })
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetReadBuffer(32 << 10)
		}
		return c, err
	}}}
	resp, err := client.Post(base+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	// The client stops reading until the upstream stops writing (held
	// back through the proxy) for 200 ms, or has written everything.
	for last, still, deadline := written.Load(), 0, time.Now().Add(20*time.Second); still < 20 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		if n := written.Load(); n != last || n >= events {
			last, still = n, 0
			if n >= events {
				break
			}
		} else {
			still++
		}
	}
	if n := written.Load(); n >= events {
		t.Fatalf("the upstream wrote all %d events while the client read none: the proxy buffered the stream", n)
	} else {
		t.Logf("the client paused: the upstream had written %d of %d events (%.1f MiB)", n, events, float64(n)*4/1024)
	}
	rest, _ := io.ReadAll(br)
	if got := strings.Count(string(rest), "data: {\"choices\":[{") + 1; got != events || !strings.HasSuffix(string(rest), "data: [DONE]\n\n") {
		t.Fatalf("the client got %d events", got)
	}
	recs := records()
	if len(recs) != 1 {
		t.Fatalf("%d records, want 1", len(recs))
	}
	if !recs[0].OK || recs[0].OutputTokens != events || !recs[0].Proxy.SlowClient || recs[0].Proxy.MaxWriteMs < 50 {
		t.Fatalf("records %+v (proxy %+v)", recs, recs[0].Proxy)
	}
}

// TestProxyBoundsMeasuredStream: past MaxMeasured bytes the proxy stops
// decoding (the stream's record is overlong_stream) while the client
// still gets every byte.
func TestProxyBoundsMeasuredStream(t *testing.T) {
	up := fakellm.New(fakellm.Script{TTFT: time.Millisecond, Gap: time.Millisecond, Tokens: 200, Usage: true})
	defer up.Close()
	base, records := proxiedWith(t, up.URL, func(c *Config) { c.MaxMeasured = 8 << 10 })
	st, body := chat(t, base, nil)
	if st != 200 || !strings.HasSuffix(body, "data: [DONE]\n\n") || len(body) < 24<<10 {
		t.Fatalf("the client got %d bytes (status %d)", len(body), st)
	}
	recs := records()
	if len(recs) != 1 {
		t.Fatalf("%d records, want 1", len(recs))
	}
	if r := recs[0]; r.OK || r.ErrorClass != "overlong_stream" || len(r.ChunkMs) == 0 || len(r.ChunkMs) >= 200 {
		t.Fatalf("record: class %q, %d chunks", r.ErrorClass, len(r.ChunkMs))
	}
}

// words counts a text's tokens as its words, for tests whose texts are
// long and whose counts do not matter.
type words struct{}

func (words) Name() string             { return "words" }
func (words) Count(s string) int       { return len(strings.Fields(s)) }
func (words) Encode(s string) []uint   { return make([]uint, len(strings.Fields(s))) }
func (words) Decode(ids []uint) string { return strings.Repeat("w ", len(ids)) }
