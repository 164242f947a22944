package compare

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/tokbench/tokbench/metrics"
)

// Condition is one regression gate: "ttft_p95>+10%" holds when B's TTFT p95
// is more than 10% above A's; "decode_tps_p50<-5%" when B's decode TPS p50
// is more than 5% below A's. Without "%" the threshold is an absolute change
// in the metric's unit: "ttft_p50>+20" is 20 ms.
type Condition struct {
	Expr    string
	Metric  metrics.Metric
	Stat    string // "" for aggregates
	Op      string // ">", ">=", "<", "<="
	Value   float64
	Percent bool
}

var condRE = regexp.MustCompile(`^([a-z0-9_]+)\s*(>=|<=|>|<)\s*([+-]?[0-9]+(?:\.[0-9]+)?)\s*(%?)$`)

// ParseConditions parses a comma-separated list of conditions. Errors name
// the bad condition and what is wrong with it.
func ParseConditions(s string) ([]Condition, error) {
	var out []Condition
	for _, part := range strings.Split(s, ",") {
		expr := strings.TrimSpace(part)
		if expr == "" {
			continue
		}
		m := condRE.FindStringSubmatch(expr)
		if m == nil {
			return nil, fmt.Errorf("%q: want metric_stat, an operator (<, <=, >, >=) and a change such as +10%% or -5", expr)
		}
		c := Condition{Expr: expr, Op: m[2], Percent: m[4] == "%"}
		c.Value, _ = strconv.ParseFloat(m[3], 64)
		met, stat, err := metrics.ParseStat(m[1])
		if err != nil {
			return nil, fmt.Errorf("%q: %v", expr, err)
		}
		c.Metric, c.Stat = met, stat
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no condition in %q", s)
	}
	return out, nil
}

// Trip is the outcome of one condition at one level.
type Trip struct {
	Cond  Condition
	Load  string
	Row   Row
	Holds bool // the change crosses the threshold
	// Fails is Holds, the change is at least Options.MinChange, and
	// either a test calls it significant or none could judge it (an
	// aggregate, too few requests: Row.Untested says why): a gate that
	// cannot judge trips on its threshold.
	Fails  bool
	Reason string
}

// Check evaluates the conditions at every level both runs have. A condition
// fails when it holds, the change is at least Options.MinChange, and a test
// calls it significant; one that a test finds to be noise is reported with
// its evidence and does not fail. A condition that no test could judge (an
// aggregate, a percentile with too few requests beyond it, a run without
// requests.jsonl) fails on its threshold alone, and its reason says what
// would let it be tested; one on a statistic a run does not have fails.
func (d *Diff) Check(conds []Condition) []Trip {
	var out []Trip
	for i := range d.Levels {
		ld := &d.Levels[i]
		for _, c := range conds {
			r := ld.row(c.Metric, c.Stat, d.Options)
			t := Trip{Cond: c, Load: ld.Load.String(), Row: r}
			if r.Verdict == Undefined {
				// Nothing to judge is no gate passed.
				t.Fails = true
				t.Reason = fmt.Sprintf("%s: %s: no value in one of the runs, so it could not be judged: failing", t.Load, c.Expr)
				out = append(out, t)
				continue
			}
			change, unit := r.Delta, ""
			if c.Metric.Unit != "" {
				unit = " " + c.Metric.Unit
			}
			if c.Percent {
				change = 100 * r.Rel
			}
			switch c.Op {
			case ">":
				t.Holds = change > c.Value
			case ">=":
				t.Holds = change >= c.Value
			case "<":
				t.Holds = change < c.Value
			case "<=":
				t.Holds = change <= c.Value
			}
			if math.IsNaN(change) {
				t.Holds = false
			}
			// An absolute change in its own unit, to three figures: an
			// error rate's +0.048 is not "+0.0".
			shown := fmt.Sprintf("%+.3g%s", change, unit)
			if c.Percent {
				shown = fmt.Sprintf("%+.1f%%", change)
			}
			desc := fmt.Sprintf("%s: %s %s → %s (%s)", t.Load, r.Name(), metrics.Figure(r.A), metrics.Figure(r.B), shown)
			switch {
			case !t.Holds:
				t.Reason = fmt.Sprintf("%s: does not meet %s", desc, c.Expr)
			case !r.beyond(d.Options.MinChange):
				t.Reason = fmt.Sprintf("%s meets %s but changed less than --min-change %g%%: not failing", desc, c.Expr, 100*d.Options.MinChange)
			case r.Significant:
				t.Fails = true
				t.Reason = fmt.Sprintf("%s meets %s and is significant (%s)", desc, c.Expr, evidence(r))
			case r.Untested != "":
				// A gate that cannot judge does not pass: the threshold
				// is the user's own tolerance, and it is crossed.
				t.Fails = true
				t.Reason = fmt.Sprintf("%s meets %s and could not be tested (%s): failing on the threshold alone", desc, c.Expr, r.Untested)
			default:
				t.Reason = fmt.Sprintf("%s meets %s but is not significant (%s): not failing", desc, c.Expr, evidence(r))
			}
			out = append(out, t)
		}
	}
	return out
}

func evidence(r Row) string {
	switch r.Test {
	case "per-run Welch t":
		return fmt.Sprintf("per-run Welch t, 95%% interval [%s, %s], %d/%d runs", metrics.Figure(r.CILo), metrics.Figure(r.CIHi), r.NA, r.NB)
	case "block bootstrap":
		return fmt.Sprintf("block bootstrap, 95%% interval [%s, %s], n=%d/%d", metrics.Figure(r.CILo), metrics.Figure(r.CIHi), r.NA, r.NB)
	}
	if _, isQ := quantileName(r.Stat); isQ {
		return fmt.Sprintf("Mann-Whitney p %s over all n=%d/%d requests; too few beyond %s for its own interval", pValue(r.P), r.NA, r.NB, r.Stat)
	}
	return fmt.Sprintf("Mann-Whitney p %s, n=%d/%d", pValue(r.P), r.NA, r.NB)
}
