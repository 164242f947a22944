package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/results"
	"github.com/tokbench/tokbench/sim"
)

// TestCalibrateThenSimulate: a run of a known deployment (made by the
// simulator itself, with its physics) is calibrated, and simulate and
// serve take the file, say so, and refuse a deployment beside it.
func TestCalibrateThenSimulate(t *testing.T) {
	truth := sim.Calibrated{WeightBytes: 150e6, KVBytesPerToken: 8192, KVCapacity: 1 << 20, BandwidthBytesPerSec: 20e9,
		MBU: 0.7, PrefillTPS: 2000, StepOverheadMs: 0.4, SeqOverheadMs: 0.3}
	eng := sim.DefaultConfig().Engine
	levels, err := sim.Curve(context.Background(), eng, truth, sim.CurveConfig{Users: []int{1, 2}, Requests: 16, PromptTokens: 256, MaxTokens: 64})
	if err != nil {
		t.Fatal(err)
	}
	for i := range levels {
		levels[i].Physics = &metrics.Physics{Deployment: "tiny on 1× local", WeightBytes: truth.WeightBytes, KVBytesPerToken: truth.KVBytesPerToken,
			BandwidthBytesPerSec: truth.BandwidthBytesPerSec, KVCapacityTokens: truth.KVCapacity}
	}
	dir := filepath.Join(t.TempDir(), "run")
	os.MkdirAll(dir, 0o755)
	if err := results.WriteSummary(dir, metrics.Summary{Schema: metrics.Schema, Target: metrics.Target{Model: "tiny"}, Levels: levels}); err != nil {
		t.Fatal(err)
	}
	cal := filepath.Join(t.TempDir(), "cal.json")
	code, stdout, stderr := runCLI(context.Background(), nil, "calibrate", dir, "--out", cal)
	if code != 0 {
		t.Fatalf("calibrate: exit %d: %s", code, stderr)
	}
	for _, want := range []string{"calibrated tiny on 1× local from " + dir, "prefill (and decode) rate", "c=1", "c=2", "rms error"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("calibrate output lacks %q:\n%s", want, stdout)
		}
	}
	code, stdout, stderr = runCLI(context.Background(), nil, "simulate", "--calibration", cal, "--concurrency", "4", "--input-tokens", "256", "--output-tokens", "64", "--format", "json")
	if code != 0 {
		t.Fatalf("simulate: exit %d: %s", code, stderr)
	}
	var out struct {
		Target struct {
			Model       string `json:"model"`
			Calibration string `json:"calibration"`
		} `json:"target"`
		Levels []metrics.Level `json:"levels"`
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatal(err)
	}
	want, _ := sim.Curve(context.Background(), eng, truth, sim.CurveConfig{Users: []int{4}, Requests: 16, PromptTokens: 256, MaxTokens: 64})
	if out.Target.Calibration != cal || out.Target.Model != "tiny" || len(out.Levels) != 1 {
		t.Fatalf("target %+v, %d levels", out.Target, len(out.Levels))
	}
	if r := out.Levels[0].Repeats; r == nil || r.Runs != calibratedPhases || r.Fold != "mean" {
		t.Errorf("a calibrated level is not the mean of %d phases: %+v", calibratedPhases, r)
	}
	if g, w := out.Levels[0].DecodeTPS.P50, want[0].DecodeTPS.P50; g < 0.95*w || g > 1.05*w {
		t.Errorf("c=4 decode p50 %.2f, the deployment's %.2f", g, w)
	}
	_, text, _ := runCLI(context.Background(), nil, "simulate", "--calibration", cal, "--concurrency", "1")
	if !strings.Contains(text, "simulated CALIBRATED tiny on 1× local") {
		t.Errorf("simulate does not say it is calibrated:\n%s", text)
	}
	for _, args := range [][]string{
		{"simulate", "--calibration", cal, "--hardware", "h100-sxm"},
		{"serve", "--calibration", cal, "--model", "llama-3.1-8b"},
		{"simulate", "--calibration", filepath.Join(t.TempDir(), "none.json")},
		{"calibrate", dir},
		{"calibrate", t.TempDir(), "--out", cal},
	} {
		if code, _, stderr := runCLI(context.Background(), nil, args...); code != ExitUsage || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%v: exit %d, %q", args, code, stderr)
		}
	}
}
