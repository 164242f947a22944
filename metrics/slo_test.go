package metrics

import (
	"strings"
	"testing"
)

func TestParseSLOs(t *testing.T) {
	got, err := ParseSLOs("ttft_p95<=500ms, tps_p5>=40,e2e_p99<=8s,itl_p50<=250us,error_rate<=0.01,ttft_median<=1.5s")
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		expr, metric, stat string
		atMost             bool
		value              float64
	}{
		{"ttft_p95<=500ms", "ttft", "p95", true, 500},
		{"tps_p5>=40", "decode_tps", "p5", false, 40},
		{"e2e_p99<=8s", "e2e", "p99", true, 8000},
		{"itl_p50<=250us", "itl", "p50", true, 0.25},
		{"error_rate<=0.01", "error_rate", "", true, 0.01},
		{"ttft_median<=1.5s", "ttft", "p50", true, 1500},
	}
	if len(got) != len(want) {
		t.Fatalf("ParseSLOs = %d objectives, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Expr != w.expr || g.Metric.Name != w.metric || g.Stat != w.stat || g.AtMost != w.atMost || g.Value != w.value {
			t.Errorf("objective %d = %q %s %q %v %v, want %+v", i, g.Expr, g.Metric.Name, g.Stat, g.AtMost, g.Value, w)
		}
	}
	for _, bad := range []string{"", "ttft<=5ms", "ttft_p95<500ms", "speed_p50>=3", "ttft_p95<=fast", "output_tps_p50>=3", "tps_p5>=-1", "ttft_p95<=5parsecs"} {
		if _, err := ParseSLOs(bad); err == nil {
			t.Errorf("ParseSLOs(%q) accepted", bad)
		} else if strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseSLOs(%q) error spans lines: %v", bad, err)
		}
	}
}

func recWith(ttft, e2e float64, tokens int) Record {
	r := Record{OK: true, TTFTMs: ttft, TTFVTMs: ttft, E2EMs: e2e, OutputTokens: tokens}
	step := (e2e - ttft) / float64(tokens-1)
	for i := 0; i < tokens; i++ {
		r.ChunkMs = append(r.ChunkMs, ttft+float64(i)*step)
		r.ChunkTokens = append(r.ChunkTokens, 1)
	}
	r.DoneMs = e2e
	return r
}

func TestApplySLOsAndGoodput(t *testing.T) {
	// decode TPS of each: 10 tokens, 9 gaps over (e2e − ttft).
	recs := []Record{
		recWith(100, 190, 10),  // 100 tok/s
		recWith(200, 290, 10),  // 100 tok/s
		recWith(300, 525, 10),  // 40 tok/s
		recWith(900, 1080, 10), // 50 tok/s, TTFT too slow
		{OK: false, ErrorClass: "http_500"},
	}
	lv := Summarize(Load{Mode: "concurrency", Concurrency: 4}, recs, 2.0)
	slos, _ := ParseSLOs("ttft_p50<=300ms,tps_p50>=60,error_rate<=0.1")
	ApplySLOs(&lv, recs, slos)
	// TTFT p50 of 100,200,300,900 = 250: met. TPS p50 of 40,50,100,100 = 75: met.
	// Error rate 1/5 = 0.2: broken.
	want := []SLOCheck{{"ttft_p50<=300ms", 250, true}, {"tps_p50>=60", 75, true}, {"error_rate<=0.1", 0.2, false}}
	for i, w := range want {
		if c := lv.SLO.Checks[i]; c.Expr != w.Expr || !near(c.Value, w.Value, 1e-9) || c.Met != w.Met {
			t.Errorf("check %d = %+v, want %+v", i, c, w)
		}
	}
	if lv.SLO.Met {
		t.Error("level met its SLOs with one broken")
	}
	// Per request: ttft ≤ 300 and tps ≥ 60 → the first two only: 2 / 2 s.
	if !near(lv.GoodputRPS, 1.0, 1e-12) {
		t.Errorf("goodput = %g, want 1", lv.GoodputRPS)
	}
}

func level(c int, ttftP95, tpsP5, outTPS, tpsP50 float64) Level {
	lv := Level{Load: Load{Mode: "concurrency", Concurrency: c}, OutputTPS: outTPS}
	lv.Requests.Completed = 10
	lv.TTFT = Stats{Count: 10, P95: ttftP95}
	lv.DecodeTPS = Stats{Count: 10, P5: tpsP5, P50: tpsP50}
	return lv
}

