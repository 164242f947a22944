package cli

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokbench/tokbench/internal/fakellm"
	"github.com/tokbench/tokbench/metrics"
)

func TestBenchTLSFlags(t *testing.T) {
	srv := fakellm.NewTLS(fakellm.Script{TTFT: time.Millisecond, Gap: time.Millisecond, Tokens: 3, Usage: true})
	defer srv.Close()
	base := []string{"bench", "--url", srv.URL, "--model", "m", "--concurrency", "1", "--requests", "2", "--warmup", "0", "--format", "json"}
	summary := func(args ...string) metrics.Summary {
		t.Helper()
		code, stdout, stderr := runCLI(context.Background(), nil, append(base, args...)...)
		var s metrics.Summary
		if err := json.Unmarshal([]byte(stdout), &s); err != nil {
			t.Fatalf("%v: exit %d, %s", args, code, stderr)
		}
		return s
	}
	if s := summary(); s.Levels[0].Requests.Errors["tls"] != 2 {
		t.Errorf("untrusted certificate: errors %v, want tls ×2", s.Levels[0].Requests.Errors)
	}
	if s := summary("--insecure"); s.Levels[0].Requests.Completed != 2 {
		t.Errorf("--insecure: %+v", s.Levels[0].Requests)
	}
	ca := filepath.Join(t.TempDir(), "ca.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(ca, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	if s := summary("--ca-cert", ca); s.Levels[0].Requests.Completed != 2 {
		t.Errorf("--ca-cert: %+v", s.Levels[0].Requests)
	}
	empty := filepath.Join(t.TempDir(), "empty.pem")
	os.WriteFile(empty, []byte("not a certificate"), 0o600)
	if code, _, stderr := runCLI(context.Background(), nil, append(base, "--ca-cert", empty)...); code != ExitUsage || !strings.Contains(stderr, "--ca-cert") {
		t.Errorf("bad --ca-cert: exit %d %q", code, stderr)
	}
}

func TestBenchAPIKeyFile(t *testing.T) {
	const key = "sk-from-a-file-4242"
	srv := fakellm.New(fakellm.Script{TTFT: time.Millisecond, Gap: time.Millisecond, Tokens: 3})
	defer srv.Close()
	dir := t.TempDir()
	file := filepath.Join(dir, "key")
	os.WriteFile(file, []byte(key+"\n"), 0o600)
	out := filepath.Join(dir, "run")
	code, stdout, stderr := runCLI(context.Background(), map[string]string{"OPENAI_API_KEY": "sk-env-key-should-lose"},
		"bench", "--url", srv.URL, "--model", "m", "--api-key-file", file, "--concurrency", "1", "--requests", "1", "--warmup", "0", "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if got := srv.LastHeader("Authorization"); got != "Bearer "+key {
		t.Errorf("Authorization = %q", got)
	}
	all := stdout + stderr
	for _, f := range []string{"run.json", "requests.jsonl", "summary.json", "report.html"} {
		b, _ := os.ReadFile(filepath.Join(out, f))
		all += string(b)
	}
	if strings.Contains(all, key) {
		t.Error("the key from --api-key-file reached a file or the output")
	}
	if code, _, stderr := runCLI(context.Background(), nil, "bench", "--url", srv.URL, "--api-key-file", filepath.Join(dir, "missing")); code != ExitUsage || !strings.Contains(stderr, "--api-key-file") {
		t.Errorf("missing key file: exit %d %q", code, stderr)
	}
}

func TestBenchRetryAndMaxErrorRateFlags(t *testing.T) {
	srv := fakellm.New(fakellm.Script{TTFT: time.Millisecond, Gap: time.Millisecond, Tokens: 3, Usage: true,
		Fault: func(n int) fakellm.Fault {
			if n%2 == 0 {
				return fakellm.Fault{Status: 429, RetryAfter: "0"}
			}
			return fakellm.Fault{}
		}})
	defer srv.Close()
	code, stdout, stderr := runCLI(context.Background(), nil, "bench", "--url", srv.URL, "--model", "m",
		"--concurrency", "1", "--requests", "4", "--warmup", "0", "--retry", "1", "--format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var s metrics.Summary
	json.Unmarshal([]byte(stdout), &s)
	// Every first attempt is shed, every retry succeeds: 4 requests, 4 retries.
	if lv := s.Levels[0]; lv.Requests.Sent != 4 || lv.Requests.Completed != 4 || lv.Retries != 4 {
		t.Errorf("requests %+v retries %d", lv.Requests, lv.Retries)
	}
	bad := fakellm.New(fakellm.Script{Tokens: 2, Fault: func(int) fakellm.Fault { return fakellm.Fault{Status: 500} }})
	defer bad.Close()
	code, stdout, _ = runCLI(context.Background(), nil, "bench", "--url", bad.URL, "--model", "m",
		"--concurrency", "1", "--requests", "500", "--warmup", "0", "--max-error-rate", "0.2")
	if code != ExitFailure || !strings.Contains(stdout, "aborted: error rate 100%") {
		t.Errorf("exit %d, stdout %q", code, stdout)
	}
	for _, args := range [][]string{{"--retry", "-1"}, {"--max-error-rate", "2"}} {
		if code, _, stderr := runCLI(context.Background(), nil, append([]string{"bench", "--url", srv.URL}, args...)...); code != ExitUsage || !strings.Contains(stderr, args[0]) {
			t.Errorf("%v: exit %d %q", args, code, stderr)
		}
	}
}

func TestBenchMetricsAddr(t *testing.T) {
	srv := fakellm.New(fakellm.Script{TTFT: 2 * time.Millisecond, Gap: 2 * time.Millisecond, Tokens: 5, Usage: true})
	defer srv.Close()
	// Scrape while the run goes: the run's stderr names the address.
	var stderr syncBuffer
	done := make(chan int)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		done <- Run(ctx, []string{"bench", "--url", srv.URL, "--model", "m", "--concurrency", "2", "--duration", "30s",
			"--input-tokens", "16", "--warmup", "0", "--grace", "10ms", "--metrics-addr", "127.0.0.1:0"}, Env{Stdout: io.Discard, Stderr: &stderr})
	}()
	var url string
	for i := 0; i < 200 && url == ""; i++ {
		time.Sleep(10 * time.Millisecond)
		if _, rest, ok := strings.Cut(stderr.String(), "live metrics at "); ok {
			url = strings.TrimSpace(strings.SplitN(rest, "\n", 2)[0])
		}
	}
	if url == "" {
		t.Fatalf("no metrics address announced: %q", stderr.String())
	}
	var text string
	for i := 0; i < 100; i++ {
		resp, err := http.Get(url)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			text = string(b)
			if strings.Contains(text, `outcome="ok"`) {
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done
	for _, want := range []string{`outcome="ok"`, "tokbench_in_flight_requests", `tokbench_level{load="c=2"} 1`, "tokbench_ttft_seconds_bucket"} {
		if !strings.Contains(text, want) {
			t.Errorf("live metrics lack %q", want)
		}
	}
	if code, _, stderr := runCLI(context.Background(), nil, "bench", "--url", srv.URL, "--model", "m", "--metrics-addr", "256.0.0.1:1"); code != ExitUsage || !strings.Contains(stderr, "--metrics-addr") {
		t.Errorf("bad --metrics-addr: exit %d %q", code, stderr)
	}
}

// syncBuffer is a strings.Builder safe for one writer and one reader.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
