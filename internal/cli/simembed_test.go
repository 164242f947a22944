package cli

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/sim"
)

// simulateEmbed runs simulate with an embeddings API and returns its JSON.
func simulateEmbed(t *testing.T, args ...string) (target map[string]any, levels []metrics.Level) {
	t.Helper()
	code, stdout, stderr := runCLI(t.Context(), nil, append([]string{"simulate", "--format", "json"}, args...)...)
	if code != ExitOK {
		t.Fatalf("%v: exit %d: %s", args, code, stderr)
	}
	var got struct {
		Target map[string]any  `json:"target"`
		Levels []metrics.Level `json:"levels"`
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("%v: %v\n%s", args, err, stdout)
	}
	return got.Target, got.Levels
}

// TestSimulateEmbeddings: in virtual time an embeddings request of 4
// inputs of 128 tokens is one prefill step of their 512 tokens on the
// physics; eight users in lockstep are one step of 8 such sequences per
// wave. Latency, inputs/s and tokens/s are those steps' exactly.
func TestSimulateEmbeddings(t *testing.T) {
	cost, err := sim.DeploymentCost("llama-3.1-8b", "bf16", "h100-sxm", 1)
	if err != nil {
		t.Fatal(err)
	}
	seconds := func(d time.Duration) float64 { return d.Seconds() }
	// One sequence of 512 tokens; eight, each attending over its own.
	one := cost.StepTime(sim.Step{PrefillTokens: 512, PrefillContextTokens: 512, PrefillAttentionPairs: 512 * 512 / 2})
	eight := cost.StepTime(sim.Step{PrefillTokens: 8 * 512, PrefillContextTokens: 8 * 512, PrefillAttentionPairs: 8 * 512 * 512 / 2})
	near := func(got, want float64) bool { return math.Abs(got-want) <= 1e-9*math.Max(1, math.Abs(want)) }
	for _, tc := range []struct {
		api, users string
		lockstep   bool
		step       time.Duration
		source     string
	}{
		{"openai-embeddings", "1", false, one, metrics.EmbedSourceUsage},
		{"tei-embed", "8", true, eight, metrics.EmbedSourcePrompt},
		{"ollama-embed", "8", true, eight, metrics.EmbedSourceUsage},
	} {
		args := []string{"--api", tc.api, "--embed-inputs", "4", "--input-tokens", "128", "--concurrency", tc.users, "--requests", "16"}
		if tc.lockstep {
			args = append(args, "--lockstep")
		}
		target, levels := simulateEmbed(t, args...)
		if target["api"] != tc.api || target["embed_inputs"] != 4.0 || target["output_tokens"] != 0.0 {
			t.Errorf("%s: target %v", tc.api, target)
		}
		if len(levels) != 1 || levels[0].Embeddings == nil {
			t.Fatalf("%s: levels %+v", tc.api, levels)
		}
		lv, e := levels[0], levels[0].Embeddings
		// Every request waits exactly one step: 16 of them are 16 steps
		// at one user, two waves of one step at eight.
		waves := 16.0
		if tc.users == "8" {
			waves = 2
		}
		wantMs := float64(tc.step) / float64(time.Millisecond)
		if !near(e.Latency.P50, wantMs) || !near(e.Latency.Max, wantMs) || e.Latency.Count != 16 {
			t.Errorf("%s c=%s: latency p50 %v max %v (%d), want %v ms each of 16", tc.api, tc.users, e.Latency.P50, e.Latency.Max, e.Latency.Count, wantMs)
		}
		dur := waves * seconds(tc.step)
		if e.Inputs != 64 || e.Tokens != 64*128 || !near(e.InputsPerS, 64/dur) || !near(e.TokensPerS, 64*128/dur) {
			t.Errorf("%s c=%s: %d inputs, %d tokens, %v inputs/s, %v tokens/s; want 64, 8192, %v, %v",
				tc.api, tc.users, e.Inputs, e.Tokens, e.InputsPerS, e.TokensPerS, 64/dur, 64*128/dur)
		}
		if e.TokenSource != tc.source || e.Dims != 384 || lv.OutputTokens != 0 || lv.TTFT.Count != 0 || lv.DecodeTPS.Count != 0 {
			t.Errorf("%s: source %q dims %d, output %d, TTFT count %d, decode count %d; want %q, 384 and no stream figures",
				tc.api, e.TokenSource, e.Dims, lv.OutputTokens, lv.TTFT.Count, lv.DecodeTPS.Count, tc.source)
		}
	}
	// Phases fold into one expected run of the requests asked for.
	_, levels := simulateEmbed(t, "--api", "openai-embeddings", "--embed-inputs", "4", "--input-tokens", "128",
		"--concurrency", "8", "--requests", "16", "--phases", "4")
	if e := levels[0].Embeddings; e == nil || e.Inputs != 64 || e.Tokens != 64*128 || e.Latency.Count != 16 || levels[0].Requests.Completed != 16 {
		t.Errorf("--phases 4: %+v, completed %d; want 64 inputs, 8192 tokens, 16 latencies and requests", e, levels[0].Requests.Completed)
	}
}

// TestSimulateEmbeddingsTable: the table has the embeddings columns and
// says there is no token stream, as bench's does.
func TestSimulateEmbeddingsTable(t *testing.T) {
	code, stdout, stderr := runCLI(t.Context(), nil, "simulate", "--api", "openai-embeddings", "--embed-inputs", "4",
		"--input-tokens", "64", "--concurrency", "1,4")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"openai-embeddings: 4 inputs of 64 tokens a request", metrics.NoTokenStream, "inputs/s", "tokens/s", "latency p50", "c=4"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the table lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "TTFT p50") || strings.Contains(stdout, "decode TPS p50") {
		t.Errorf("the table of an embeddings simulation shows stream columns:\n%s", stdout)
	}
}

// TestSimulateEmbeddingsAgainstServe: bench against the simulated server
// in real time counts the same tokens as simulate in virtual time, and
// no answer comes sooner than the engine's step: the simulator sleeps
// until each step's end. How much later it comes (loopback, the JSON of
// 4 × 384 floats, this machine's load) is left to a timing harness.
func TestSimulateEmbeddingsAgainstServe(t *testing.T) {
	args := []string{"--api", "openai-embeddings", "--embed-inputs", "4", "--input-tokens", "128", "--concurrency", "1", "--requests", "8"}
	_, virtual := simulateEmbed(t, args...)
	code, stdout, stderr := runCLI(t.Context(), nil, append([]string{"bench", "--format", "json", "--quiet"}, args...)...)
	if code != ExitOK {
		t.Fatalf("bench: exit %d: %s", code, stderr)
	}
	var s metrics.Summary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	v, b := virtual[0].Embeddings, s.Levels[0].Embeddings
	if v == nil || b == nil {
		t.Fatalf("simulate %+v, bench %+v", v, b)
	}
	if b.Inputs != v.Inputs || b.Tokens != v.Tokens || b.TokenSource != v.TokenSource || b.Dims != v.Dims {
		t.Errorf("bench embedded %d inputs, %d tokens (%s, %d dims); simulate %d, %d (%s, %d)",
			b.Inputs, b.Tokens, b.TokenSource, b.Dims, v.Inputs, v.Tokens, v.TokenSource, v.Dims)
	}
	if b.Latency.Min < v.Latency.Min {
		t.Errorf("bench's fastest answer %.3f ms, sooner than the engine's step of %.3f ms", b.Latency.Min, v.Latency.Min)
	}
}