func TestCapacityInterpolates(t *testing.T) {
	slos, _ := ParseSLOs("tps_p5>=40,ttft_p95<=1s")
	levels := []Level{
		level(32, 1500, 30, 1200, 35),
		level(1, 100, 100, 100, 100),
		level(16, 600, 50, 900, 55),
		level(8, 300, 70, 600, 75),
	}
	for i := range levels {
		ApplySLOs(&levels[i], nil, slos)
	}
	c := FindCapacity(levels, slos)
	// tps_p5: margin at 16 = (50−40)/40 = 0.25, at 32 = (30−40)/40 = −0.25 → 24.
	// ttft_p95: margin at 16 = 0.4, at 32 = −0.5 → 16 + 16·0.4/0.9 = 23.1 → binds first.
	if c.MeasuredPassing != 16 || c.FirstFailing != 32 || c.LimitedBy != "ttft_p95<=1s" || c.Value != 23 {
		t.Fatalf("capacity = %+v", c)
	}
	if !strings.Contains(c.Statement, "holds 23 users at tps_p5>=40 and ttft_p95<=1s") {
		t.Errorf("statement = %q", c.Statement)
	}
	// Nothing passes.
	bad := []Level{level(1, 5000, 10, 10, 10)}
	ApplySLOs(&bad[0], nil, slos)
	if c := FindCapacity(bad, slos); c.Value != 0 || !strings.Contains(c.Statement, "no level meets") {
		t.Errorf("capacity with no passing level = %+v", c)
	}
}

func TestKnee(t *testing.T) {
	levels := []Level{
		level(1, 0, 0, 100, 100),    // product 10,000
		level(4, 0, 0, 380, 95),     // 36,100
		level(16, 0, 0, 1200, 75),   // 90,000  ← knee
		level(64, 0, 0, 1500, 23.4), // 35,100
	}
	k := FindKnee(levels)
	if k == nil || k.Value != 16 || !k.Reached || k.OutputTPS != 1200 {
		t.Fatalf("knee = %+v", k)
	}
	if k := FindKnee(levels[:3]); k.Value != 16 || k.Reached {
		t.Errorf("knee at the last level = %+v, want not reached", k)
	}
	if FindKnee(levels[:2]) != nil {
		t.Error("knee from two levels")
	}
}

func TestMedianOfRuns(t *testing.T) {
	a := level(4, 100, 50, 1000, 60)
	b := level(4, 300, 40, 1400, 70)
	c := level(4, 200, 45, 1100, 65)
	for i, l := range []*Level{&a, &b, &c} {
		l.DurationS = float64(i + 1)
		l.GoodputRPS = float64(10 * (i + 1))
		l.Requests.Sent = 10
	}
	slos, _ := ParseSLOs("ttft_p95<=250ms")
	m := MedianOfRuns([]Level{a, b, c}, slos)
	if m.TTFT.P95 != 200 || m.DecodeTPS.P5 != 45 || m.OutputTPS != 1100 || m.DurationS != 2 || m.GoodputRPS != 20 {
		t.Errorf("median level: ttft p95 %g, tps p5 %g, out %g, dur %g, goodput %g", m.TTFT.P95, m.DecodeTPS.P5, m.OutputTPS, m.DurationS, m.GoodputRPS)
	}
	if m.Requests.Sent != 30 || m.Requests.Completed != 30 || m.TTFT.Count != 30 {
		t.Errorf("counts not summed: %+v, ttft count %d", m.Requests, m.TTFT.Count)
	}
	if sp := m.Repeats.Spread["ttft_p95"]; m.Repeats.Runs != 3 || sp != [2]float64{100, 300} {
		t.Errorf("repeats = %+v", m.Repeats)
	}
	if m.SLO == nil || !m.SLO.Met || m.SLO.Checks[0].Value != 200 {
		t.Errorf("SLO on the median = %+v", m.SLO)
	}
}

// TestMeanOfRuns: the mean of the runs' values, not their median, and
// the fold named in Repeats.
func TestMeanOfRuns(t *testing.T) {
	a := level(4, 100, 50, 1000, 60)
	b := level(4, 400, 40, 1400, 70)
	c := level(4, 100, 45, 1000, 65)
	m := MeanOfRuns([]Level{a, b, c}, nil)
	if m.TTFT.P95 != 200 || m.DecodeTPS.P5 != 45 || m.OutputTPS != 3400.0/3 || m.Repeats.Fold != "mean" {
		t.Errorf("mean level: ttft p95 %g, tps p5 %g, out %g, fold %q", m.TTFT.P95, m.DecodeTPS.P5, m.OutputTPS, m.Repeats.Fold)
	}
	if MedianOfRuns([]Level{a, b, c}, nil).TTFT.P95 != 100 {
		t.Error("the median fold changed")
	}
}

