package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/sim"
)

func TestSimulateJSONMatchesEngine(t *testing.T) {
	code, stdout, stderr := runCLI(t.Context(), nil, "simulate", "--concurrency", "1,4",
		"--requests", "8", "--input-tokens", "100", "--output-tokens", "20", "--format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var got struct {
		Schema string `json:"schema"`
		Target struct {
			Simulated bool   `json:"simulated"`
			Model     string `json:"model"`
			Hardware  string `json:"hardware"`
		} `json:"target"`
		Levels []metrics.Level `json:"levels"`
	}
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	if got.Schema != metrics.Schema || !got.Target.Simulated || got.Target.Model != "llama-3.1-8b" || got.Target.Hardware != "h100-sxm" {
		t.Errorf("schema %q target %+v", got.Schema, got.Target)
	}
	if len(got.Levels) != 2 || got.Levels[0].Load.Concurrency != 1 || got.Levels[1].Load.Concurrency != 4 {
		t.Fatalf("levels = %+v", got.Levels)
	}
	// One user: TTFT is exactly the 100-token prefill step of the physics model.
	cost, err := sim.DeploymentCost("llama-3.1-8b", "bf16", "h100-sxm", 1)
	if err != nil {
		t.Fatal(err)
	}
	want := float64(cost.StepTime(sim.Step{PrefillTokens: 100, PrefillContextTokens: 100})) / 1e6
	if lv := got.Levels[0]; math.Abs(lv.TTFT.P50-want) > 1e-6 || lv.TTFT.Max != lv.TTFT.Min {
		t.Errorf("c=1 TTFT p50 %v (min %v max %v), want exactly %v ms", lv.TTFT.P50, lv.TTFT.Min, lv.TTFT.Max, want)
	}
	if lv := got.Levels[1]; lv.OutputTokens != 160 || lv.Requests.Completed != 8 || lv.TokenSource != "usage" {
		t.Errorf("c=4: %d tokens, %d completed, source %q; want 160, 8, usage", lv.OutputTokens, lv.Requests.Completed, lv.TokenSource)
	}
}

