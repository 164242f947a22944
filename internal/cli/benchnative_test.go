package cli

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokbench/tokbench/internal/busy"
	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/results"
)

// TestBenchEmbeddedEveryProtocol runs bench against the embedded simulator
// in each protocol it speaks: every request completes with the exact output
// length asked for (from the protocol's usage), and Ollama and llama.cpp
// carry the simulator's own timing beside the client's.
func TestBenchEmbeddedEveryProtocol(t *testing.T) {
	for _, name := range []string{"openai-chat", "openai-completions", "anthropic", "ollama", "ollama-generate", "llamacpp", "tgi"} {
		t.Run(name, func(t *testing.T) {
			watch := busy.Start()
			code, stdout, stderr := runCLI(context.Background(), map[string]string{"ANTHROPIC_API_KEY": "sk-ant-sim-123456"},
				"bench", "--api", name, "--concurrency", "2", "--requests", "4", "--warmup", "0",
				"--output-tokens", "16", "--ignore-eos", "--format", "json")
			lag := watch.Stop()
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			var s metrics.Summary
			if err := json.Unmarshal([]byte(stdout), &s); err != nil {
				t.Fatalf("%v: %s", err, stdout)
			}
			lv := s.Levels[0]
			if s.Target.API == "" || lv.Requests.Completed != 4 || lv.OutputTokens != 64 || lv.TokenSource != metrics.SourceUsage || lv.DecodeTPS.Count != 4 {
				t.Fatalf("api %s: %+v, %d tokens (%s), decode count %d", s.Target.API, lv.Requests, lv.OutputTokens, lv.TokenSource, lv.DecodeTPS.Count)
			}
			if (lv.ClientMinusServer != nil) != (name == "ollama" || name == "ollama-generate" || name == "llamacpp") {
				t.Errorf("client_minus_server = %+v", lv.ClientMinusServer)
			}
			if name == "llamacpp" && (lv.ServerPrefillMs == nil || lv.ServerPrefillMs.Count != 4 || lv.ServerPrefillMs.Min <= 0) {
				t.Errorf("llama.cpp server prefill %+v, want 4 positive values", lv.ServerPrefillMs)
			}
			if g := lv.ClientMinusServer; g != nil {
				// The client reads what the server wrote a moment later: its
				// TTFT is at least the server's, always, and later by under
				// 50 ms on loopback when the machine let the process run.
				if g.TTFTMs == nil || g.TTFTMs.Min < 0 {
					t.Fatalf("client − server TTFT %+v, want the client's at least the server's", g.TTFTMs)
				}
				if g.TTFTMs.P50 > 50 && lag.Judge(t, "the client's TTFT over the server's") {
					t.Errorf("client − server TTFT p50 %.1f ms, want under 50 on loopback", g.TTFTMs.P50)
				}
			}
		})
	}
}

// --api auto against the embedded simulator: it answers llama.cpp's /props
// and TGI's /info too, but names itself there, and is spoken to as the
// OpenAI-compatible server it is first.
func TestBenchEmbeddedAPIAuto(t *testing.T) {
	code, stdout, stderr := runCLI(context.Background(), nil,
		"bench", "--api", "auto", "--concurrency", "1", "--requests", "2", "--warmup", "0", "--output-tokens", "8", "--format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var s metrics.Summary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	if !strings.Contains(stderr, "speaks openai-chat (tokbench-sim)") || s.Target.API != "openai-chat" || s.Levels[0].OutputTokens != 16 {
		t.Errorf("api %s, %d tokens; stderr %q", s.Target.API, s.Levels[0].OutputTokens, stderr)
	}
	// Finding the simulator turns --server-metrics on.
	if sm := s.Levels[0].ServerMetrics; sm == nil || sm.Requests != 2 {
		t.Errorf("server_metrics %+v, want 2 requests", sm)
	}
}

