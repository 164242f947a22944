package benchmark

import (
	"bytes"
	"cmp"
	"context"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokbench/tokbench/internal/fakellama"
	"github.com/tokbench/tokbench/live"
	"github.com/tokbench/tokbench/load"
	"github.com/tokbench/tokbench/workload"
)

// syncBuffer is a bytes.Buffer progress lines are written to from the
// ticker's goroutine and read after the run.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var progressRe = regexp.MustCompile(`^tokbench: (c=\d+)  (\d+)s(?: of ~?\d+s)?  (\d+)/(\d+) done  (\d+) in flight  (\d+) tok/s streaming`)

// TestLiveLineLlamaCpp: against a scripted llama-server (4 slots, 10 ms
// steps) with --api auto, which scrapes its /metrics and so runs each
// level's warm-up before the first scrape, the progress line labels the
// warm-up, starts each level at 0 done and a few seconds at most (not the
// last level's figures, not the time since 1970), and shows the tokens
// streaming at the rate the level measured: at c=8 the 4 slots stream 4
// tokens a step throughout.
func TestLiveLineLlamaCpp(t *testing.T) {
	srv := fakellama.New(fakellama.Config{Slots: 4, Step: 10 * time.Millisecond, Tokens: 40})
	defer srv.Close()
	p := testPlan(t, srv.URL+"/v1", LevelSpec{Concurrency: []int{4, 8}, Requests: 16, Warmup: 4})
	p.API, p.Model = "auto", ""
	checkLiveLine(t, p, true)
}

// TestLiveLineSimulator: the same against the embedded simulator, which
// tokbench does not scrape.
func TestLiveLineSimulator(t *testing.T) {
	p := testPlan(t, "", LevelSpec{Concurrency: []int{4, 8}, Requests: 48, Warmup: 4})
	p.Model = ""
	p.Workload.Output = workload.Fixed(64)
	checkLiveLine(t, p, false)
}

func checkLiveLine(t *testing.T, p *Plan, scraped bool) {
	t.Helper()
	var out syncBuffer
	res, err := Run(context.Background(), p, Hooks{Level: func(r *load.Runner, lv load.Level) func() {
		return live.Plain(&out, r, lv, 100*time.Millisecond)
	}})
	if err != nil {
		t.Fatal(err)
	}
	if want := 2 * p.levels()[0].Requests; len(res.Summary.Levels) != 2 || res.Completed() != want {
		t.Fatalf("levels %d, completed %d; want 2, %d; errors %v %v", len(res.Summary.Levels), res.Completed(), want, res.Summary.Levels[0].Requests.Errors, res.Summary.Levels[0].Requests.ErrorSamples)
	}
	if scraped && res.Summary.Levels[1].ServerMetrics == nil {
		t.Errorf("c=8: no server metrics: the run did not scrape /metrics, so the test tests nothing")
	}
	type line struct {
		done, el, inflight int
		tps                float64
	}
	lines := map[string][]line{}
	warmups := map[string]int{}
	level := ""
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasSuffix(l, " starting") {
			level = strings.TrimSuffix(strings.TrimPrefix(l, "tokbench: "), " starting")
			continue
		}
		if strings.HasPrefix(l, "tokbench: "+level+" warm-up") {
			warmups[level]++
			continue
		}
		m := progressRe.FindStringSubmatch(l)
		if m == nil || strings.HasSuffix(l, "(done)") {
			continue
		}
		if m[1] != level {
			t.Errorf("line %q during level %s", l, level)
		}
		el, _ := strconv.Atoi(m[2])
		done, _ := strconv.Atoi(m[3])
		inflight, _ := strconv.Atoi(m[5])
		tps, _ := strconv.ParseFloat(m[6], 64)
		lines[level] = append(lines[level], line{done, el, inflight, tps})
	}
	for i, name := range []string{"c=4", "c=8"} {
		ls := lines[name]
		if len(ls) < 5 {
			t.Fatalf("%s: %d progress lines, want 5 or more in\n%s", name, len(ls), out.String())
		}
		if warmups[name] == 0 {
			t.Errorf("%s: no line labels the warm-up:\n%s", name, out.String())
		}
		if ls[0].done != 0 || ls[0].el > 2 {
			t.Errorf("%s: first line %d done at %ds, want 0 done within 2s (not the last level's figures)", name, ls[0].done, ls[0].el)
		}
		for _, l := range ls {
			if l.el > 30 {
				t.Errorf("%s: a line says %ds since the level started", name, l.el)
			}
		}
		if i == 1 {
			// The lines with all 8 users in flight, the level's steady
			// state, whose rate leaves out its ramp and drain as they do.
			var tps []float64
			for _, l := range ls {
				if l.inflight == 8 {
					tps = append(tps, l.tps)
				}
			}
			if len(tps) < 3 {
				t.Fatalf("c=8: %d lines with 8 in flight, want 3 or more:\n%s", len(tps), out.String())
			}
			slices.Sort(tps)
			lv := res.Summary.Levels[1]
			med, want := tps[len(tps)/2], cmp.Or(lv.SteadyOutputTPS, lv.OutputTPS)
			// Within 10%, or within the lines' own spread where this
			// machine's load moved the rate more than that meanwhile.
			if med <= 0 {
				t.Fatalf("c=8: streaming p50 %.0f tok/s over %d lines with 8 in flight (%v)", med, len(tps), tps)
			}
			tol := max(0.10, (tps[len(tps)*3/4]-tps[len(tps)/4])/med)
			if math.Abs(med-want) > tol*want {
				t.Errorf("c=8: streaming p50 %.0f tok/s over %d lines (%v), want within %.0f%% of the level's steady %.0f (all of it %.0f)", med, len(tps), tps, 100*tol, want, lv.OutputTPS)
			}
		}
	}
}
