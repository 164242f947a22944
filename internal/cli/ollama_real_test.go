package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tokbench/tokbench/metrics"
)

// TestRealOllama runs tokbench against a real Ollama server that .ci/real
// started (TOKBENCH_OLLAMA, its base URL) serving a tiny random-weight
// GGUF (TOKBENCH_OLLAMA_MODEL), with OLLAMA_NUM_PARALLEL=1, through each of
// its APIs: --api auto must find Ollama's native API; every request
// completes; on the native APIs the output and prompt tokens recorded are
// Ollama's own eval_count and prompt_eval_count, and the server's decode
// and prompt timings are recorded; at c=4 on one slot the TTFT beyond the
// server's own timing is named as the server's queue.
func TestRealOllama(t *testing.T) {
	base, model := os.Getenv("TOKBENCH_OLLAMA"), os.Getenv("TOKBENCH_OLLAMA_MODEL")
	if base == "" || model == "" {
		t.Skip("set TOKBENCH_OLLAMA and TOKBENCH_OLLAMA_MODEL (.ci/real does)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, c := range []struct {
		api, url, want string
		native         bool
		conc           string
	}{
		{"auto", base, "ollama", true, "1"},
		{"ollama-chat", base, "ollama-chat", true, "1"},
		{"ollama-generate", base, "ollama-generate", true, "4"},
		{"openai-chat", base + "/v1", "openai-chat", false, "1"},
	} {
		t.Run(c.api, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "run")
			code, stdout, stderr := runCLI(ctx, nil, "bench", "--url", c.url, "--api", c.api, "--model", model,
				"--concurrency", c.conc, "--requests", "8", "--input-tokens", "64", "--output-tokens", "16", "--out", out, "--format", "json")
			if code != 0 {
				t.Fatalf("bench --api %s exited %d\n%s\n%s", c.api, code, stdout, stderr)
			}
			var sum metrics.Summary
			b, err := os.ReadFile(filepath.Join(out, "summary.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &sum); err != nil {
				t.Fatal(err)
			}
			if got := sum.Target.API; len(got) < len(c.want) || got[:len(c.want)] != c.want {
				t.Errorf("the run's API is %q, want %s…", got, c.want)
			}
			if len(sum.Levels) != 1 {
				t.Fatalf("%d levels, want 1", len(sum.Levels))
			}
			lv := sum.Levels[0]
			if lv.Requests.Completed != 8 || lv.Requests.Failed != 0 {
				t.Errorf("%d of 8 requests completed, %d failed: %v", lv.Requests.Completed, lv.Requests.Failed, lv.Requests.Errors)
			}
			recs := readRecordsFile(t, filepath.Join(out, "requests.jsonl"))
			for _, r := range recs {
				if !r.OK {
					continue
				}
				if !c.native {
					if r.OutputTokens <= 0 {
						t.Errorf("record %d: %d output tokens", r.ID, r.OutputTokens)
					}
					continue
				}
				s := r.Server
				if s == nil || s.PredictedMs <= 0 || s.PromptMs <= 0 {
					t.Errorf("record %d: no server timing of Ollama's (%+v)", r.ID, s)
					continue
				}
				if r.OutputTokens != s.PredictedTokens || r.InputTokens != s.PromptTokens {
					t.Errorf("record %d: %d output and %d prompt tokens recorded; Ollama counted eval_count %d, prompt_eval_count %d",
						r.ID, r.OutputTokens, r.InputTokens, s.PredictedTokens, s.PromptTokens)
				}
			}
			if c.conc == "4" {
				g := lv.ClientMinusServer
				if g == nil || g.QueueMs == nil || g.QueueMs.P50 <= g.NetworkMs {
					t.Errorf("c=4 on one slot: no server queue named beyond the network's share (%+v)", g)
				}
			}
			t.Logf("--api %s (%s): %d requests, TTFT p50 %.1f ms, decode p50 %.1f tok/s", c.api, sum.Target.API, lv.Requests.Completed, lv.TTFT.P50, lv.DecodeTPS.P50)
		})
	}
}

func readRecordsFile(t *testing.T, path string) []metrics.Record {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var recs []metrics.Record
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<26)
	for sc.Scan() {
		var r metrics.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		recs = append(recs, r)
	}
	return recs
}
