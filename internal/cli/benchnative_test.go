package cli

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/tokbench/tokbench/metrics"
)

// TestBenchEmbeddedEveryProtocol runs bench against the embedded simulator
// in each protocol it speaks: every request completes with the exact output
// length asked for (from the protocol's usage), and Ollama carries the
// simulator's own timing beside the client's.
func TestBenchEmbeddedEveryProtocol(t *testing.T) {
	for _, name := range []string{"openai-chat", "openai-completions", "anthropic", "ollama", "ollama-generate"} {
		t.Run(name, func(t *testing.T) {
			code, stdout, stderr := runCLI(context.Background(), map[string]string{"ANTHROPIC_API_KEY": "sk-ant-sim-123456"},
				"bench", "--api", name, "--concurrency", "2", "--requests", "4", "--warmup", "0",
				"--output-tokens", "16", "--ignore-eos", "--format", "json")
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
			if (lv.ClientMinusServer != nil) != (name == "ollama" || name == "ollama-generate") {
				t.Errorf("client_minus_server = %+v", lv.ClientMinusServer)
			}
			if g := lv.ClientMinusServer; g != nil {
				// The client reads what the server wrote a moment later: its
				// TTFT is at least the server's, by under 50 ms on loopback.
				if g.TTFTMs == nil || g.TTFTMs.Min < 0 || g.TTFTMs.P50 > 50 {
					t.Errorf("client − server TTFT %+v", g.TTFTMs)
				}
			}
		})
	}
}
