package compare

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"github.com/tokbench/tokbench/metrics"
)

// WriteText writes the diff for people: the two runs, loud warnings when
// they are not like for like, a table per level with A, B, the change and a
// verdict, and a closing line that says whether anything changed
// significantly.
func (d *Diff) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "A: %s  (%s)\n", d.A.Dir, describe(d.A))
	fmt.Fprintf(w, "B: %s  (%s)\n", d.B.Dir, describe(d.B))
	for _, m := range d.Mismatches {
		fmt.Fprintf(w, "WARNING: not like for like: %s\n", m)
	}
	for _, wn := range d.Warnings() {
		fmt.Fprintf(w, "warning: %s\n", wn)
	}
	if len(d.Levels) == 0 {
		fmt.Fprintln(w, "\nno load level in common: nothing to compare")
		return nil
	}
	for _, ld := range d.Levels {
		fmt.Fprintf(w, "\n%s\n", ld.Load)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "metric\tA\tB\tchange\tverdict\t95% interval of B − A, or p\t")
		for _, r := range ld.Rows {
			name := r.Metric.Label
			if r.Stat != "" {
				name += " " + r.Stat
			}
			if r.Metric.Unit != "" {
				name += " " + r.Metric.Unit
			}
			if r.Verdict == Undefined {
				fmt.Fprintf(tw, "%s\t-\t-\t\t%s\t\t\n", name, Undefined)
				continue
			}
			p := ""
			switch {
			case r.Test == "block bootstrap" || r.Test == "per-run Welch t":
				p = fmt.Sprintf("[%s, %s]", metrics.Figure(r.CILo), metrics.Figure(r.CIHi))
			case r.Tested && r.Untested != "":
				p = "p " + pValue(r.P) + ", all requests; untested"
			case r.Tested:
				p = "p " + pValue(r.P)
			case r.Untested != "" && !r.Metric.Aggregate():
				p = "untested"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t\n", name, metrics.Figure(r.A), metrics.Figure(r.B), fmtChange(r), r.Verdict, p)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintln(w)
	var untested []string
	for _, ld := range d.Levels {
		for _, r := range ld.Rows {
			if strings.HasSuffix(r.Verdict, "?") && r.Metric.Aggregate() {
				untested = append(untested, fmt.Sprintf("%s %s", ld.Load, r.Name()))
			}
		}
	}
	if len(untested) > 0 {
		fmt.Fprintf(w, "better? and worse? (%s): an aggregate, one value per level with no per-request samples, moved by %g%% or more; "+
			"no test can tell that from noise, so it is not counted as a change (repeat the runs, --repeat, to test it)\n",
			strings.Join(untested, ", "), 100*d.Options.MinChange)
	}
	// What was tested, and how many calls chance alone would make: at
	// alpha, about alpha × tests rows read "significant" with no change.
	if tests := d.Tested(); tests > 0 {
		fmt.Fprintf(w, "%d comparisons tested. A row is a change when the 95%% interval of B − A excludes 0 and the change is at least %g%%: "+
			"with 3 or more runs a side (--repeat), by Welch's t over one value per run; else, for a percentile with at least %d requests beyond it on each side, "+
			"from a block bootstrap (%d resamples of blocks of consecutive requests, so requests that ran together stay together; it assumes blocks, not requests, are independent); "+
			"other rows by Mann-Whitney U (alpha %g), and a percentile with fewer beyond it by Mann-Whitney U over all requests, "+
			"which calls a change only when they all moved and else leaves the row untested. About %.1f would be called a change by chance alone\n",
			tests, 100*d.Options.MinChange, minBeyond, bootstrapResamples, d.Options.Alpha, d.ByChance())
	}
	if n := d.untestedChanges(); n > 0 {
		rows := "rows"
		if n == 1 {
			rows = "row"
		}
		fmt.Fprintf(w, "%d %s changed by %g%% or more and could not be tested (better? or worse?: no test judged them; --format json says why of each)\n",
			n, rows, 100*d.Options.MinChange)
	}
	ch := d.Changes()
	if len(ch) == 0 {
		fmt.Fprintf(w, "no significant change (changes under %g%% ignored)\n", 100*d.Options.MinChange)
		return nil
	}
	var parts []string
	for _, c := range ch {
		parts = append(parts, fmt.Sprintf("%s %s %s %s", c.Load, c.Row.Name(), fmtChange(c.Row), c.Row.Verdict))
	}
	_, err := fmt.Fprintf(w, "significant changes: %s\n", strings.Join(parts, "; "))
	return err
}

func fmtChange(r Row) string {
	if math.IsNaN(r.Rel) {
		return fmt.Sprintf("%+.3g", r.Delta)
	}
	return fmt.Sprintf("%+.1f%%", 100*r.Rel)
}

func describe(r *Run) string {
	t := r.Summary.Target
	parts := []string{"model " + orNone(t.Model), "api " + orNone(t.API)}
	if t.Simulated {
		parts = append(parts, "simulated")
	}
	for _, k := range []string{"hardware", "quant", "gpus", "engine", "images", "audio_seconds", "label"} {
		if v := r.Meta.Meta[k]; v != "" {
			parts = append(parts, k+" "+v)
		}
	}
	return strings.Join(parts, ", ")
}

// Tested counts the rows a test judged.
func (d *Diff) Tested() int {
	n := 0
	for _, ld := range d.Levels {
		for _, r := range ld.Rows {
			if r.Tested {
				n++
			}
		}
	}
	return n
}

// untestedChanges counts the rows beyond MinChange that no test judged.
func (d *Diff) untestedChanges() int {
	n := 0
	for _, ld := range d.Levels {
		for _, r := range ld.Rows {
			if r.Untested != "" && r.Verdict != NoChange && r.Verdict != Undefined {
				n++
			}
		}
	}
	return n
}

// ByChance is how many tested rows would read as a change with none at
// all: 5% of those judged by a 95% interval, alpha of those by a p-value.
func (d *Diff) ByChance() float64 {
	n := 0.0
	for _, ld := range d.Levels {
		for _, r := range ld.Rows {
			switch {
			case !r.Tested:
			case r.Test == "Mann-Whitney U":
				n += d.Options.Alpha
			default:
				n += 0.05
			}
		}
	}
	return n
}

// pValue is a p-value in plain notation: below 0.001 it is "<0.001".
func pValue(p float64) string {
	if p < 0.001 {
		return "<0.001"
	}
	return fmt.Sprintf("%.3f", p)
}