func TestCostOf(t *testing.T) {
	lv := Level{InputTokens: 2_000_000, OutputTokens: 500_000, DurationS: 3600, OutputTPS: 1000}
	c := CostOf(&lv, Prices{InputPerMillion: 0.5, OutputPerMillion: 2})
	// 2M × 0.5 + 0.5M × 2 = 2.0 in total; per million output: 2.0 / 0.5 = 4.
	if c.Total != 2 || c.PerMillionOutput != 4 || c.Basis != "token prices" {
		t.Errorf("token-price cost = %+v", c)
	}
	g := CostOf(&lv, Prices{GPUHour: 3.6, GPUs: 2})
	// 2 GPUs × 3.6/h = 7.2/h; 1000 tok/s = 3.6M tok/h → 2 per million; one hour costs 7.2.
	if !near(g.PerMillionOutput, 2, 1e-9) || !near(g.Total, 7.2, 1e-9) {
		t.Errorf("gpu-hour cost = %+v", g)
	}
	if CostOf(&lv, Prices{}) != nil {
		t.Error("cost without prices")
	}
}

func FuzzParseSLOs(f *testing.F) {
	for _, s := range []string{"ttft_p95<=500ms,tps_p5>=40", "e2e_p99<=8s", "error_rate<=0.01", "itl_mean<=2us", ">=", "x_p5>=1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		slos, err := ParseSLOs(s)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error for %q", s)
			}
			return
		}
		for _, o := range slos {
			if o.Value < 0 || o.Metric.Name == "" {
				t.Fatalf("ParseSLOs(%q) gave %+v", s, o)
			}
			// A parsed objective parses again to itself.
			again, err := ParseSLOs(o.Expr)
			if err != nil || len(again) != 1 || !sameSLO(again[0], o) {
				t.Fatalf("round trip of %q: %+v, %v", o.Expr, again, err)
			}
		}
	})
}

// TestCapacityConsidersEveryLevel is issue 34's voice case: c=1 misses
// tps_p5>=60 at 56.78 while c=4 meets both objectives (TTFT p95 61.8 ms,
// tps_p5 88.8) and c=16 misses again. The capacity is c=4's, and the
// statement names the level below it that failed.
func TestCapacityConsidersEveryLevel(t *testing.T) {
	slos, _ := ParseSLOs("ttft_p95<=150ms,tps_p5>=60")
	levels := []Level{
		level(1, 40, 56.78, 60, 70),
		level(4, 61.8, 88.8, 400, 100),
		level(16, 400, 30, 900, 45),
	}
	for i := range levels {
		ApplySLOs(&levels[i], nil, slos)
	}
	c := FindCapacity(levels, slos)
	// ttft_p95: margin at 4 = (150−61.8)/150 = 0.588, at 16 = −1.667 → 4 + 12·0.588/2.255 = 7.13;
	// tps_p5: at 4 = 0.48, at 16 = −0.5 → 4 + 12·0.48/0.98 = 9.88: TTFT binds, 7 users.
	if c.MeasuredPassing != 4 || c.FirstFailing != 16 || c.Value != 7 || c.LimitedBy != "ttft_p95<=150ms" {
		t.Fatalf("capacity = %+v, want 7 users between 4 and 16", c)
	}
	want := "holds 7 users at ttft_p95<=150ms and tps_p5>=60 (between 4, which passed, and 16, where ttft_p95<=150ms broke); below it, 1 user (tps_p5>=60 (was 56.78)) did not"
	if c.Statement != want {
		t.Errorf("statement = %q\nwant        %q", c.Statement, want)
	}
	// The highest level passing: "at least", and the failure below named.
	c = FindCapacity(levels[:2], slos)
	if c.MeasuredPassing != 4 || c.Value != 4 || !strings.Contains(c.Statement, "holds at least 4 users") || !strings.Contains(c.Statement, "below it, 1 user") {
		t.Errorf("c=1,4: capacity = %+v", c)
	}
}

// sameSLO compares two objectives field by field (a Metric holds funcs).
func sameSLO(a, b SLO) bool {
	return a.Expr == b.Expr && a.Metric.Name == b.Metric.Name && a.Stat == b.Stat && a.AtMost == b.AtMost && a.Value == b.Value
}