func TestSimulateTable(t *testing.T) {
	code, stdout, stderr := runCLI(t.Context(), nil, "simulate", "--concurrency", "2", "--requests", "4", "--output-tokens", "8")
	if code != 0 || !strings.Contains(stdout, "simulated llama-3.1-8b bf16 on 1× h100-sxm") || !strings.Contains(stdout, "c=2") {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}

// TestSimulateFrontEnd: one user's TTFT behind vLLM's front end is the
// engine's plus 4 ms of request, 100 prompt tokens at 10 µs, one
// sequence's scheduling (12.7 µs) and one chunk written out (29 µs).
func TestSimulateFrontEnd(t *testing.T) {
	ttft := func(args ...string) float64 {
		t.Helper()
		code, stdout, stderr := runCLI(t.Context(), nil, append([]string{"simulate", "--concurrency", "1",
			"--requests", "4", "--input-tokens", "100", "--output-tokens", "20", "--format", "json"}, args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		var got struct {
			Levels []metrics.Level `json:"levels"`
		}
		if err := json.Unmarshal([]byte(stdout), &got); err != nil || len(got.Levels) != 1 || got.Levels[0].TTFT.Min != got.Levels[0].TTFT.Max {
			t.Fatalf("%v: %v\n%s", args, err, stdout)
		}
		return got.Levels[0].TTFT.P50
	}
	none, vllm := ttft(), ttft("--front-end", "vllm")
	if want := 4 + 100*0.010 + 0.0127 + 0.029; math.Abs(vllm-none-want) > 1e-6 {
		t.Errorf("TTFT %.6f ms behind vLLM's front end, %.6f without: %.6f more, want %.6f", vllm, none, vllm-none, want)
	}
	if none2 := ttft("--front-end", "none"); none2 != none {
		t.Errorf("--front-end none: TTFT %.6f, default %.6f", none2, none)
	}
}

func TestSimBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"simulate", "--concurrency", "0"}, "--concurrency"},
		{[]string{"simulate", "--concurrency", "1,x"}, "--concurrency"},
		{[]string{"simulate", "--model", "nope"}, "--model"},
		{[]string{"simulate", "--quant", "fp3"}, "--quant"},
		{[]string{"simulate", "--hardware", "abacus"}, "--hardware"},
		{[]string{"simulate", "--format", "xml"}, "--format"},
		{[]string{"simulate", "--output-tokens", "0"}, "--output-tokens"},
		{[]string{"simulate", "--input-tokens", "10000000"}, "--input-tokens"},
		{[]string{"simulate", "--spec-acceptance", "1.5", "--spec-draft-tokens", "3"}, "--spec-acceptance"},
		{[]string{"simulate", "--phases", "-1"}, "--phases"},
		{[]string{"simulate", "--phases", "4", "--lockstep"}, "--phases"},
		{[]string{"serve", "--gpus", "0"}, "--gpus"},
		{[]string{"serve", "--model", "llama-3.1-405b"}, "--model"}, // does not fit on one H100
		{[]string{"serve", "--max-batch", "0"}, "--max-batch"},
		{[]string{"simulate", "--front-end", "sglang"}, "--front-end"},
		{[]string{"simulate", "--api", "grpc"}, "--api"},
		{[]string{"simulate", "--embed-inputs", "4"}, "--embed-inputs"},
		{[]string{"simulate", "--api", "openai-chat", "--embed-inputs", "4"}, "--embed-inputs"},
		{[]string{"simulate", "--api", "tei-embed", "--embed-inputs", "70000"}, "--embed-inputs"},
		{[]string{"simulate", "--api", "tei-embed", "--output-tokens", "8"}, "--output-tokens"},
		{[]string{"simulate", "--api", "tei-embed", "--images", "1"}, "--images"},
		{[]string{"simulate", "--api", "tei-embed", "--input-tokens", "200000"}, "--input-tokens"},
		{[]string{"simulate", "--api", "tei-embed", "--embed-inputs", "64", "--input-tokens", "8192"}, "--embed-inputs × --input-tokens"},
		{[]string{"serve", "--front-end", "vllm", "--calibration", "cal.json"}, "--front-end"},
	} {
		code, _, stderr := runCLI(t.Context(), nil, tc.args...)
		if code != ExitUsage || !strings.Contains(stderr, tc.flag) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q; want 2 and one line naming %s", tc.args, code, stderr, tc.flag)
		}
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestServeRunsUntilCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stderr lockedBuffer
	done := make(chan int)
	go func() {
		done <- Run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--seed", "3"}, Env{Stderr: &stderr})
	}()
	urlRE := regexp.MustCompile(`http://127\.0\.0\.1:\d+/v1`)
	var base string
	for deadline := time.Now().Add(10 * time.Second); base == ""; {
		base = urlRE.FindString(stderr.String())
		if time.Now().After(deadline) {
			t.Fatalf("no URL on stderr: %q", stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(stderr.String(), "simulated llama-3.1-8b bf16 on 1× h100-sxm") {
		t.Errorf("stderr lacks the preset: %q", stderr.String())
	}
	resp, err := http.Get(base + "/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("/v1/models: status %d", resp.StatusCode)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit %d after cancel, want 0: %s", code, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop after its context was canceled")
	}
}

// TestSimulateSteadyByDefault: simulate starts a level's users spread over
// one request's duration, as bench does, so TTFT at 4 users stays near one
// user's for equal prompts (no burst of four simultaneous prefills); with
// --lockstep the four prefill together, and the first requests' TTFT is
// four prefills long.
func TestSimulateSteadyByDefault(t *testing.T) {
	ttft := func(args ...string) (c1, c4 float64, lv metrics.Level) {
		t.Helper()
		code, stdout, stderr := runCLI(t.Context(), nil, append([]string{"simulate", "--concurrency", "1,4",
			"--input-tokens", "1024", "--output-tokens", "128", "--format", "json"}, args...)...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		var got struct {
			Levels []metrics.Level `json:"levels"`
		}
		if err := json.Unmarshal([]byte(stdout), &got); err != nil {
			t.Fatal(err)
		}
		return got.Levels[0].TTFT.P50, got.Levels[1].TTFT.P50, got.Levels[1]
	}
	c1, c4, lv := ttft()
	if c4 > 1.5*c1 || lv.Lockstep || lv.StartSpreadMs <= 0 {
		t.Errorf("default: TTFT p50 %.1f ms at c=4 against %.1f at c=1 (want within 1.5×), lockstep %v, spread %.1f ms", c4, c1, lv.Lockstep, lv.StartSpreadMs)
	}
	c1, c4, lv = ttft("--lockstep")
	if c4 < 3.5*c1 || !lv.Lockstep {
		t.Errorf("--lockstep: TTFT p50 %.1f ms at c=4 against %.1f at c=1, want about 4×; lockstep %v", c4, c1, lv.Lockstep)
	}
}
