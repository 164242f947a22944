package compare

import (
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/tokbench/tokbench/metrics"
)

// JSONSchema names the shape of Report.
const JSONSchema = "tokbench.compare/v1"

// Report is compare's output for programs: every comparison of a later run
// against the baseline, and the gate's verdicts. Changes use the same
// numbers as the text output; Rel is null when A is 0.
type Report struct {
	Schema      string     `json:"schema"`
	Alpha       float64    `json:"alpha"`
	MinChange   float64    `json:"min_change"` // a fraction: 0.02 is 2%
	Comparisons []JSONDiff `json:"comparisons"`
	Gate        *JSONGate  `json:"gate,omitempty"`
	// Tested counts the rows a test judged, over every comparison;
	// ByChance is how many of them would read significant with no change
	// at all (Diff.ByChance).
	Tested   int     `json:"tested"`
	ByChance float64 `json:"significant_by_chance"`
}

// JSONDiff is one Diff.
type JSONDiff struct {
	A          string      `json:"a"`
	B          string      `json:"b"`
	Mismatches []Mismatch  `json:"mismatches"`
	Warnings   []string    `json:"warnings,omitempty"`
	Levels     []JSONLevel `json:"levels"`
	// Significant counts the rows with a significant change.
	Significant int `json:"significant_changes"`
}

// JSONLevel is one level both runs have.
type JSONLevel struct {
	Load metrics.Load `json:"load"`
	Rows []JSONRow    `json:"rows"`
}

// JSONRow is one Row; A, B and the changes are null when Verdict is "n/a".
type JSONRow struct {
	Metric      string   `json:"metric"` // gate name: "ttft_p95", "output_tps"
	Unit        string   `json:"unit"`
	LowerBetter bool     `json:"lower_is_better"`
	A           *float64 `json:"a"`
	B           *float64 `json:"b"`
	Delta       *float64 `json:"delta"`
	Rel         *float64 `json:"rel"`
	Tested      bool     `json:"tested"`
	Test        string   `json:"test,omitempty"` // "per-run Welch t", "block bootstrap" or "Mann-Whitney U"
	P           *float64 `json:"p"`
	// CI is the 95% interval of B − A (per-run Welch t, or the block
	// bootstrap of a percentile).
	CI          *[2]float64 `json:"ci95,omitempty"`
	NA          int         `json:"n_a"`
	NB          int         `json:"n_b"`
	Significant bool        `json:"significant"`
	// Untested says why no test judged the row and what would let one
	// (Row.Untested); absent when a test did.
	Untested string `json:"untested,omitempty"`
	Verdict  string `json:"verdict"`
}

// JSONGate is the outcome of --fail-if.
type JSONGate struct {
	Conditions string     `json:"conditions"`
	Failed     bool       `json:"failed"`
	Trips      []JSONTrip `json:"checks"`
	// Unlike are the comparisons the gate judged whose runs are not like
	// for like, "B: field differs: A …, B …" each: its verdict compares
	// different workloads.
	Unlike []string `json:"not_like_for_like,omitempty"`
}

// JSONTrip is one condition at one level of one comparison.
type JSONTrip struct {
	B      string `json:"b"`
	Load   string `json:"load"`
	Cond   string `json:"condition"`
	Holds  bool   `json:"holds"`
	Fails  bool   `json:"fails"`
	Reason string `json:"reason"`
}

// JSON turns the diff into its JSON shape.
func (d *Diff) JSON() JSONDiff {
	out := JSONDiff{A: d.A.Dir, B: d.B.Dir, Mismatches: d.Mismatches, Levels: []JSONLevel{}}
	if out.Mismatches == nil {
		out.Mismatches = []Mismatch{}
	}
	out.Warnings = d.Warnings()
	for _, ld := range d.Levels {
		jl := JSONLevel{Load: ld.Load}
		for _, r := range ld.Rows {
			jr := JSONRow{Metric: r.Name(), Unit: r.Metric.Unit, LowerBetter: r.Metric.LowerBetter,
				Tested: r.Tested, NA: r.NA, NB: r.NB, Significant: r.Significant, Untested: r.Untested, Verdict: r.Verdict}
			if r.Verdict != Undefined {
				jr.A, jr.B, jr.Delta, jr.Rel = ptr(r.A), ptr(r.B), ptr(r.Delta), ptr(r.Rel)
			}
			if r.Tested {
				jr.P, jr.Test = ptr(r.P), r.Test
				if r.Test != "Mann-Whitney U" {
					jr.CI = &[2]float64{r.CILo, r.CIHi}
				}
			}
			if r.Significant {
				out.Significant++
			}
			jl.Rows = append(jl.Rows, jr)
		}
		out.Levels = append(out.Levels, jl)
	}
	return out
}

