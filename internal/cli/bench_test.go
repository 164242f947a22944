package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tokbench/tokbench/internal/fakellm"
	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/results"
)

func runCLI(ctx context.Context, env map[string]string, args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = Run(ctx, args, Env{Stdout: &out, Stderr: &errb, Getenv: func(k string) string { return env[k] }})
	return code, out.String(), errb.String()
}

func TestBenchBadInput(t *testing.T) {
	dir := t.TempDir()
	binary := filepath.Join(dir, "model.bin")
	if err := os.WriteFile(binary, append([]byte("GGUF\x03\x00\x00\x00"), make([]byte, 64)...), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		flag string
	}{
		{[]string{"bench", "--concurrency", "1,x"}, "--concurrency"},
		{[]string{"bench", "--concurrency", "0"}, "--concurrency"},
		{[]string{"bench", "--format", "yaml"}, "--format"},
		{[]string{"bench", "--api", "grpc"}, "--api"},
		{[]string{"bench", "--header", "NoColon"}, "--header"},
		{[]string{"bench", "--url", "localhost:8000"}, "--url"},
		// Issue 34: these exited 1 with "is the server running at that address?".
		{[]string{"bench", "--url", "ftp://x"}, `--url: scheme "ftp" is not http or https`},
		{[]string{"bench", "--url", "unix:///tmp/s.sock"}, `--url`},
		{[]string{"bench", "--header", "X-Trace: a\r\nX-Evil: b"}, "--header: the value of X-Trace holds a line break"},
		{[]string{"bench", "--header", "X-Trace: a\nb"}, "--header: the value of X-Trace holds a line break"},
		{[]string{"bench", "--header", "X\rTrace: a"}, "--header: name"},
		{[]string{"bench", "--header", "X(Trace): a"}, `--header: name "X(Trace)" holds "("`},
		{[]string{"bench", "--tokenizer", "gpt2"}, "--tokenizer"},
		{[]string{"bench", "--input-tokens", "0"}, "--input-tokens"},
		{[]string{"bench", "--requests", "abc"}, "--requests"},
		{[]string{"bench", "--no-such-flag"}, "no-such-flag"},
		{[]string{"bench", "--ramp-up", "-1s"}, "--ramp-up"},
		{[]string{"bench", "--ramp-up", "10s", "--duration", "5s"}, "--ramp-up"},
		{[]string{"bench", "--ramp-up", "10s", "--rate", "5"}, "--ramp-up"},
		{[]string{"bench", "--continuous-usage", "yes"}, "--continuous-usage"},
		{[]string{"bench", "--api", "ollama-chat", "--continuous-usage", "on"}, "--continuous-usage"},
		{[]string{"bench", "--api", "anthropic", "--continuous-usage", "on"}, "--continuous-usage"},
		{[]string{"bench", "--redirects", "all"}, "--redirects"},
		{[]string{"bench", "--requests", "0"}, "--requests"},
		{[]string{"bench", "--duration", "0s"}, "--duration"},
		{[]string{"bench", "--arrival", "constant"}, "--arrival"},
		{[]string{"bench", "--burstiness", "0.5"}, "--burstiness"},
		{[]string{"bench", "--max-concurrency", "4"}, "--max-concurrency"},
		{[]string{"bench", "--api-key-env", "TOKBENCH_TEST_UNSET"}, "--api-key-env"},
		{[]string{"bench", "--gpu-hour-price", "2", "--price-in", "1"}, "--gpu-hour-price"},
		{[]string{"bench", "--shard", "3/4", "--concurrency", "1"}, "--shard"},
		{[]string{"bench", "--shard", "3/4", "--concurrency", "4", "--requests", "2"}, "--shard"},
		{[]string{"bench", "--dataset", dir}, "--dataset"},
		{[]string{"bench", "--dataset", binary}, "--dataset"},
		{[]string{"benhc"}, `did you mean "bench"`},
		{[]string{"frobnicate"}, "unknown command"},
	}
	for _, c := range cases {
		code, _, stderr := runCLI(context.Background(), nil, c.args...)
		if code != ExitUsage {
			t.Errorf("%v: exit %d, want 2", c.args, code)
		}
		if lines := strings.Count(strings.TrimSpace(stderr), "\n") + 1; lines != 1 || !strings.Contains(stderr, c.flag) {
			t.Errorf("%v: stderr %q, want one line naming %s", c.args, stderr, c.flag)
		}
	}
}

