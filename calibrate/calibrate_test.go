package calibrate

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/results"
	"github.com/tokbench/tokbench/sim"
)

// truth is a CPU-like deployment: a 150 MB model read at 70% of 20 GB/s,
// prompts prefilled at 2,000 tokens/s, 0.4 ms a step and 0.3 ms a
// sequence of overhead, four slots.
var truth = sim.Calibrated{
	WeightBytes: 150e6, KVBytesPerToken: 8192, KVCapacity: 1 << 20, BandwidthBytesPerSec: 20e9,
	MBU: 0.7, PrefillTPS: 2000, StepOverheadMs: 0.4, SeqOverheadMs: 0.3,
}

func measured(t *testing.T, users []int, slots int) metrics.Summary {
	t.Helper()
	eng := sim.DefaultConfig().Engine
	eng.MaxNumSeqs = slots
	levels, err := sim.Curve(context.Background(), eng, truth, sim.CurveConfig{Users: users, Requests: 16, PromptTokens: 256, MaxTokens: 64})
	if err != nil {
		t.Fatal(err)
	}
	for i := range levels {
		levels[i].Physics = &metrics.Physics{Deployment: "truth", WeightBytes: truth.WeightBytes, KVBytesPerToken: truth.KVBytesPerToken,
			BandwidthBytesPerSec: truth.BandwidthBytesPerSec, KVCapacityTokens: truth.KVCapacity}
	}
	return metrics.Summary{Schema: metrics.Schema, Levels: levels}
}

// TestFitPredictsOtherLoads: fitted to c=1 and c=2 of a known
// deployment, the calibrated simulator predicts c=4 and c=8 (past the
// slots, so requests queue) within 5%.
func TestFitPredictsOtherLoads(t *testing.T) {
	f, err := FromRun(context.Background(), "run", measured(t, []int{1, 2}, 4), map[string]string{"server_slots": "4"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if f.MaxBatch != 4 || len(f.Fit.Levels) != 2 || f.Fit.RMSError > 0.02 {
		t.Fatalf("max batch %d, %d levels, rms error %.3f", f.MaxBatch, len(f.Fit.Levels), f.Fit.RMSError)
	}
	t.Logf("fitted %+v", f.Cost)
	want := measured(t, []int{4, 8}, 4)
	got, err := sim.Curve(context.Background(), f.Engine(), f.Cost, sim.CurveConfig{Users: []int{4, 8}, Requests: 16, PromptTokens: 256, MaxTokens: 64})
	if err != nil {
		t.Fatal(err)
	}
	for i, lv := range got {
		w := want.Levels[i]
		for _, c := range []struct {
			name      string
			got, want float64
		}{{"decode TPS p50", lv.DecodeTPS.P50, w.DecodeTPS.P50}, {"TTFT p50", lv.TTFT.P50, w.TTFT.P50}} {
			if e := math.Abs(c.got/c.want - 1); e > 0.05 {
				t.Errorf("c=%d %s: predicted %.2f, true %.2f (%.1f%% off)", lv.Load.Concurrency, c.name, c.got, c.want, 100*e)
			}
		}
	}
	// The file round-trips.
	path := filepath.Join(t.TempDir(), "cal.json")
	if err := f.Write(path); err != nil {
		t.Fatal(err)
	}
	back, err := Read(path)
	if err != nil || back.Cost != f.Cost || back.MaxBatch != 4 {
		t.Fatalf("read back %+v, %v", back, err)
	}
}

func TestFromRunNeedsPhysics(t *testing.T) {
	s := measured(t, []int{1}, 4)
	s.Levels[0].Physics = nil
	if _, err := FromRun(context.Background(), "run", s, nil, Options{}); err == nil {
		t.Fatal("a run without physics was fitted")
	}
}

// TestPredictsLlamaServer is the real-server check: calibrate from a
// tokbench bench of llama.cpp's llama-server (b4748, a 150 MB F16 model,
// 4 slots, 2 CPU threads, --concurrency 1,2, 258 tokens in and 64 out,
// --hardware local on a 2-core machine measuring 22.4 GB/s), then predict
// c=4 and c=8 with the phase replicas simulate --calibration runs. The
// measured figures are a second run of the same server at c=4 and c=8 (32
// requests each). At c=4 users fall into step in pairs (two prompts in
// one step, their answers ending in one step), which the evenly spread
// simulation never does: its TTFT p50 there is 45% short.
func TestPredictsLlamaServer(t *testing.T) {
	s, err := results.ReadSummary("testdata/llamacpp-c1-c2")
	if err != nil {
		t.Fatal(err)
	}
	f, err := FromRun(context.Background(), "run12", s, map[string]string{"server_slots": "4"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []struct {
		users           int
		ttft, decodeTPS float64
	}{{4, 565.3, 35.70}, {8, 3126, 38.67}} {
		lv, err := sim.Curve(context.Background(), f.Engine(), f.Cost, sim.CurveConfig{
			Users: []int{m.users}, Requests: 32, PromptTokens: 258, MaxTokens: 64, Phases: 16,
		})
		if err != nil {
			t.Fatal(err)
		}
		got := lv[0]
		for _, c := range []struct {
			name      string
			got, want float64
		}{{"TTFT p50", got.TTFT.P50, m.ttft}, {"decode TPS p50", got.DecodeTPS.P50, m.decodeTPS}} {
			e := c.got/c.want - 1
			t.Logf("c=%d %s: predicted %.2f, measured %.2f (%+.1f%%)", m.users, c.name, c.got, c.want, 100*e)
			if math.Abs(e) > 0.15 {
				t.Errorf("c=%d %s: predicted %.2f, measured %.2f: %.1f%% off, want within 15%%", m.users, c.name, c.got, c.want, 100*e)
			}
		}
	}
}
