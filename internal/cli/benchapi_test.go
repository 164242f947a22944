package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokbench/tokbench/api"
	"github.com/tokbench/tokbench/internal/fakellm"
	"github.com/tokbench/tokbench/results"
)

// fakeOllama answers like Ollama: version, tags, show and /api/chat with
// the adapter's fixture; it records the API key header it saw.
func fakeOllama(t *testing.T) (*httptest.Server, func() string) {
	chat, err := os.ReadFile("../../api/testdata/ollama-chat.ndjson")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var auth string
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/version", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(`{"version":"0.12.3"}`)) })
	mux.HandleFunc("GET /api/tags", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte(`{"models":[{"name":"llama3.2:1b"}]}`))
	})
	mux.HandleFunc("POST /api/show", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte(`{"details":{"family":"llama","parameter_size":"1.2B","quantization_level":"Q8_0"},"model_info":{"llama.context_length":131072}}`))
	})
	mux.HandleFunc("POST /api/chat", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = r.Header.Get("Authorization")
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.Write(chat)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, func() string { mu.Lock(); defer mu.Unlock(); return auth }
}

func TestBenchAPIAuto(t *testing.T) {
	srv, auth := fakeOllama(t)
	dir := filepath.Join(t.TempDir(), "run")
	code, stdout, stderr := runCLI(context.Background(), map[string]string{"OPENAI_API_KEY": "sk-auto-key-123456"},
		"bench", "--api", "auto", "--url", srv.URL, "--concurrency", "1", "--requests", "2", "--warmup", "0", "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, "speaks ollama-chat (ollama 0.12.3)") {
		t.Errorf("stderr %q does not say what was detected", stderr)
	}
	if auth() != "Bearer sk-auto-key-123456" {
		t.Errorf("Authorization %q", auth())
	}
	// The fixture's server timing: load 5 + prefill 25 ms, 8 tokens in 70 ms.
	if !strings.Contains(stdout, "server-reported TTFT p50 30.00 ms (load+prefill), decode p50 114.3 tok/s") {
		t.Errorf("table lacks the server line:\n%s", stdout)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	var run results.Run
	if err := json.Unmarshal(raw, &run); err != nil {
		t.Fatal(err)
	}
	m := run.Meta
	if run.Target.API != "ollama-chat" || run.Target.Model != "llama3.2:1b" || m["server_engine"] != "ollama" || m["server_version"] != "0.12.3" ||
		m["model_parameter_size"] != "1.2B" || m["model_quantization"] != "Q8_0" || m["model_context_length"] != "131072" || m["server_max_context"] != "131072" {
		t.Errorf("run.json target %+v meta %v", run.Target, m)
	}
	if strings.Contains(string(raw), "sk-auto-key") {
		t.Error("run.json holds the API key")
	}
}

func TestBenchAPIAutoNothing(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	code, _, stderr := runCLI(context.Background(), nil, "bench", "--api", "auto", "--url", srv.URL+"/v1", "--requests", "1")
	if code != ExitUsage || strings.Count(strings.TrimSpace(stderr), "\n") != 0 ||
		!strings.Contains(stderr, "--api: auto: ") || !strings.Contains(stderr, "GET /props: HTTP 404") || !strings.Contains(stderr, "GET /health: HTTP 404") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}

// TestIgnoreEOSSaysWhatAnAPICannotDo: --ignore-eos against an API without
// the option (Ollama's native one) is not sent, and the run says so; the
// OpenAI-style API sends it.
func TestIgnoreEOSSaysWhatAnAPICannotDo(t *testing.T) {
	if ollama, openai := api.SendsIgnoreEOS(api.Ollama{Chat: true}), api.SendsIgnoreEOS(api.OpenAI{Chat: true}); ollama || !openai {
		t.Fatalf("SendsIgnoreEOS: ollama %v, openai %v", ollama, openai)
	}
	srv := fakellm.New(fakellm.Script{TTFT: time.Millisecond, Gap: time.Millisecond, Tokens: 2, Usage: true})
	defer srv.Close()
	code, stdout, stderr := runCLI(context.Background(), nil, "bench", "--url", srv.URL, "--api", "ollama-chat", "--model", "m",
		"--concurrency", "1", "--requests", "1", "--warmup", "0", "--ignore-eos", "--format", "json")
	if !strings.Contains(stderr, "--ignore-eos: the ollama-chat API has no way to generate past the end of sequence") {
		t.Errorf("exit %d; stderr lacks the notice:\n%s", code, stderr)
	}
	if !strings.Contains(stdout, "--ignore-eos: the ollama-chat API") {
		t.Errorf("the summary's warnings lack the notice:\n%s", stdout)
	}
}