func TestBenchWritesRunDirWithoutSecrets(t *testing.T) {
	const key, hdr = "sk-planted-key-0123456789", "hdr-planted-secret-987"
	srv := fakellm.New(fakellm.Script{TTFT: 5 * time.Millisecond, Gap: time.Millisecond, Tokens: 8, Usage: true})
	defer srv.Close()
	dir := filepath.Join(t.TempDir(), "run")
	code, stdout, stderr := runCLI(context.Background(), map[string]string{"OPENAI_API_KEY": key},
		"bench", "--url", srv.URL+"/v1", "--concurrency", "1,2", "--requests", "3", "--warmup", "1",
		"--output-tokens", "8", "--header", "X-Api-Key: "+hdr, "--out", dir, "--format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var s metrics.Summary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatalf("stdout is not JSON: %v", err)
	}
	if s.Schema != metrics.Schema || len(s.Levels) != 2 || s.Target.Model != "fake-model" || s.Target.Simulated {
		t.Fatalf("summary = %+v", s)
	}
	for _, lv := range s.Levels {
		if lv.Requests.Completed != 3 || lv.OutputTokens != 24 || lv.TokenSource != "usage" {
			t.Errorf("level %s: %+v", lv.Load, lv.Requests)
		}
	}
	// 2 levels × (1 warm-up + 3) requests reached the server; 6 were recorded.
	if n := len(srv.Bodies()); n != 8 {
		t.Errorf("server saw %d requests, want 8", n)
	}
	recs, _, err := results.ReadRecords(dir)
	if err != nil || len(recs) != 6 {
		t.Fatalf("requests.jsonl: %d records, %v", len(recs), err)
	}
	onDisk, err := results.ReadSummary(dir)
	if err != nil || len(onDisk.Levels) != 2 {
		t.Fatalf("summary.json: %v", err)
	}
	// The API key went out as a bearer token, and is nowhere in the output.
	for _, b := range srv.Bodies() {
		if b["max_tokens"] != float64(8) {
			t.Errorf("max_tokens = %v", b["max_tokens"])
		}
	}
	all := stdout + stderr
	for _, f := range []string{results.RunFile, results.RequestsFile, results.SummaryFile} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		all += string(b)
	}
	if strings.Contains(all, key) || strings.Contains(all, hdr) {
		t.Error("a planted secret reached a file or the output")
	}
	if !strings.Contains(all, "X-Api-Key: [REDACTED]") {
		t.Error("run.json does not record the redacted header")
	}
}

func TestBenchAuthorizationSent(t *testing.T) {
	srv := fakellm.New(fakellm.Script{TTFT: time.Millisecond, Gap: time.Millisecond, Tokens: 3})
	defer srv.Close()
	code, _, stderr := runCLI(context.Background(), map[string]string{"MY_KEY": "abc123456"},
		"bench", "--url", srv.URL, "--model", "m", "--api-key-env", "MY_KEY", "--concurrency", "1", "--requests", "1", "--warmup", "0")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if got := srv.LastHeader("Authorization"); got != "Bearer abc123456" {
		t.Errorf("Authorization = %q", got)
	}
}

func TestBenchInterruptWritesEverything(t *testing.T) {
	srv := fakellm.New(fakellm.Script{TTFT: 20 * time.Millisecond, Gap: 20 * time.Millisecond, Tokens: 10, Usage: true})
	defer srv.Close()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(700*time.Millisecond, cancel)
	code, stdout, _ := runCLI(ctx, nil, "bench", "--url", srv.URL+"/v1", "--concurrency", "2",
		"--requests", "1000", "--warmup", "0", "--grace", "50ms", "--input-tokens", "32", "--out", dir, "--format", "json")
	if code != ExitInterrupted {
		t.Fatalf("exit %d, want 130", code)
	}
	var s metrics.Summary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil || !s.Interrupted {
		t.Fatalf("summary interrupted=%v err=%v", s.Interrupted, err)
	}
	disk, err := results.ReadSummary(dir)
	if err != nil || !disk.Interrupted {
		t.Fatalf("summary.json interrupted=%v err=%v", disk.Interrupted, err)
	}
	recs, _, err := results.ReadRecords(dir)
	if err != nil || len(recs) != disk.Levels[0].Requests.Sent || len(recs) < 4 {
		t.Fatalf("requests.jsonl has %d records, summary says %d sent: %v", len(recs), disk.Levels[0].Requests.Sent, err)
	}
	// Streams the interrupt cut keep what they measured (a stream's first
	// token comes at 20 ms, and each was cut after the 50 ms grace).
	for _, r := range recs {
		if r.ErrorClass == "interrupted" && len(r.ChunkMs) > 0 {
			if r.TTFTMs <= 0 || r.OutputTokens <= 0 || r.TTFTMs != r.ChunkMs[0] {
				t.Errorf("interrupted record %d: TTFT %v, %d tokens over %d chunks; want what it measured", r.ID, r.TTFTMs, r.OutputTokens, len(r.ChunkMs))
			}
		}
	}
	// (A stream may also end within the grace period: load's
	// TestInterruptKeepsWhatWasMeasured cuts streams for certain.)
}

func TestBenchUnwritableOutSendsNothing(t *testing.T) {
	srv := fakellm.New(fakellm.Script{TTFT: time.Millisecond, Gap: time.Millisecond, Tokens: 3})
	defer srv.Close()
	file := filepath.Join(t.TempDir(), "plain-file")
	os.WriteFile(file, nil, 0o644)
	code, _, stderr := runCLI(context.Background(), nil, "bench", "--url", srv.URL, "--model", "m", "--out", filepath.Join(file, "sub"))
	if code != ExitUsage || !strings.Contains(stderr, "--out") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	if n := len(srv.Bodies()); n != 0 {
		t.Errorf("%d requests were sent before --out failed", n)
	}
}

