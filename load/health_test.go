package load

import (
	"context"
	"encoding/json"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tokbench/tokbench/api"
	"github.com/tokbench/tokbench/internal/fakellm"
	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/wire"
)

func selfCheckWarnings(lv metrics.Level) []string {
	var w []string
	for _, s := range lv.Warnings {
		if strings.HasPrefix(s, "client self-check") {
			w = append(w, s)
		}
	}
	return w
}

// starved runs f on one processor with four goroutines spinning on it.
func starved(f func() (Result, error)) (Result, error) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for n := 0; !stop.Load(); n++ {
			}
		})
	}
	defer wg.Wait()
	defer stop.Store(true)
	return f()
}

// TestSelfCheckFiresWhenStarved starves the client on purpose: one
// processor and four goroutines spinning on it for the whole level. The
// level must say that the client may have distorted it.
func TestSelfCheckFiresWhenStarved(t *testing.T) {
	srv := fakellm.New(fakellm.Script{TTFT: 5 * time.Millisecond, Gap: 2 * time.Millisecond, Tokens: 20, Usage: true})
	defer srv.Close()
	r := newRunner(t, srv)

	lv := Level{Load: metrics.Load{Mode: "concurrency", Concurrency: 2}, Requests: 10}
	res, err := starved(func() (Result, error) { return r.RunLevel(context.Background(), 0, lv, fixedSource{maxTokens: 20}) })
	if err != nil {
		t.Fatal(err)
	}
	c := res.Level.Client
	if c == nil {
		t.Fatal("level has no client self-check")
	}
	t.Logf("starved: %+v", *c)
	if w := selfCheckWarnings(res.Level); len(w) == 0 {
		t.Errorf("no self-check warning for a starved client (%+v); warnings %q", *c, res.Level.Warnings)
	}
	if c.GOMAXPROCS != 1 || c.TickLagMaxMs <= 0 {
		t.Errorf("client block %+v: want GOMAXPROCS 1 and a measured lag", *c)
	}
}

// TestSelfCheckQuietWhenIdle: a light level on an unloaded client raises no
// self-check warning of lateness. It runs as bench does, with kernel
// receive stamps where the kernel grants them: then a few milliseconds of
// lateness (CI runs other packages' tests beside this one, and a host may
// pause a core for milliseconds) warn only if they merged chunks the
// server sent 10 ms apart, so an attempt with a hold that long proves
// nothing, and every other must be quiet (one in ten at least is). The
// ticker sees a hold late by as little as the hold less its period (a
// hold that begins just after a tick), so a lag of the gap less the
// period is already a hold of the gap. A write that took over 1 ms is not lateness but a fact the
// self-check reports of the machine (a paused core in a write on
// loopback), and is left out.
func TestSelfCheckQuietWhenIdle(t *testing.T) {
	const gap = 10 * time.Millisecond
	srv := fakellm.New(fakellm.Script{TTFT: 5 * time.Millisecond, Gap: gap, Tokens: 20, Usage: true})
	defer srv.Close()
	r := newRunner(t, srv)
	tr := wire.NewTransport()
	defer tr.CloseIdleConnections()
	r.Client.HTTP = &http.Client{Transport: tr}
	lv := Level{Load: metrics.Load{Mode: "concurrency", Concurrency: 1}, Requests: 5}
	for attempt := 1; attempt <= 10; attempt++ {
		res, err := r.RunLevel(context.Background(), 0, lv, fixedSource{maxTokens: 20})
		if err != nil {
			t.Fatal(err)
		}
		c := res.Level.Client
		if c == nil {
			t.Fatal("level has no client self-check")
		}
		if c.TickLagMaxMs <= 0 {
			t.Fatalf("the level measured no ticker lag: %+v", *c)
		}
		var w []string
		for _, s := range selfCheckWarnings(res.Level) {
			if !strings.HasPrefix(s, "client self-check: writing a request took") {
				w = append(w, s)
			}
		}
		if c.TickLagMaxMs >= float64((gap-tickPeriod)/time.Millisecond) {
			t.Logf("attempt %d: the machine paused (ticker late by up to %.3f ms); warnings %q", attempt, c.TickLagMaxMs, w)
			continue
		}
		if len(w) > 0 {
			t.Fatalf("a client late by %.3f ms at most warned: %q (%+v)", c.TickLagMaxMs, w, *c)
		}
		return
	}
	t.Skip("the machine paused for 10 ms or more in all 10 attempts: no level to judge")
}

