package telemetry

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

// TestParseDCGM reads a DCGM exporter page of two H100s written from
// NVIDIA's field list (power in W, profiling ratios 0–1, framebuffer in
// MiB): power summed, activities averaged, memory summed.
func TestParseDCGM(t *testing.T) {
	f, err := os.Open("testdata/dcgm-h100x2.prom")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	x, err := ParseDCGM(f)
	if err != nil {
		t.Fatal(err)
	}
	if x.GPUs != 2 || !near(x.PowerWatts, 800) || !near(x.MemoryActivity, 0.60) || !near(x.SMActivity, 0.79) ||
		!x.HasMemoryActivity || !x.HasSMActivity || x.MemoryActivitySource != "DCGM_FI_PROF_DRAM_ACTIVE" ||
		!near(x.MemoryUsedBytes, 2*61440*(1<<20)) || !near(x.MemClockMHz, 2619) {
		t.Fatalf("ParseDCGM = %+v", x)
	}
	// Without profiling metrics, memory activity is the copy utilization.
	g, err := os.Open("testdata/dcgm-l4-noprof.prom")
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if x, err = ParseDCGM(g); err != nil {
		t.Fatal(err)
	}
	if x.GPUs != 1 || !near(x.PowerWatts, 71.25) || !near(x.MemoryActivity, 0.51) || x.MemoryActivitySource != "DCGM_FI_DEV_MEM_COPY_UTIL" || x.HasSMActivity {
		t.Fatalf("ParseDCGM without profiling = %+v", x)
	}
	if _, err := ParseDCGM(strings.NewReader("# nothing\nother_metric 1\n")); err == nil {
		t.Fatal("a page without DCGM fields parsed")
	}
}

func TestParseNvidiaSMI(t *testing.T) {
	r, err := parseNvidiaSMI("350.00, 90, 60, 40960, 2619")
	if err != nil || r != (gpuReading{350, 90, 60, 40960, 2619}) {
		t.Fatalf("parseNvidiaSMI = %+v, %v", r, err)
	}
	r, err = parseNvidiaSMI("[N/A], 12, [Not Supported], 512, 405")
	if err != nil || !math.IsNaN(r.power) || !math.IsNaN(r.memUtil) || r.util != 12 {
		t.Fatalf("parseNvidiaSMI with N/A = %+v, %v", r, err)
	}
	x := fold([]gpuReading{r}, time.Time{})
	if x.HasMemoryActivity || x.PowerWatts != 0 || !near(x.SMActivity, 0.12) {
		t.Fatalf("fold of an N/A reading = %+v", x)
	}
	for _, line := range []string{"350.00, 90, 60", "350.00, 90, sixty, 40960, 2619"} {
		if _, err := parseNvidiaSMI(line); err == nil {
			t.Errorf("parseNvidiaSMI(%q): no error", line)
		}
	}
}

// TestLevelEnergy: each run's mean power times its duration, over the
// level's tokens: 800 W for 2 s and 600 W for 1 s over 1,100 tokens is
// 2,200 J, exactly 2 J a token; at 0.12/kWh a million tokens cost
// 0.12 × 2e6 / 3.6e6.
func TestLevelEnergy(t *testing.T) {
	l := Level{Source: "test"}
	l.Add([]Sample{{GPUs: 2, PowerWatts: 700}, {GPUs: 2, PowerWatts: 900}}, 2)
	l.Add([]Sample{{GPUs: 2, PowerWatts: 600, MemoryActivity: 0.5, HasMemoryActivity: true}}, 1)
	l.Add(nil, 5) // a run with no sample adds nothing
	g := l.GPU(1100, 0.12)
	if !near(g.EnergyJoules, 2200) || !near(g.JoulesPerOutputToken, 2) || !near(g.OutputTokensPerJoule, 0.5) ||
		!near(g.EnergyCostPerMillion, 0.12*2e6/3.6e6) || g.PowerWattsP50 != 700 || g.PowerWattsMax != 900 || g.Samples != 3 ||
		g.MemoryActivity == nil || *g.MemoryActivity != 0.5 || g.SMActivity != nil {
		t.Fatalf("GPU = %+v", g)
	}
	if (&Level{}).GPU(10, 0) != nil {
		t.Fatal("a level without samples has GPU figures")
	}
}

