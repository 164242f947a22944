package compare

import (
	"math"
	"os"
	"strings"
	"testing"

	"github.com/tokbench/tokbench/metrics"
)

func readVLLMFile(t *testing.T, name string) *Imported {
	t.Helper()
	f, err := os.Open("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	imp, err := ReadVLLM(f, name)
	if err != nil {
		t.Fatalf("ReadVLLM(%s): %v", name, err)
	}
	return imp
}

func approx(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

// The fixture: 4 requests at max_concurrency 2 over 2 s; three complete
// with TTFT 100, 200, 300 ms and 4 tokens in 4 chunks 10/10/10, 20/20/20
// and 10/30/20 ms apart (decode TPS 3/0.03 = 100, 50, 50); one failed with
// HTTP 503.
func TestReadVLLMDetailed(t *testing.T) {
	imp := readVLLMFile(t, "vllm-detailed.json")
	if !imp.Detailed || len(imp.Records) != 4 || len(imp.Summary.Levels) != 1 {
		t.Fatalf("detailed %v, %d records, %d levels", imp.Detailed, len(imp.Records), len(imp.Summary.Levels))
	}
	lv := imp.Summary.Levels[0]
	if want := (metrics.Load{Mode: "concurrency", Concurrency: 2}); lv.Load != want {
		t.Errorf("load = %+v, want %+v", lv.Load, want)
	}
	if lv.Requests.Sent != 4 || lv.Requests.Completed != 3 || lv.Requests.Failed != 1 || lv.Requests.Errors["vllm_error"] != 1 {
		t.Errorf("requests = %+v", lv.Requests)
	}
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		// Recomputed from the lists, they match the file's own aggregates.
		{"ttft p50", lv.TTFT.P50, 200}, {"ttft p99", lv.TTFT.P99, 298}, {"ttft mean", lv.TTFT.Mean, 200},
		{"e2e p50", lv.E2E.P50, 260}, {"e2e p99", lv.E2E.P99, 358},
		{"tpot p50", lv.TPOT.P50, 20}, {"tpot mean", lv.TPOT.Mean, 50.0 / 3},
		{"itl p50", lv.ITL.P50, 20}, {"itl mean", lv.ITL.Mean, 150.0 / 9},
		{"decode p50", lv.DecodeTPS.P50, 50}, {"decode max", lv.DecodeTPS.Max, 100}, {"decode mean", lv.DecodeTPS.Mean, 200.0 / 3},
		{"output tps", lv.OutputTPS, 6}, {"request rps", lv.RequestRPS, 1.5}, {"error rate", lv.ErrorRate, 0.25},
		{"duration", lv.DurationS, 2},
	} {
		if !approx(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	r := imp.Records[2]
	if r.Load != lv.Load {
		t.Errorf("record load = %+v, want the level's %+v", r.Load, lv.Load)
	}
	if !r.OK || !approx(r.OffsetMs, 150) || len(r.ChunkMs) != 4 || !approx(r.ChunkMs[3], 360) || r.OutputTokens != 4 || r.InputTokens != 128 {
		t.Errorf("record 2 = %+v", r)
	}
	if f := imp.Records[3]; f.OK || f.Error != "HTTP 503: Service Unavailable" || !approx(f.OffsetMs, 400) {
		t.Errorf("failed record = %+v", f)
	}
	tg := imp.Summary.Target
	if tg.API != "openai-chat" || tg.Model != "meta-llama/Llama-3.1-8B-Instruct" || tg.Simulated {
		t.Errorf("target = %+v", tg)
	}
	if m := imp.Run.Meta; m["input_tokens"] != "128" || m["output_tokens"] != "4" {
		t.Errorf("meta = %v", m)
	}
	if imp.Run.StartedAt.IsZero() || imp.Run.Config["vllm_max_concurrency"] != 2.0 {
		t.Errorf("run = %+v", imp.Run)
	}
	if len(imp.Summary.Warnings) != 0 {
		t.Errorf("warnings = %q, want none", imp.Summary.Warnings)
	}
}

func TestReadVLLMAggregatesOnly(t *testing.T) {
	imp := readVLLMFile(t, "vllm-aggregate.json")
	if imp.Detailed || imp.Records != nil {
		t.Fatalf("detailed %v, %d records: want aggregates only", imp.Detailed, len(imp.Records))
	}
	lv := imp.Summary.Levels[0]
	if lv.Requests.Sent != 4 || lv.Requests.Completed != 3 || lv.Requests.Failed != 1 {
		t.Errorf("requests = %+v", lv.Requests)
	}
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"ttft p50", lv.TTFT.P50, 200}, {"ttft p95", lv.TTFT.P95, 290}, {"ttft p99", lv.TTFT.P99, 298}, {"ttft mean", lv.TTFT.Mean, 200},
		{"tpot p50", lv.TPOT.P50, 20}, {"e2e p99", lv.E2E.P99, 358},
		// Decode TPS from TPOT: p50 = 1000/median TPOT, p5 = 1000/p95 TPOT,
		// p1 unknown (no p99 → p1 mapping in Stats).
		{"decode p50", lv.DecodeTPS.P50, 50}, {"decode p5", lv.DecodeTPS.P5, 50},
		{"output tps", lv.OutputTPS, 6}, {"request rps", lv.RequestRPS, 1.5},
	} {
		if !approx(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if lv.TTFT.Count != 3 || lv.DecodeTPS.Count != 3 {
		t.Errorf("counts: ttft %d, decode %d, want 3", lv.TTFT.Count, lv.DecodeTPS.Count)
	}
	if len(imp.Summary.Warnings) != 1 || !strings.Contains(imp.Summary.Warnings[0], "--save-detailed") {
		t.Errorf("warnings = %q, want one naming --save-detailed", imp.Summary.Warnings)
	}
}

func TestReadVLLMRate(t *testing.T) {
	in := `{"request_rate": 4, "burstiness": 0.5, "max_concurrency": null, "duration": 1, "completed": 1, "mean_ttft_ms": 5}`
	imp, err := ReadVLLM(strings.NewReader(in), "x.json")
	if err != nil {
		t.Fatal(err)
	}
	if want := (metrics.Load{Mode: "rate", RateRPS: 4, Arrival: "gamma"}); imp.Summary.Levels[0].Load != want {
		t.Errorf("load = %+v, want %+v", imp.Summary.Levels[0].Load, want)
	}
	for _, bad := range []string{`[1,2]`, `{"duration": 0}`, `{"duration": 1, "completed": 1, "request_rate": "fast"}`,
		`{"duration": 1, "ttfts": [0.1, 0.2], "itls": [[]], "output_lens": [1, 1]}`} {
		if _, err := ReadVLLM(strings.NewReader(bad), "bad.json"); err == nil || !strings.Contains(err.Error(), "bad.json") {
			t.Errorf("ReadVLLM(%s) = %v, want an error naming bad.json", bad, err)
		}
	}
}

// A statistic the aggregates do not give (E2E p95 here) is n/a in compare,
// not a 100% drop, and a gate on it fails; the ones both runs know compare
// as usual.
func TestCompareWithAggregatesOnly(t *testing.T) {
	det, agg := readVLLMFile(t, "vllm-detailed.json"), readVLLMFile(t, "vllm-aggregate.json")
	d := Compare(&Run{Dir: "det", Meta: det.Run, Summary: det.Summary, Records: det.Records},
		&Run{Dir: "agg", Meta: agg.Run, Summary: agg.Summary}, Options{})
	if len(d.Levels) != 1 || len(d.Mismatches) != 0 {
		t.Fatalf("%d levels, mismatches %v", len(d.Levels), d.Mismatches)
	}
	for _, r := range d.Levels[0].Rows {
		switch r.Name() {
		case "e2e_p95":
			if r.Verdict != Undefined || r.A != 350 {
				t.Errorf("e2e_p95: A %v, verdict %q, want 350 and %q", r.A, r.Verdict, Undefined)
			}
		case "ttft_p99":
			if r.Verdict != NoChange || r.A != 298 || r.B != 298 || r.Tested {
				t.Errorf("ttft_p99 = %+v, want 298 on both sides, untested, no change", r)
			}
		}
	}
	// A gate on it cannot judge, and so does not pass.
	trips := d.Check([]Condition{mustCond(t, "e2e_p95>+10%")})
	if len(trips) != 1 || !trips[0].Fails || !strings.Contains(trips[0].Reason, "no value") {
		t.Errorf("gate on an unknown statistic: %+v, want a failure", trips)
	}
}

func mustCond(t *testing.T, s string) Condition {
	t.Helper()
	c, err := ParseConditions(s)
	if err != nil || len(c) != 1 {
		t.Fatalf("ParseConditions(%q) = %v, %v", s, c, err)
	}
	return c[0]
}