func TestBenchAllFailedExitsOne(t *testing.T) {
	srv := fakellm.New(fakellm.Script{Fault: func(int) fakellm.Fault { return fakellm.Fault{Status: 500} }})
	defer srv.Close()
	code, stdout, _ := runCLI(context.Background(), nil, "bench", "--url", srv.URL, "--model", "m",
		"--concurrency", "1", "--requests", "2", "--warmup", "0")
	if code != ExitFailure || !strings.Contains(stdout, "http_500 ×2") {
		t.Fatalf("exit %d, stdout %q", code, stdout)
	}
}

func TestBenchEmbeddedSimulator(t *testing.T) {
	code, stdout, stderr := runCLI(context.Background(), nil, "bench", "--concurrency", "1,2", "--requests", "2",
		"--input-tokens", "64", "--output-tokens", "16", "--format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, "SIMULATED") {
		t.Errorf("stderr does not say the target is simulated: %q", stderr)
	}
	var s metrics.Summary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatal(err)
	}
	if !s.Target.Simulated || len(s.Levels) != 2 || s.Levels[0].Requests.Completed != 2 || s.Levels[0].OutputTokens != 32 {
		t.Fatalf("summary = %+v", s)
	}
	if tps := s.Levels[0].DecodeTPS.P50; tps <= 0 {
		t.Errorf("decode TPS p50 = %g", tps)
	}
}

// TestBenchUnknownHardware: a --hardware the catalog lacks is bad input
// naming the flag (the physics bench judges by: benchmark's tests).
func TestBenchUnknownHardware(t *testing.T) {
	srv := fakellm.New(fakellm.Script{TTFT: time.Millisecond, Gap: time.Millisecond, Tokens: 2, Usage: true})
	defer srv.Close()
	code, _, stderr := runCLI(context.Background(), nil, "bench", "--url", srv.URL, "--model", "m", "--hardware", "tpu-v9")
	if code != ExitUsage || !strings.Contains(stderr, `--hardware: unknown "tpu-v9"`) {
		t.Errorf("unknown hardware: exit %d, %q", code, stderr)
	}
}

// TestBenchRepeatAndProfileBadInput: bad --profile, --slo, --repeat and
// --sweep values are bad input naming the flag (what a repeated, priced
// level measures: benchmark's tests).
func TestBenchRepeatAndProfileBadInput(t *testing.T) {
	srv := fakellm.New(fakellm.Script{TTFT: time.Millisecond, Gap: time.Millisecond, Tokens: 2, Usage: true})
	defer srv.Close()
	for _, bad := range [][]string{{"--profile", "gaming"}, {"--slo", "ttft<=1"}, {"--repeat", "0"}, {"--sweep", "manual"}, {"--sweep", "auto", "--concurrency", "2"}} {
		code, _, stderr := runCLI(context.Background(), nil, append([]string{"bench", "--url", srv.URL, "--model", "m"}, bad...)...)
		if code != ExitUsage || !strings.Contains(stderr, bad[0]) {
			t.Errorf("%v: exit %d, %q", bad, code, stderr)
		}
	}
}

// TestStreamsCutAtGraceAreTheirOwnClass is issue 34's: the streams cut
// when the grace after Ctrl-C runs out are counted as interrupted, not as
// failed, and are not in the error rate. Each stream takes 2 s; the run is
// interrupted at 300 ms with 50 ms of grace, so both users' streams are
// cut for certain.
func TestStreamsCutAtGraceAreTheirOwnClass(t *testing.T) {
	srv := fakellm.New(fakellm.Script{TTFT: 20 * time.Millisecond, Gap: 200 * time.Millisecond, Tokens: 10, Usage: true})
	defer srv.Close()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	code, stdout, stderr := runCLI(ctx, nil, "bench", "--url", srv.URL+"/v1", "--model", "m", "--concurrency", "2",
		"--requests", "10", "--warmup", "0", "--grace", "50ms", "--input-tokens", "16", "--out", dir)
	if code != ExitInterrupted {
		t.Fatalf("exit %d, want 130: %s", code, stderr)
	}
	s, err := results.ReadSummary(dir)
	if err != nil || len(s.Levels) != 1 {
		t.Fatalf("summary: %v", err)
	}
	rq := s.Levels[0].Requests
	if rq.Sent != 2 || rq.Interrupted != 2 || rq.Failed != 0 || rq.Errors["interrupted"] != 0 || s.Levels[0].ErrorRate != 0 {
		t.Errorf("requests %+v, error rate %g; want 2 sent, 2 interrupted, none failed", rq, s.Levels[0].ErrorRate)
	}
	if !strings.Contains(stdout, "c=2: 2 interrupted: streams cut when the grace") || strings.Contains(stdout, "failed: interrupted") {
		t.Errorf("stdout does not name the cut streams as their own class:\n%s", stdout)
	}
}
