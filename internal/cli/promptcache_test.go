package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tokbench/tokbench/internal/fakellm"
	"github.com/tokbench/tokbench/metrics"
)

// prompts is the user prompt of every request a fake received.
func prompts(t *testing.T, srv *fakellm.Server) []string {
	t.Helper()
	var out []string
	for _, b := range srv.Bodies() {
		msgs, _ := b["messages"].([]any)
		if len(msgs) == 0 {
			t.Fatalf("a body without messages: %v", b)
		}
		m, _ := msgs[len(msgs)-1].(map[string]any)
		out = append(out, fmt.Sprint(m["content"]))
	}
	return out
}

// TestNoAccidentalCacheHits: a run's warm-up prompts are never its measured
// ones and no prompt is sent twice; two runs without --seed send different
// prompts, two with the same --seed the same ones. (A level that comes
// round its list of prompts again: TestSourceRoundsAreNew.)
func TestNoAccidentalCacheHits(t *testing.T) {
	run := func(args ...string) []string {
		srv := fakellm.New(fakellm.Script{TTFT: time.Millisecond, Gap: time.Millisecond, Tokens: 2, Usage: true})
		defer srv.Close()
		base := []string{"bench", "--url", srv.URL + "/v1", "--model", "m", "--concurrency", "2", "--input-tokens", "16", "--output-tokens", "2"}
		if code, _, stderr := runCLI(context.Background(), nil, append(base, args...)...); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		return prompts(t, srv)
	}
	unique := func(name string, ps []string, want int) {
		t.Helper()
		seen := map[string]bool{}
		for _, p := range ps {
			if seen[p] {
				t.Errorf("%s: prompt sent twice: %q", name, p)
			}
			seen[p] = true
		}
		if len(ps) < want {
			t.Fatalf("%s: %d requests, want at least %d", name, len(ps), want)
		}
	}
	a := run("--requests", "8", "--warmup", "4")
	unique("warm-up and level", a, 12)
	b := run("--requests", "8", "--warmup", "4")
	unique("the second run", b, 12)
	if a[len(a)-1] == b[len(b)-1] || a[0] == b[0] {
		t.Errorf("two runs without --seed sent the same prompts: %q / %q", a[0], b[0])
	}
	s1, s2 := run("--requests", "8", "--seed", "7"), run("--requests", "8", "--seed", "7")
	same := map[string]bool{}
	for _, p := range s1 {
		same[p] = true
	}
	for _, p := range s2 {
		if !same[p] {
			t.Errorf("--seed 7 twice: a prompt of the second run is not the first's: %q", p)
			break
		}
	}
}

// TestPromptDifferenceNotCalledTemplate: prompts counted with cl100k_base
// against a server with its own tokenizer differ by the template and the
// tokenizers' disagreement together: the summary does not call that the
// chat template's.
func TestPromptDifferenceNotCalledTemplate(t *testing.T) {
	srv := fakellm.New(fakellm.Script{TTFT: time.Millisecond, Gap: time.Millisecond, Tokens: 2, Usage: true})
	defer srv.Close()
	// Words of one cl100k_base token each that the fake counts as two.
	path := filepath.Join(t.TempDir(), "d.jsonl")
	os.WriteFile(path, []byte(`{"prompt": "people government business people government business"}`+"\n"), 0o644)
	code, stdout, stderr := runCLI(context.Background(), nil, "bench", "--url", srv.URL+"/v1", "--model", "m",
		"--concurrency", "1", "--requests", "1", "--warmup", "0", "--dataset", path, "--format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var s metrics.Summary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatal(err)
	}
	lv := s.Levels[0]
	if lv.TemplateTokensPerRequest != 0 || lv.ExtraPromptTokensPerRequest <= 0 {
		t.Errorf("template %v, extra %v: want the difference as extra prompt tokens (fake's own tokenizer counts %d of %d)",
			lv.TemplateTokensPerRequest, lv.ExtraPromptTokensPerRequest, lv.InputTokens, lv.InputTokensRequested)
	}
}
