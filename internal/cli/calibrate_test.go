package cli

import (
	"context"
	"encoding/json"
	"fmt"
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

// TestCalibrateRefusesAnImpossibleRun: the recorded llama-server run
// declared as llama-3.2-1b bf16 (2.47 GB) on 8.0 GB/s, as in the issue,
// exits 1 with the cause in one line and writes nothing; --force writes
// the fit with its error, and simulate --calibration repeats that error
// beside every prediction, in the table and in JSON.
func TestCalibrateRefusesAnImpossibleRun(t *testing.T) {
	s, err := results.ReadSummary(filepath.Join("..", "..", "calibrate", "testdata", "llamacpp-c1-c2"))
	if err != nil {
		t.Fatal(err)
	}
	for i := range s.Levels {
		ph := *s.Levels[i].Physics
		ph.Deployment, ph.WeightBytes, ph.BandwidthBytesPerSec = "llama-3.2-1b bf16 on 1× local", 2.47e9, 8.0e9
		s.Levels[i].Physics = &ph
	}
	dir := filepath.Join(t.TempDir(), "run")
	os.MkdirAll(dir, 0o755)
	if err := results.WriteSummary(dir, s); err != nil {
		t.Fatal(err)
	}
	cal := filepath.Join(t.TempDir(), "cal.json")
	code, stdout, stderr := runCLI(context.Background(), nil, "calibrate", dir, "--out", cal)
	if code != ExitFailure || strings.Count(strings.TrimSpace(stderr), "\n") != 0 ||
		!strings.Contains(stderr, "cannot have served this run") || !strings.Contains(stderr, cal+" not written") {
		t.Fatalf("calibrate: exit %d, stderr %q", code, stderr)
	}
	if !strings.Contains(stdout, "FIT REFUSED") || strings.Contains(stdout, "wrote ") {
		t.Errorf("refused fit's table:\n%s", stdout)
	}
	if _, err := os.Stat(cal); !os.IsNotExist(err) {
		t.Fatalf("a refused fit was written: %v", err)
	}
	code, _, stderr = runCLI(context.Background(), nil, "calibrate", dir, "--out", cal, "--force")
	if code != 0 {
		t.Fatalf("calibrate --force: exit %d: %s", code, stderr)
	}
	var file struct {
		Fit struct {
			RMSError    float64 `json:"rms_error"`
			MaxRMSError float64 `json:"max_rms_error"`
			Error       string  `json:"error"`
		} `json:"fit"`
	}
	b, _ := os.ReadFile(cal)
	if err := json.Unmarshal(b, &file); err != nil {
		t.Fatal(err)
	}
	if file.Fit.RMSError <= 0.2 || file.Fit.MaxRMSError != 0.2 || !strings.Contains(file.Fit.Error, "cannot have served this run") {
		t.Fatalf("forced file's fit %+v", file.Fit)
	}
	note := fmt.Sprintf("predicted by a fit that missed its measured levels (c=1, c=2) by %.1f%% rms", 100*file.Fit.RMSError)
	_, text, _ := runCLI(context.Background(), nil, "simulate", "--calibration", cal, "--concurrency", "4,8", "--phases", "1")
	for _, want := range []string{"c=4: " + note, "c=8: " + note, "WARNING: " + cal + " was written with --force", "REFUSED"} {
		if !strings.Contains(text, want) {
			t.Errorf("simulate output lacks %q:\n%s", want, text)
		}
	}
	code, stdout, stderr = runCLI(context.Background(), nil, "simulate", "--calibration", cal, "--concurrency", "4", "--phases", "1", "--format", "json")
	if code != 0 {
		t.Fatalf("simulate: exit %d: %s", code, stderr)
	}
	var out struct {
		Levels []struct {
			Fit *struct {
				RMSError float64 `json:"rms_error"`
				Error    string  `json:"error"`
			} `json:"calibration_fit"`
		} `json:"levels"`
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Levels) != 1 || out.Levels[0].Fit == nil || out.Levels[0].Fit.RMSError != file.Fit.RMSError || out.Levels[0].Fit.Error != file.Fit.Error {
		t.Errorf("simulate JSON levels' fit %+v, want the file's %+v", out.Levels, file.Fit)
	}
	if code, _, stderr := runCLI(context.Background(), nil, "calibrate", dir, "--out", cal, "--max-rms-error", "0"); code != ExitUsage || !strings.Contains(stderr, "--max-rms-error") {
		t.Errorf("--max-rms-error 0: exit %d, %q", code, stderr)
	}
}
