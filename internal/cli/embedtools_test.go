package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokbench/tokbench/metrics"
)

// TestBenchEmbeddings: an embeddings run against the simulator reports
// inputs and tokens embedded, in the table (which says there is no token
// stream) and in summary.json.
func TestBenchEmbeddings(t *testing.T) {
	code, stdout, stderr := runCLI(context.Background(), nil, "bench", "--api", "openai-embeddings", "--embed-inputs", "4",
		"--input-tokens", "64", "--concurrency", "2", "--requests", "8", "--quiet")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"embeddings: no token stream", "inputs/s", "tokens/s", "latency p50"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the table lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "TTFT p50") || strings.Contains(stdout, "decode TPS p50") {
		t.Errorf("the table of an embeddings run shows stream columns:\n%s", stdout)
	}
	code, stdout, stderr = runCLI(context.Background(), nil, "bench", "--api", "tei-embed", "--embed-inputs", "3",
		"--input-tokens", "32", "--concurrency", "1", "--requests", "4", "--format", "json", "--quiet")
	if code != ExitOK {
		t.Fatalf("json: exit %d: %s", code, stderr)
	}
	var s metrics.Summary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	e := s.Levels[0].Embeddings
	if e == nil || e.Inputs != 12 || e.Tokens != 12*32 || e.TokenSource != metrics.EmbedSourcePrompt || e.InputsPerS <= 0 {
		t.Errorf("embeddings %+v", e)
	}
}

// TestBenchTools: a --tools run reports the calls in the table's notes.
func TestBenchTools(t *testing.T) {
	code, stdout, stderr := runCLI(context.Background(), nil, "bench", "--tools", "8", "--concurrency", "2", "--requests", "6", "--quiet")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "tools: 8 definitions a request") || !strings.Contains(stdout, "6 of 6 completed requests called one (100%), first tool-call delta p50") {
		t.Errorf("no tool-call note:\n%s", stdout)
	}
}

// TestBenchToolsHostile: a tool definitions file of 10 MB, and the
// options that do not fit together, are refused in one line naming the
// flag, exit 2, before any request.
func TestBenchToolsHostile(t *testing.T) {
	big := filepath.Join(t.TempDir(), "tools.json")
	if err := os.WriteFile(big, []byte(`[{"name":"f","description":"`+strings.Repeat("x", 10<<20)+`"}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--tools-file", big}, "--tools-file: " + big + ": larger than 1024 KiB"},
		{[]string{"--tools", "4", "--api", "ollama"}, "--tools: ollama takes no tool definitions"},
		{[]string{"--embed-inputs", "4"}, "--embed-inputs: applies to an embeddings API"},
		{[]string{"--api", "tei-embed", "--workload", "agent"}, "--workload agent: an embeddings API has no conversation"},
	} {
		code, _, stderr := runCLI(context.Background(), nil, append([]string{"bench", "--requests", "1"}, c.args...)...)
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		if code != ExitUsage || len(lines) != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and one line saying %q", c.args, code, stderr, c.want)
		}
	}
}
