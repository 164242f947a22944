package sim

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// absurdBodies are requests no client should send: parameters at the ends
// of their types, contradictions, shapes the simulator does not serve.
var absurdBodies = []string{
	`{"prompt":"a","max_tokens":9223372036854775807,"stream":true}`,
	`{"prompt":"a","max_tokens":9223372036854775807}`,
	`{"prompt":"a","max_tokens":-9223372036854775808}`,
	`{"prompt":"a","max_tokens":1e300}`,
	`{"prompt":"a","max_tokens":3,"min_tokens":9223372036854775807}`,
	`{"prompt":"a","max_tokens":3,"min_tokens":-1}`,
	`{"prompt":"a","n":1000000}`,
	`{"prompt":["a","b","c"]}`,
	`{"prompt":[]}`,
	`{"messages":[{"role":"user","content":"a"}],"max_completion_tokens":9223372036854775807,"stream":true}`,
	`{"prompt":"a","options":{"num_predict":9223372036854775807}}`,
	`{"prompt":"a","n_predict":9223372036854775807}`,
	`{"inputs":"a","parameters":{"max_new_tokens":9223372036854775807}}`,
	`{"prompt":"` + strings.Repeat("word ", 200_000) + `"}`,
}

// abuse opens idle and slow connections to the server at addr and sends
// rounds×len(absurdBodies) absurd requests; it returns the connections,
// which the caller closes.
func abuse(tb testing.TB, addr string, idle, slow, rounds int) []net.Conn {
	tb.Helper()
	var conns []net.Conn
	for range idle {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			tb.Fatal(err)
		}
		conns = append(conns, c)
	}
	for range slow {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			tb.Fatal(err)
		}
		_, err = io.WriteString(c, "POST /v1/completions HTTP/1.1\r\nHost: x\r\n"+
			"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"prompt\":")
		if err != nil {
			tb.Fatal(err)
		}
		conns = append(conns, c)
	}
	client := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	for range rounds {
		for _, body := range absurdBodies {
			resp, err := client.Post("http://"+addr+"/v1/completions", "application/json", strings.NewReader(body))
			if err != nil {
				tb.Fatalf("absurd request %.80s: %v", body, err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest {
				tb.Fatalf("absurd request %.80s: status %d, want 400", body, resp.StatusCode)
			}
		}
	}
	return conns
}

// normalRequests sends n requests of 4 output tokens one after another and
// returns their latencies; each must stream exactly its 4 tokens.
func normalRequests(tb testing.TB, base string, n int) []time.Duration {
	tb.Helper()
	client := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	var lat []time.Duration
	for range n {
		start := time.Now()
		resp, err := client.Post(base+"/completions", "application/json",
			strings.NewReader(`{"prompt":"hello","max_tokens":4,"stream":true}`))
		if err != nil {
			tb.Fatal(err)
		}
		events := 0
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), `data: {"id"`) {
				events++
			}
		}
		resp.Body.Close()
		lat = append(lat, time.Since(start))
		if resp.StatusCode != http.StatusOK || events != 4 {
			tb.Fatalf("normal request: status %d, %d token events, want 200 and 4", resp.StatusCode, events)
		}
	}
	return lat
}

// startServer starts a server (1 ms steps, 4,096-token context, then mod)
// on a loopback port; it returns the server, its base URL and address.
func startServer(tb testing.TB, mod func(*Config)) (*Server, string, string) {
	tb.Helper()
	cfg := DefaultConfig()
	cfg.Cost = fixedCost(time.Millisecond, 100_000)
	cfg.MaxModelLen = 4096
	if mod != nil {
		mod(&cfg)
	}
	s, err := NewServer(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	base, err := s.Start(tb.Context(), "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	return s, base, strings.TrimSuffix(strings.TrimPrefix(base, "http://"), "/v1")
}

// TestServesWhileAbused: with the connection cap and the in-flight limit
// both taken by idle and slow clients, and after absurd requests, normal
// requests are served in full and nothing is left in the engine.
func TestServesWhileAbused(t *testing.T) {
	s, base, addr := startServer(t, func(c *Config) {
		c.MaxConns = 64
		c.MaxInflight = 16
	})
	conns := abuse(t, addr, 60, 20, 2)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	lat := normalRequests(t, base, 20)
	if n := s.inflight.Load(); n != 0 {
		t.Errorf("%d requests in flight after the normal ones ended", n)
	}
	t.Logf("20 normal requests beside 60 idle and 20 slow connections (cap 64): max %v", slices.Max(lat))
}

// BenchmarkServeWhileAbused reports the latency of a normal request (4
// output tokens at 1 ms a step) while 5,000 idle and 200 slow connections
// are held, after 100+ absurd requests: p50_ms, p99_ms.
//
//	go test -run '^$' -bench ServeWhileAbused -benchtime 200x ./sim/
func BenchmarkServeWhileAbused(b *testing.B) {
	_, base, addr := startServer(b, nil)
	conns := abuse(b, addr, 5000, 200, 8)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	b.ResetTimer()
	lat := normalRequests(b, base, b.N)
	b.StopTimer()
	slices.Sort(lat)
	q := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))]) / float64(time.Millisecond)
	}
	b.ReportMetric(q(0.50), "p50_ms")
	b.ReportMetric(q(0.99), "p99_ms")
	b.ReportMetric(0, "ns/op")
}