// TestLevelTimeline: the level keeps its first run's samples, at their
// times from the run's start; a reading from before it sits at 0. 3,000
// samples 100 ms apart, power i W, are averaged three at a time into
// 1,000 points: point k at 300·k ms, (3k + 1) W. A second run adds to the
// figures, not to the timeline.
func TestLevelTimeline(t *testing.T) {
	t0 := time.Unix(1000, 0)
	run := []Sample{{At: t0.Add(-50 * time.Millisecond), PowerWatts: 7, MemoryActivity: 0.25, HasMemoryActivity: true}}
	var long []Sample
	for i := range 3000 {
		long = append(long, Sample{At: t0.Add(time.Duration(i) * 100 * time.Millisecond), PowerWatts: float64(i)})
	}
	l := Level{}
	l.AddRun(t0, run, 1)
	l.AddRun(t0, long, 300)
	tl := l.GPU(10, 0).Timeline
	if len(tl) != 1 || tl[0].AtMs != 0 || tl[0].PowerWatts != 7 || tl[0].MemoryActivity == nil || *tl[0].MemoryActivity != 0.25 {
		t.Fatalf("first run's timeline %+v", tl)
	}
	l = Level{}
	l.AddRun(t0, long, 300)
	tl = l.GPU(10, 0).Timeline
	if len(tl) != 1000 {
		t.Fatalf("%d points, want 1000", len(tl))
	}
	for k, p := range tl {
		if !near(p.AtMs, float64(300*k)) || !near(p.PowerWatts, float64(3*k+1)) || p.MemoryActivity != nil {
			t.Fatalf("point %d = %+v, want at %d ms, %d W, no memory activity", k, p, 300*k, 3*k+1)
		}
	}
}

// TestDCGMSampler: a loopback exporter serving the recorded page is
// sampled until Close; the window holds its readings.
func TestDCGMSampler(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	page, err := os.ReadFile("testdata/dcgm-h100x2.prom")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write(page) }))
	defer srv.Close()
	t0 := time.Now()
	s := DCGM(context.Background(), srv.Client(), srv.URL+"/metrics", 10*time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.WaitSamples(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	w := s.Window(t0, time.Now())
	if len(w) < 3 || !near(w[0].PowerWatts, 800) || s.Source != "dcgm "+srv.URL+"/metrics" {
		t.Fatalf("window %+v from %s", w, s.Source)
	}
	if w := s.Window(time.Now().Add(time.Hour), time.Now().Add(2*time.Hour)); len(w) != 1 {
		t.Fatalf("a window after the last sample holds %d, want the reading in force", len(w))
	}
}

// TestNvidiaSMISampler: the scripted nvidia-smi on PATH prints two GPUs'
// lines every 100 ms; every two lines are one sample of 600 W, and Close
// ends the process.
func TestNvidiaSMISampler(t *testing.T) {
	dir, _ := filepath.Abs("testdata")
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	s, err := NvidiaSMI(context.Background(), 2, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.WaitSamples(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	w := s.Window(time.Time{}, time.Now())
	x := w[0]
	if len(w) < 2 || x.GPUs != 2 || x.PowerWatts != 600 || !near(x.MemoryActivity, 0.5) || !near(x.SMActivity, 0.8) ||
		x.MemoryUsedBytes != 61440*(1<<20) || x.MemClockMHz != 2619 {
		t.Fatalf("samples %+v", w)
	}
	t.Setenv("PATH", t.TempDir())
	if _, err := NvidiaSMI(context.Background(), 1, time.Second); err != ErrNoGPU {
		t.Fatalf("no nvidia-smi: %v", err)
	}
}
