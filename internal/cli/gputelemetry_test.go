package cli

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tokbench/tokbench/internal/fakellm"
	"github.com/tokbench/tokbench/results"
)

// TestBenchGPUTelemetry: bench samples a recorded DCGM exporter page (two
// H100s: 412.5 + 387.5 W, DRAM active 0.62 and 0.58, SM 0.81 and 0.77,
// 61,440 MiB each) served on loopback, and a scripted nvidia-smi on PATH
// (two GPUs: 350 + 250 W, memory 60% and 40%, SM 90% and 70%). The
// readings are constant, so a level's energy is exactly the power times
// its duration: J per output token, tokens per J and the energy cost at
// 0.12/kWh follow from summary.json's own duration and tokens.
func TestBenchGPUTelemetry(t *testing.T) {
	page, err := os.ReadFile(filepath.Join("..", "..", "telemetry", "testdata", "dcgm-h100x2.prom"))
	if err != nil {
		t.Fatal(err)
	}
	exporter := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write(page) }))
	t.Cleanup(exporter.Close)
	f := fakellm.New(fakellm.Script{TTFT: 5 * time.Millisecond, Gap: 2 * time.Millisecond, Tokens: 32, Usage: true})
	t.Cleanup(f.Close)
	scripted, _ := filepath.Abs(filepath.Join("..", "..", "telemetry", "testdata"))

	for _, c := range []struct {
		name, flag, source string
		path               bool // the scripted nvidia-smi on PATH
		watts, mem, sm     float64
		memSource          string
		usedBytes          float64
	}{
		{"dcgm", "dcgm=" + exporter.URL + "/metrics", "dcgm " + exporter.URL + "/metrics", false, 800, 0.60, 0.79, "DCGM_FI_PROF_DRAM_ACTIVE", 2 * 61440 * (1 << 20)},
		{"nvidia-smi auto", "auto", "nvidia-smi", true, 600, 0.50, 0.80, "nvidia-smi utilization.memory", 61440 * (1 << 20)},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.path {
				t.Setenv("PATH", scripted+string(os.PathListSeparator)+os.Getenv("PATH"))
			}
			dir := filepath.Join(t.TempDir(), "run")
			code, stdout, stderr := runCLI(context.Background(), nil, "bench", "--url", f.URL+"/v1", "--model", "m",
				"--hardware", "h100-sxm", "--params", "8", "--concurrency", "1,2", "--requests", "6", "--output-tokens", "32",
				"--gpu-telemetry", c.flag, "--energy-price", "0.12/kWh", "--out", dir)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			s, err := results.ReadSummary(dir)
			if err != nil {
				t.Fatal(err)
			}
			samples := 0
			for _, lv := range s.Levels {
				if lv.GPU != nil {
					samples += lv.GPU.Samples
				}
			}
			// One physics line names every input's source: the model, the
			// hardware's datasheet, the GPU counters.
			physicsLine := ""
			for line := range strings.Lines(stdout) {
				if strings.HasPrefix(line, "physics: ") {
					physicsLine = line
				}
			}
			if want := fmt.Sprintf("; GPU counters: %s, %d samples taken during 2 level(s) of this run\n", c.source, samples); !strings.HasPrefix(physicsLine, "physics: --params 8") ||
				!strings.Contains(physicsLine, "h100-sxm: NVIDIA H100") || !strings.HasSuffix(physicsLine, want) {
				t.Errorf("physics line %q, want the model's, the hardware's and %q", physicsLine, want)
			}
			for _, lv := range s.Levels {
				g := lv.GPU
				if g == nil {
					t.Fatalf("%s: no gpu figures; warnings %v", lv.Load, s.Warnings)
				}
				joules := c.watts * lv.DurationS
				perToken := joules / float64(lv.OutputTokens)
				for _, v := range []struct {
					name      string
					got, want float64
				}{
					{"power p50", g.PowerWattsP50, c.watts}, {"power max", g.PowerWattsMax, c.watts},
					{"memory activity", deref(g.MemoryActivity), c.mem}, {"SM activity", deref(g.SMActivity), c.sm},
					{"memory used", g.MemoryUsedBytes, c.usedBytes}, {"energy J", g.EnergyJoules, joules},
					{"J per output token", g.JoulesPerOutputToken, perToken}, {"tokens per J", g.OutputTokensPerJoule, 1 / perToken},
					{"cost per million", g.EnergyCostPerMillion, 0.12 * perToken * 1e6 / 3.6e6},
				} {
					if math.Abs(v.got-v.want) > 1e-9*math.Max(1, math.Abs(v.want)) {
						t.Errorf("%s %s = %.12g, want %.12g", lv.Load, v.name, v.got, v.want)
					}
				}
				if g.Source != c.source || g.MemoryActivitySource != c.memSource || g.GPUs != 2 || g.Samples < 1 {
					t.Errorf("%s: source %q (%q), %d GPUs, %d samples", lv.Load, g.Source, g.MemoryActivitySource, g.GPUs, g.Samples)
				}
				note := fmt.Sprintf("%s: GPU (%s, 2 GPU(s), %d samples): memory activity %.1f%% measured (%s) beside MBU %.1f%% computed; SM activity %.1f%%",
					lv.Load, c.source, g.Samples, 100*c.mem, c.memSource, 100*lv.Physics.MBU, 100*c.sm)
				if !strings.Contains(stdout, note) || !strings.Contains(stdout, fmt.Sprintf("%.4g J per output token", perToken)) {
					t.Errorf("table notes lack %q:\n%s", note, stdout)
				}
			}
		})
	}
	for _, args := range [][]string{
		{"--gpu-telemetry", "dcgm=gpu-host:9400"},
		{"--gpu-telemetry", "rocm"},
		{"--energy-price", "0.12/MWh"},
		{"--energy-price", "-1"},
	} {
		code, _, stderr := runCLI(context.Background(), nil, append([]string{"bench", "--url", f.URL + "/v1"}, args...)...)
		if code != ExitUsage || !strings.Contains(stderr, args[0]+":") || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%v: exit %d, %q", args, code, stderr)
		}
	}
}

func deref(p *float64) float64 {
	if p == nil {
		return math.NaN()
	}
	return *p
}
