package load

import (
	"context"
	"encoding/json"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tokbench/tokbench/internal/fakellm"
	"github.com/tokbench/tokbench/metrics"
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

// TestSelfCheckFiresWhenStarved starves the client on purpose: one
// processor and four goroutines spinning on it for the whole level. The
// level must say that the client may have distorted it.
func TestSelfCheckFiresWhenStarved(t *testing.T) {
	srv := fakellm.New(fakellm.Script{TTFT: 5 * time.Millisecond, Gap: 2 * time.Millisecond, Tokens: 20, Usage: true})
	defer srv.Close()
	r := newRunner(t, srv)

	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for n := 0; !stop.Load(); n++ {
			}
		})
	}
	lv := Level{Load: metrics.Load{Mode: "concurrency", Concurrency: 2}, Requests: 10}
	res, err := r.RunLevel(context.Background(), 0, lv, fixedSource{maxTokens: 20})
	stop.Store(true)
	wg.Wait()
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
// self-check warning. The machine is shared (CI, other tests), so one of
// three attempts must be quiet; a client that always warned fails.
func TestSelfCheckQuietWhenIdle(t *testing.T) {
	srv := fakellm.New(fakellm.Script{TTFT: 5 * time.Millisecond, Gap: 2 * time.Millisecond, Tokens: 20, Usage: true})
	defer srv.Close()
	r := newRunner(t, srv)
	lv := Level{Load: metrics.Load{Mode: "concurrency", Concurrency: 1}, Requests: 5}
	for attempt := 1; ; attempt++ {
		res, err := r.RunLevel(context.Background(), 0, lv, fixedSource{maxTokens: 20})
		if err != nil {
			t.Fatal(err)
		}
		c := res.Level.Client
		if c == nil {
			t.Fatal("level has no client self-check")
		}
		w := selfCheckWarnings(res.Level)
		if len(w) == 0 {
			if c.TickLagMaxMs <= 0 {
				t.Errorf("quiet level measured no ticker lag: %+v", *c)
			}
			return
		}
		t.Logf("attempt %d warned: %q (%+v)", attempt, w, *c)
		if attempt == 3 {
			t.Fatalf("an idle client warned in 3 attempts: %q", w)
		}
	}
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
	for _, k := range []string{"cpu_utilization", "gc_pause_max_ms", "tick_lag_p99_ms"} {
		if _, ok := got.Client[k]; !ok {
			t.Errorf("summary level has no client.%s: %s", k, b)
		}
	}
}
