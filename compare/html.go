package compare

import (
	"io"

	"github.com/tokbench/tokbench/report"
)

// WriteHTML writes the comparison of outs (each a run against base) as
// one self-contained page: the runs' curves overlaid, and beside them
// each comparison's rows with their verdicts, and the like-for-like
// warnings.
func WriteHTML(w io.Writer, base *Run, outs []Outcome) error {
	runs := []report.CompareRun{{Name: base.Dir, Summary: base.Summary}}
	var tables []report.VerdictTable
	var warnings []string
	for _, o := range outs {
		runs = append(runs, report.CompareRun{Name: o.B.Dir, Summary: o.B.Summary})
		t := report.VerdictTable{Title: o.B.Dir + " against " + base.Dir}
		for _, lv := range o.Diff.Levels {
			for _, r := range lv.Rows {
				t.Rows = append(t.Rows, report.VerdictRow(lv.Load.String(), r.Name(), r.A, r.B, r.Rel, r.Verdict))
			}
		}
		tables = append(tables, t)
		for _, m := range o.Diff.Mismatches {
			warnings = append(warnings, o.B.Dir+" and "+base.Dir+" are not like for like: "+m.String())
		}
	}
	return report.WriteCompareHTML(w, runs, tables, warnings)
}