// ptr is a pointer to v, nil for NaN and infinities (JSON has no such
// numbers).
func ptr(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// Outcome is one run compared with the base: the comparison and, when
// conditions were given, each condition's verdict at each level.
type Outcome struct {
	B     *Run
	Diff  *Diff
	Trips []Trip
}

// All compares every run of others with base and checks conds (parsed
// from failIf) on each, returning the outcomes and the JSON report of
// them all. A gate fails when a condition holds significantly or holds and
// cannot be tested (Diff.Check); a run that
// shares no level with base is in Nothing, since nothing compared is no
// gate passed.
func All(base *Run, others []*Run, opt Options, conds []Condition, failIf string) ([]Outcome, Report, []string) {
	rep := Report{Schema: JSONSchema, Alpha: opt.Alpha, MinChange: opt.MinChange, Comparisons: []JSONDiff{}}
	if len(conds) > 0 {
		rep.Gate = &JSONGate{Conditions: failIf, Trips: []JSONTrip{}}
	}
	var outs []Outcome
	var nothing []string
	for _, b := range others {
		o := Outcome{B: b, Diff: Compare(base, b, opt)}
		if len(o.Diff.Levels) == 0 {
			nothing = append(nothing, b.Dir)
		}
		rep.Comparisons = append(rep.Comparisons, o.Diff.JSON())
		rep.Tested += o.Diff.Tested()
		rep.ByChance += o.Diff.ByChance()
		if len(conds) > 0 {
			for _, m := range o.Diff.Mismatches {
				rep.Gate.Unlike = append(rep.Gate.Unlike, fmt.Sprintf("%s: %s", b.Dir, m))
			}
			o.Trips = o.Diff.Check(conds)
			for _, t := range o.Trips {
				rep.Gate.Trips = append(rep.Gate.Trips, JSONTrip{B: b.Dir, Load: t.Load, Cond: t.Cond.Expr,
					Holds: t.Holds, Fails: t.Fails, Reason: t.Reason})
				if t.Fails {
					rep.Gate.Failed = true
				}
			}
		}
		outs = append(outs, o)
	}
	return outs, rep, nothing
}

// Failed are the gate's failures over every comparison, "B: reason" each,
// saying when the runs compared are not like for like.
func Failed(outs []Outcome) []string {
	var failed []string
	for _, o := range outs {
		for _, t := range o.Trips {
			if t.Fails {
				f := fmt.Sprintf("%s: %s", o.B.Dir, t.Reason)
				if len(o.Diff.Mismatches) > 0 {
					f += fmt.Sprintf(" (not like for like: %s)", o.Diff.unlike())
				}
				failed = append(failed, f)
			}
		}
	}
	return failed
}

// unlike names the fields in which the runs are not like for like.
func (d *Diff) unlike() string {
	fields := make([]string, len(d.Mismatches))
	for i, m := range d.Mismatches {
		fields[i] = m.Field
	}
	return strings.Join(fields, ", ")
}

// WriteText writes every comparison as text, then, with a gate
// (failIf), each condition's verdict; it returns the gate's failures.
func WriteText(w io.Writer, outs []Outcome, failIf string) ([]string, error) {
	for i, o := range outs {
		if i > 0 {
			if _, err := fmt.Fprintln(w, "\n"+strings.Repeat("=", 60)); err != nil {
				return nil, err
			}
		}
		if err := o.Diff.WriteText(w); err != nil {
			return nil, err
		}
		if failIf != "" {
			fmt.Fprintln(w, "\ngate --fail-if "+failIf)
			if n := len(o.Diff.Mismatches); n > 0 {
				fmt.Fprintf(w, "  WARNING: this gate compares runs that are not like for like (%s)\n", o.Diff.unlike())
			}
		}
		for _, t := range o.Trips {
			mark := "ok  "
			if t.Fails {
				mark = "FAIL"
			}
			if _, err := fmt.Fprintf(w, "  %s %s\n", mark, t.Reason); err != nil {
				return nil, err
			}
		}
	}
	return Failed(outs), nil
}
