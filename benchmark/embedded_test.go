package benchmark

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tokbench/tokbench/internal/busy"
	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/results"
	"github.com/tokbench/tokbench/workload"
)

// simPlan is DefaultPlan against the embedded simulator: c users sending
// n requests each asking for out tokens, no warm-up.
func simPlan(c, n, out int) *Plan {
	p := DefaultPlan()
	p.Load.Concurrency, p.Load.Requests, p.Load.Warmup = []int{c}, n, 0
	p.Workload.Output = workload.Fixed(out)
	return p
}

// TestRunEmbeddedEveryProtocol runs the embedded simulator in each
// protocol it speaks: every request completes with the exact output
// length asked for (from the protocol's usage), and Ollama and llama.cpp
// carry the simulator's own timing beside the client's.
func TestRunEmbeddedEveryProtocol(t *testing.T) {
	for _, name := range []string{"openai-chat", "openai-completions", "anthropic", "ollama", "ollama-generate", "llamacpp", "tgi"} {
		t.Run(name, func(t *testing.T) {
			p := simPlan(2, 4, 16)
			p.API, p.IgnoreEOS = name, true
			if name == "anthropic" {
				p.APIKey = "sk-ant-sim-123456"
			}
			watch := busy.Start()
			s := runPlan(t, p, "")
			lag := watch.Stop()
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
				// TTFT is at least the server's, and later by under 50 ms on
				// loopback when the machine let the process run. The
				// simulator times a request from its engine's clock, which
				// falls behind the wall clock while the process is held (by
				// up to 50 ms before it resyncs): its prompt time can exceed
				// the client's TTFT by as long as the process was held, which
				// the watch measured (its longest late wake-up, and the time
				// the threads waited for a core or were stolen, summed).
				held := min(max(lag.MaxMs, lag.WaitMs+lag.StealMs), 50)
				if g.TTFTMs == nil || g.TTFTMs.Min < -held {
					t.Fatalf("client − server TTFT %+v, want the client's at least the server's less the %.2f ms the process was held (%v)", g.TTFTMs, held, lag)
				}
				if g.TTFTMs.P50 > 50 && lag.Judge(t, "the client's TTFT over the server's") {
					t.Errorf("client − server TTFT p50 %.1f ms, want under 50 on loopback", g.TTFTMs.P50)
				}
			}
		})
	}
}

// TestRunEmbeddedAPIAuto: API auto against the embedded simulator, which
// answers llama.cpp's /props and TGI's /info too but names itself there,
// speaks to it as the OpenAI-compatible server it is first, says so, and
// turns the server's /metrics on.
func TestRunEmbeddedAPIAuto(t *testing.T) {
	p := simPlan(1, 2, 8)
	p.API = "auto"
	var mu sync.Mutex
	var notices []string
	res, err := Run(t.Context(), p, Hooks{Notice: func(s string) { mu.Lock(); notices = append(notices, s); mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	s := res.Summary
	said := strings.Join(notices, "\n")
	if !strings.Contains(said, "speaks openai-chat (tokbench-sim)") || s.Target.API != "openai-chat" || s.Levels[0].OutputTokens != 16 {
		t.Errorf("api %s, %d tokens; notices %q", s.Target.API, s.Levels[0].OutputTokens, said)
	}
	if sm := s.Levels[0].ServerMetrics; sm == nil || sm.Requests != 2 {
		t.Errorf("server_metrics %+v, want 2 requests", sm)
	}
}

// TestRunRecordsMaxModelLen: without a model the run reads the model list;
// vLLM's max_model_len goes to run.json's meta whatever the API.
func TestRunRecordsMaxModelLen(t *testing.T) {
	chat, err := os.ReadFile("../api/testdata/llamacpp-openai-chat-usage.sse")
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
	p := simPlan(1, 1, 128)
	p.URL = srv.URL + "/v1"
	runPlan(t, p, dir)
	raw, err := os.ReadFile(filepath.Join(dir, results.RunFile))
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

// TestServerMetricsWarmupSpreadsTheLevel: with ServerMetrics the warm-up
// runs apart from the level (so the server's counters hold the level
// alone); its duration must still spread the first level's users, or they
// start together and their prefills collide (a real llama.cpp under API
// auto reported 4× its TTFT that way).
func TestServerMetricsWarmupSpreadsTheLevel(t *testing.T) {
	p := simPlan(4, 8, 16)
	p.Load.Warmup, p.ServerMetrics = 1, true
	lv := runPlan(t, p, "").Levels[0]
	if lv.Lockstep || !(lv.StartSpreadMs > 0) {
		t.Fatalf("lockstep %v, start spread %g ms: the warm-up's duration did not spread the level", lv.Lockstep, lv.StartSpreadMs)
	}
	if sm := lv.ServerMetrics; sm == nil || sm.Requests != 8 {
		t.Fatalf("server metrics %+v, want the level's 8 requests alone", sm)
	}
}
