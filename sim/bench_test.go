package sim

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// BenchmarkRealTimeStreams serves N concurrent streams (Llama 3.1 8B BF16
// on one H100, batch up to 512, 64 output tokens each) over loopback HTTP to
// a load generator in another process (sim/internal/rtload, built by the
// benchmark), and reports how late each flush is against the engine's token
// schedule in steady state (from each stream's 9th token on): late_p50_us,
// late_p99_us, late_max_us; wake_p99_us, how late the engine loop itself
// woke for each step; step_ms, the mean engine step (prefill included);
// cpu_us/flush, the server process's CPU time (engine spin included) per
// stream flush; client_cpu_us/flush, the load generator's.
//
//	go test -run '^$' -bench RealTime -benchtime 1x ./sim/
func BenchmarkRealTimeStreams(b *testing.B) {
	bin := buildLoadGenerator(b)
	for _, n := range []int{100, 500} {
		b.Run(fmt.Sprintf("streams=%d", n), func(b *testing.B) { benchRealTime(b, bin, n) })
	}
}

// buildLoadGenerator compiles sim/internal/rtload into a temporary directory.
func buildLoadGenerator(b *testing.B) string {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "rtload")
	cmd := exec.Command("go", "build", "-o", bin, "./internal/rtload")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("build load generator: %v\n%s", err, out)
	}
	return bin
}

func benchRealTime(b *testing.B, bin string, streams int) {
	const tokens = 64
	var mu sync.Mutex
	var late, wake []time.Duration
	var steps int
	var stepSum time.Duration
	cfg := DefaultConfig()
	cfg.Engine.MaxNumSeqs = 512
	cfg.MaxInflight = 1024
	flushes := 0
	cfg.onFlush = func(d time.Duration, first int) {
		mu.Lock()
		flushes++
		mu.Unlock()
		if first < 8 {
			return // ramp-up: connections opening, prompts prefilling
		}
		mu.Lock()
		late = append(late, d)
		mu.Unlock()
	}
	cfg.onWake = func(d time.Duration) { wake = append(wake, d) } // engine goroutine only
	cfg.onStep = func(d time.Duration) { steps++; stepSum += d }  // engine goroutine only
	s, err := NewServer(cfg)
	if err != nil {
		b.Fatal(err)
	}
	base, err := s.Start(b.Context(), "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	var clientCPU time.Duration
	cpu0 := cpuTime(b)
	for b.Loop() {
		cmd := exec.CommandContext(b.Context(), bin, "-url", base, "-streams", strconv.Itoa(streams), "-tokens", strconv.Itoa(tokens))
		out, err := cmd.Output()
		if err != nil {
			b.Fatalf("load generator: %v\n%s", err, out)
		}
		var us int64
		if _, err := fmt.Sscanf(string(out), "cpu_us %d", &us); err != nil {
			b.Fatalf("load generator output %q: %v", out, err)
		}
		clientCPU += time.Duration(us) * time.Microsecond
	}
	cpu := cpuTime(b) - cpu0
	if err := s.Close(); err != nil {
		b.Error(err)
	}
	if len(late) == 0 || len(wake) == 0 {
		b.Fatal("no flushes recorded")
	}
	b.ReportMetric(quantileUs(late, 0.5), "late_p50_us")
	b.ReportMetric(quantileUs(late, 0.99), "late_p99_us")
	b.ReportMetric(quantileUs(late, 1), "late_max_us")
	b.ReportMetric(quantileUs(wake, 0.99), "wake_p99_us")
	b.ReportMetric(float64(stepSum)/float64(steps)/1e6, "step_ms")
	b.ReportMetric(float64(cpu.Microseconds())/float64(flushes), "cpu_us/flush")
	b.ReportMetric(float64(clientCPU.Microseconds())/float64(flushes), "client_cpu_us/flush")
}

// cpuTime is the user + system CPU time of this process (the server; the
// load generator runs in its own).
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func quantileUs(x []time.Duration, p float64) float64 {
	slices.Sort(x)
	return float64(x[int(p*float64(len(x)-1))].Microseconds())
}

// BenchmarkSimulateCurve computes a 1…256 concurrency curve (9 levels, 4
// requests per user, 1024 in / 128 out) in virtual time on the physics cost.
//
//	go test -run '^$' -bench SimulateCurve ./sim/
func BenchmarkSimulateCurve(b *testing.B) {
	cost, err := DeploymentCost(DefaultModel, DefaultQuant, DefaultHardware, 1)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		for c := 1; c <= 256; c *= 2 {
			_, err := RunClosedLoop(b.Context(), EngineConfig{}, cost,
				ClosedLoop{Users: c, Requests: 4 * c, PromptTokens: 1024, MaxTokens: 128})
			if err != nil {
				b.Fatal(err)
			}
		}
	}
}
