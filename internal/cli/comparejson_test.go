package cli

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/tokbench/tokbench/compare"
)

func TestCompareFormatJSON(t *testing.T) {
	a := writeCompareRun(t, "h100-sxm", 12, 50, 10, 0)
	slow := writeCompareRun(t, "a100-80gb", 12, 50, 15, 3) // decode 100 → 67 tok/s
	code, stdout, stderr := runCLI(context.Background(), nil, "compare", a, slow, "--format", "json", "--fail-if", "decode_tps_p50<-5%")
	if code != ExitFailure {
		t.Fatalf("exit %d, want 1 (the gate trips): %s", code, stderr)
	}
	var rep compare.Report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, stdout)
	}
	if rep.Schema != compare.JSONSchema || len(rep.Comparisons) != 1 || rep.Gate == nil || !rep.Gate.Failed {
		t.Fatalf("report = %+v", rep)
	}
	c := rep.Comparisons[0]
	if c.A != a || c.B != slow || len(c.Mismatches) != 1 || c.Mismatches[0].Field != "hardware" || c.Mismatches[0].B != "a100-80gb" {
		t.Errorf("comparison head = %+v", c)
	}
	var row *compare.JSONRow
	for i := range c.Levels[0].Rows {
		if c.Levels[0].Rows[i].Metric == "decode_tps_p50" {
			row = &c.Levels[0].Rows[i]
		}
	}
	// Decode TPS p50 falls from about 1000/10 to 1000/15: −33%.
	if row == nil || row.Verdict != compare.Worse || !row.Significant || row.P == nil || *row.P >= 0.05 ||
		row.Rel == nil || math.Abs(*row.Rel+1.0/3) > 0.02 || row.NA != 12 || row.NB != 12 {
		t.Errorf("decode_tps_p50 row = %+v", row)
	}
	if c.Significant < 1 {
		t.Errorf("significant_changes = %d", c.Significant)
	}
	if len(rep.Gate.Trips) != 1 || !rep.Gate.Trips[0].Fails || rep.Gate.Trips[0].Cond != "decode_tps_p50<-5%" {
		t.Errorf("gate checks = %+v", rep.Gate.Trips)
	}
	if !strings.Contains(stderr, "not like for like") {
		t.Errorf("stderr lacks the like-for-like warning: %q", stderr)
	}
	if code, _, stderr := runCLI(context.Background(), nil, "compare", a, slow, "--format", "yaml"); code != ExitUsage || !strings.Contains(stderr, "--format") {
		t.Errorf("--format yaml: exit %d, stderr %q", code, stderr)
	}
}