// --server-metrics against the embedded simulator: the server's histograms
// count the level's requests and not its warm-up, its mean TTFT is the
// client's less what the network and client added (under 50 ms on
// loopback), its TPOT the client's to within scheduling jitter, and the
// table says so in one line.
func TestBenchServerMetrics(t *testing.T) {
	dir := t.TempDir()
	watch := busy.Start()
	code, stdout, stderr := runCLI(context.Background(), nil,
		"bench", "--server-metrics", "--concurrency", "2", "--requests", "6", "--warmup", "2",
		"--output-tokens", "16", "--ignore-eos", "--out", dir)
	lag := watch.Stop()
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s metrics.Summary
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	lv := s.Levels[0]
	sm := lv.ServerMetrics
	if sm == nil || sm.Requests != 6 || sm.TTFTMsMean <= 0 || sm.TPOTMsMean <= 0 || sm.E2EMsMean <= 0 || sm.ClientMinus == nil {
		t.Fatalf("server_metrics %+v", sm)
	}
	g := sm.ClientMinus
	// The server stamps its own instants in this process: one kept off
	// the cores between its write and its stamp moves them past the
	// client's.
	if lag.Judge(t, "client − server means") && (g.TTFTMs < 0 || g.TTFTMs > 50 || g.E2EMs < 0 || g.E2EMs > 50 || math.Abs(g.TPOTMs) > 2) {
		t.Errorf("client − server means %+v (client TTFT %.3f, TPOT %.3f, E2E %.3f ms; server %+v)", g, lv.TTFT.Mean, lv.TPOT.Mean, lv.E2E.Mean, sm)
	}
	if math.Abs(lv.TTFT.Mean-sm.TTFTMsMean-g.TTFTMs) > 1e-9 {
		t.Errorf("TTFT gap %v is not client %v − server %v", g.TTFTMs, lv.TTFT.Mean, sm.TTFTMsMean)
	}
	if !strings.Contains(stdout, "c=2: server /metrics mean TTFT ") || !strings.Contains(stdout, "over 6 requests; client − server mean: TTFT +") {
		t.Errorf("table lacks the server /metrics line:\n%s", stdout)
	}
}

// Without --model bench reads the model list; vLLM's max_model_len goes to
// run.json meta whatever --api says.
func TestBenchRecordsMaxModelLen(t *testing.T) {
	chat, err := os.ReadFile("../../api/testdata/llamacpp-openai-chat-usage.sse")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte(`{"object":"list","data":[{"id":"org/m-8b","object":"model","owned_by":"vllm","max_model_len":12288}]}`))
	})
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(chat)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	dir := filepath.Join(t.TempDir(), "run")
	code, _, stderr := runCLI(context.Background(), nil,
		"bench", "--url", srv.URL+"/v1", "--concurrency", "1", "--requests", "1", "--warmup", "0", "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	var run results.Run
	if err := json.Unmarshal(raw, &run); err != nil {
		t.Fatal(err)
	}
	if run.Target.Model != "org/m-8b" || run.Meta["server_max_context"] != "12288" || run.Meta["model_context_length"] != "12288" {
		t.Errorf("run.json model %q, meta %v, want server_max_context and model_context_length 12288", run.Target.Model, run.Meta)
	}
}

// TestServerMetricsWarmupSpreadsTheLevel: with --server-metrics the
// warm-up runs apart from the level (so the server's counters hold the
// level alone); its duration must still spread the first level's users,
// or they start together and their prefills collide (a real llama.cpp
// under --api auto reported 4× its TTFT that way).
func TestServerMetricsWarmupSpreadsTheLevel(t *testing.T) {
	code, stdout, stderr := runCLI(context.Background(), nil,
		"bench", "--server-metrics", "--concurrency", "4", "--requests", "8", "--output-tokens", "16", "--format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var s metrics.Summary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	lv := s.Levels[0]
	if lv.Lockstep || !(lv.StartSpreadMs > 0) {
		t.Fatalf("lockstep %v, start spread %g ms: the warm-up's duration did not spread the level", lv.Lockstep, lv.StartSpreadMs)
	}
	if sm := lv.ServerMetrics; sm == nil || sm.Requests != 8 {
		t.Fatalf("server metrics %+v, want the level's 8 requests alone", sm)
	}
}