// TestClientBlockInSummary: the figures land in summary.json under
// "client" with the documented names.
func TestClientBlockInSummary(t *testing.T) {
	srv := fakellm.New(fakellm.Script{TTFT: time.Millisecond, Gap: time.Millisecond, Tokens: 4, Usage: true})
	defer srv.Close()
	r := newRunner(t, srv)
	lv := Level{Load: metrics.Load{Mode: "rate", RateRPS: 100, Arrival: ArrivalConstant}, Requests: 5}
	res, err := r.RunLevel(context.Background(), 0, lv, fixedSource{maxTokens: 4})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(res.Level)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Client map[string]any `json:"client"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"cpu_utilization", "gc_pause_max_ms", "tick_lag_p99_ms", "kernel_receive_stamps", "first_chunks_sharing_stamp", "chunks_sharing_stamp"} {
		if _, ok := got.Client[k]; !ok {
			t.Errorf("summary level has no client.%s: %s", k, b)
		}
	}
}

// TestHealthWarnings: the rules, figure by figure. With kernel receive
// stamps a late client warns only when chunks also share stamps; without
// them lateness itself warns.
func TestHealthWarnings(t *testing.T) {
	late := metrics.ClientHealth{GOMAXPROCS: 2, TickLagP99Ms: 6, TickLagMaxMs: 21}
	cases := []struct {
		name string
		h    metrics.ClientHealth
		want []string // a substring of each expected warning, in order
	}{
		{"read stamps, late", late, []string{"scheduling lag p99 6.0 ms, max 21.0 ms"}},
		{"read stamps, GC pause", metrics.ClientHealth{GOMAXPROCS: 2, GCPauseMaxMs: 4.2}, []string{"pauses up to 4.2 ms"}},
		{"kernel stamps, late, chunks apart", func() metrics.ClientHealth {
			h := late
			h.KernelStamps, h.FirstChunksSharingStamp, h.ChunksSharingStamp = true, 0.005, 0.004
			return h
		}(), nil},
		{"kernel stamps, late, first chunks shared", func() metrics.ClientHealth {
			h := late
			h.KernelStamps, h.FirstChunksSharingStamp, h.ChunksSharingStamp = true, 0.6, 0.009
			return h
		}(), []string{"lag p99 6.0 ms, max 21.0 ms; GC pause max 0.0 ms) and 60.0% of first token chunks (0.9% of all) share their kernel receive stamp"}},
		{"kernel stamps, on time, chunks shared (server wrote them together)", metrics.ClientHealth{GOMAXPROCS: 2, TickLagP99Ms: 0.3, TickLagMaxMs: 1.5, GCPauseMaxMs: 0.5, KernelStamps: true, FirstChunksSharingStamp: 1, ChunksSharingStamp: 1}, nil},
		{"kernel stamps, one stall, chunks shared", metrics.ClientHealth{GOMAXPROCS: 2, TickLagP99Ms: 1.7, TickLagMaxMs: 2.6, KernelStamps: true, ChunksSharingStamp: 0.05}, []string{"lag p99 1.7 ms, max 2.6 ms; GC pause max 0.0 ms) and 0.0% of first token chunks (5.0% of all)"}},
		{"kernel stamps, GC pause, chunks shared", metrics.ClientHealth{GOMAXPROCS: 2, GCPauseMaxMs: 5, KernelStamps: true, ChunksSharingStamp: 0.2}, []string{"GC pause max 5.0 ms"}},
		{"busy cores", metrics.ClientHealth{GOMAXPROCS: 2, CPUUtilization: 0.9, KernelStamps: true}, []string{"used 90% of its 2 cores"}},
	}
	for _, c := range cases {
		got := healthWarnings(&c.h)
		if len(got) != len(c.want) {
			t.Errorf("%s: warnings %q, want %d", c.name, got, len(c.want))
			continue
		}
		for i, w := range c.want {
			if !strings.Contains(got[i], w) {
				t.Errorf("%s: warning %q lacks %q", c.name, got[i], w)
			}
		}
	}
}

// TestStampCountsShared: chunks with equal arrival stamps are counted as
// sharing one, and the first chunk separately.
func TestStampCountsShared(t *testing.T) {
	t0 := time.Now()
	at := func(ms ...int) []api.Chunk {
		var c []api.Chunk
		for _, m := range ms {
			c = append(c, api.Chunk{At: t0.Add(time.Duration(m) * time.Millisecond), Text: "x"})
		}
		return c
	}
	var s stampCounts
	s.add(&api.Response{Chunks: at(5, 5, 9, 12), KernelStamps: true}) // first shares with second
	s.add(&api.Response{Chunks: at(4, 8, 8, 8), KernelStamps: true})  // two share with the next
	s.add(&api.Response{Chunks: at(7), KernelStamps: false})
	s.add(&api.Response{}) // no chunk: not counted
	if s.responses.Load() != 3 || s.kernel.Load() != 2 || s.firstShared.Load() != 1 || s.chunks.Load() != 9 || s.shared.Load() != 3 {
		t.Errorf("counts: responses %d kernel %d firstShared %d chunks %d shared %d; want 3 2 1 9 3",
			s.responses.Load(), s.kernel.Load(), s.firstShared.Load(), s.chunks.Load(), s.shared.Load())
	}
}

// TestSelfCheckKernelStampsStarved starves a client that stamps with the
// kernel's receive instants: one processor, four spinning goroutines,
// streams with a chunk every 2 ms. It reads chunks late together, they
// share stamps, and the level says so.
func TestSelfCheckKernelStampsStarved(t *testing.T) {
	srv := fakellm.New(fakellm.Script{TTFT: 5 * time.Millisecond, Gap: 2 * time.Millisecond, Tokens: 20, Usage: true})
	defer srv.Close()
	r := newRunner(t, srv)
	tr := wire.NewTransport()
	t.Cleanup(tr.CloseIdleConnections)
	r.Client.HTTP = &http.Client{Transport: tr}

	lv := Level{Load: metrics.Load{Mode: "concurrency", Concurrency: 4}, Requests: 12}
	res, err := starved(func() (Result, error) { return r.RunLevel(context.Background(), 0, lv, fixedSource{maxTokens: 20}) })
	if err != nil {
		t.Fatal(err)
	}
	c := res.Level.Client
	if c == nil || !c.KernelStamps {
		t.Skipf("no kernel receive stamps here: %+v", c)
	}
	t.Logf("starved with kernel stamps: %+v", *c)
	if c.ChunksSharingStamp <= SharedStampWarn {
		t.Errorf("a starved client shared stamps on %.1f%% of chunks; want more than %.0f%%", 100*c.ChunksSharingStamp, 100*SharedStampWarn)
	}
	if w := selfCheckWarnings(res.Level); len(w) == 0 || !strings.Contains(strings.Join(w, " "), "share their kernel receive stamp") {
		t.Errorf("no shared-stamp warning for a starved client; warnings %q", res.Level.Warnings)
	}
}
