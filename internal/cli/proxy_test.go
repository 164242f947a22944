package cli

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestProxyFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"proxy"}, "--upstream"},
		{[]string{"proxy", "--upstream", "localhost:8000"}, "--upstream"},
		{[]string{"proxy", "--upstream", "http://127.0.0.1:1/v1", "--summary-every", "10ms"}, "--summary-every"},
		{[]string{"proxy", "--upstream", "http://127.0.0.1:1/v1", "--tokenizer", "nope"}, "--tokenizer"},
		{[]string{"proxy", "--upstream", "http://127.0.0.1:1/v1", "--listen", "256.0.0.1:1"}, "--listen"},
		{[]string{"proxy", "--upstream", "http://127.0.0.1:1/v1", "--rotate-size", "lots"}, "--rotate-size"},
		{[]string{"proxy", "--upstream", "http://127.0.0.1:1/v1", "--ca-cert", "/nonexistent.pem"}, "--ca-cert"},
		{[]string{"proxy", "--upstream", "http://127.0.0.1:1/v1", "--rotate-size", "0"}, "--rotate-size"},
		{[]string{"proxy", "--upstream", "http://127.0.0.1:1/v1", "--body-budget", "lots"}, "--body-budget"},
		{[]string{"proxy", "--upstream", "http://127.0.0.1:1/v1", "--body-budget", "64MiB"}, "--body-budget"},
		{[]string{"proxy", "--upstream", "http://127.0.0.1:1/v1", "--rotate-every", "-1h"}, "--rotate-every"},
		{[]string{"proxy", "--upstream", "http://127.0.0.1:1/v1", "--rotate-every", "1h"}, "--rotate-size and --rotate-every"},
	} {
		code, _, stderr := runCLI(context.Background(), nil, c.args...)
		if code != ExitUsage || !strings.HasPrefix(stderr, "tokbench: "+c.flag) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%v: exit %d, %q", c.args, code, stderr)
		}
	}
}

// TestProxyAllFailedSaysNoTTFT: a proxy whose every request failed (its
// upstream refuses connections) ends saying it measured no TTFT, not
// "TTFT p50 0.000 ms".
func TestProxyAllFailedSaysNoTTFT(t *testing.T) {
	addr := closedAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	type result struct {
		code   int
		stderr string
	}
	done := make(chan result, 1)
	go func() {
		code, _, stderr := runCLI(ctx, nil, "proxy", "--upstream", "http://127.0.0.1:1/v1", "--listen", addr, "--grace", "1s")
		done <- result{code, stderr}
	}()
	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	var (
		resp *http.Response
		err  error
	)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if resp, err = http.Post("http://"+addr+"/v1/chat/completions", "application/json", strings.NewReader(body)); err == nil {
			break
		}
	}
	if err != nil {
		cancel()
		t.Fatalf("the proxy never answered: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	cancel()
	r := <-done
	if !strings.Contains(r.stderr, "(1 failed), no TTFT (no request completed)") || strings.Contains(r.stderr, "TTFT p50") {
		t.Errorf("exit %d, stderr:\n%s\nwant the one failed request and no TTFT", r.code, r.stderr)
	}
}

// TestProxyEmbeddingsLine: a proxy that carried only embeddings calls
// ends with their figures, not "no TTFT".
func TestProxyEmbeddingsLine(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `[[0.1,0.2],[0.3,0.4]]`)
	}))
	defer up.Close()
	addr := closedAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	type result struct {
		code   int
		stderr string
	}
	done := make(chan result, 1)
	go func() {
		code, _, stderr := runCLI(ctx, nil, "proxy", "--upstream", up.URL, "--listen", addr, "--grace", "1s")
		done <- result{code, stderr}
	}()
	sent := 0
	for deadline := time.Now().Add(10 * time.Second); sent < 2 && time.Now().Before(deadline); {
		resp, err := http.Post("http://"+addr+"/embed", "application/json", strings.NewReader(`{"inputs":["a b","c"]}`))
		if err != nil {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		sent++
	}
	cancel()
	r := <-done
	if sent != 2 || !strings.Contains(r.stderr, "measured 2 requests (0 failed), embeddings: 2 requests (4 inputs), latency p50 ") || strings.Contains(r.stderr, "TTFT") {
		t.Errorf("exit %d, %d sent, stderr:\n%s\nwant the two embeddings calls' figures and no TTFT", r.code, sent, r.stderr)
	}
}
