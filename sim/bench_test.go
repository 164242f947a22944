package sim

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// BenchmarkRealTimeStreams serves N concurrent streams (Llama 3.1 8B BF16
// on one H100, batch up to 512, 64 output tokens each) over loopback HTTP,
// clients in the same process, and reports how late each flush is against
// the engine's token schedule in steady state (from each stream's 9th token
// on): late_p50_us, late_p99_us, late_max_us; and wake_p99_us, how late the
// engine loop itself woke for each step.
//
//	go test -run '^$' -bench RealTime -benchtime 1x ./sim/
func BenchmarkRealTimeStreams(b *testing.B) {
	for _, n := range []int{100, 500} {
		b.Run(fmt.Sprintf("streams=%d", n), func(b *testing.B) { benchRealTime(b, n) })
	}
}

func benchRealTime(b *testing.B, streams int) {
	const tokens = 64
	var mu sync.Mutex
	var late, wake []time.Duration
	cfg := DefaultConfig()
	cfg.Engine.MaxNumSeqs = 512
	cfg.MaxInflight = 1024
	cfg.onFlush = func(d time.Duration, first int) {
		if first < 8 {
			return // ramp-up: connections opening, prompts prefilling
		}
		mu.Lock()
		late = append(late, d)
		mu.Unlock()
	}
	cfg.onWake = func(d time.Duration) { wake = append(wake, d) } // engine goroutine only
	s, err := NewServer(cfg)
	if err != nil {
		b.Fatal(err)
	}
	base, err := s.Start(b.Context(), "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: streams}}
	body := fmt.Sprintf(`{"messages":[{"role":"user","content":%q}],"max_tokens":%d,"stream":true}`,
		strings.TrimSpace(strings.Repeat("word ", 200)), tokens)
	var failures sync.Map
	for b.Loop() {
		var wg sync.WaitGroup
		for range streams {
			wg.Go(func() {
				if err := readStream(b.Context(), client, base+"/chat/completions", body); err != nil {
					failures.Store(err.Error(), true)
				}
			})
		}
		wg.Wait()
	}
	client.CloseIdleConnections()
	if err := s.Close(); err != nil {
		b.Error(err)
	}
	failures.Range(func(k, _ any) bool { b.Error(k); return true })
	if len(late) == 0 || len(wake) == 0 {
		b.Fatal("no flushes recorded")
	}
	b.ReportMetric(quantileUs(late, 0.5), "late_p50_us")
	b.ReportMetric(quantileUs(late, 0.99), "late_p99_us")
	b.ReportMetric(quantileUs(late, 1), "late_max_us")
	b.ReportMetric(quantileUs(wake, 0.99), "wake_p99_us")
}

func quantileUs(x []time.Duration, p float64) float64 {
	slices.Sort(x)
	return float64(x[int(p*float64(len(x)-1))].Microseconds())
}

func readStream(ctx context.Context, c *http.Client, url, body string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if sc.Text() == "data: [DONE]" {
			return nil
		}
	}
	return fmt.Errorf("stream ended without [DONE]: %v", sc.Err())
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
