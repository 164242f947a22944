package metrics

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// Capacity is the highest load at which a level meets every SLO,
// interpolated between the last passing and the first failing level.
type Capacity struct {
	Mode Mode `json:"mode"`
	// Value is the interpolated load (users or req/s); 0 when no level passed.
	Value float64 `json:"value"`
	// MeasuredPassing is the highest measured level that passed (0: none).
	MeasuredPassing float64 `json:"measured_passing"`
	// FirstFailing is the lowest measured level above it that failed (0: none).
	FirstFailing float64 `json:"first_failing,omitempty"`
	// LimitedBy is the objective that breaks first above the capacity.
	LimitedBy string `json:"limited_by,omitempty"`
	Statement string `json:"statement"`
}

// Knee is where aggregate throughput stops paying for lost per-user speed:
// the level that maximises aggregate output TPS × per-user decode TPS p50.
// Beyond it, each step up in load loses a larger share of every user's speed
// than it adds to the total.
type Knee struct {
	Mode      Mode    `json:"mode"`
	Value     float64 `json:"value"`
	OutputTPS float64 `json:"output_tps"`
	DecodeTPS float64 `json:"decode_tps_p50"`
	// Reached is false when the product still grows at the highest level
	// measured: the knee lies beyond it.
	Reached   bool   `json:"reached"`
	Statement string `json:"statement"`
}

// LoadValue is a level's position on the load axis: users or req/s.
func LoadValue(l Load) float64 {
	if l.Mode == ModeRate {
		return l.RateRPS
	}
	return float64(l.Concurrency)
}

func unitOf(mode Mode, v float64) string {
	if mode == ModeRate {
		return fmt.Sprintf("%s req/s", trim(v))
	}
	if v == 1 {
		return "1 user"
	}
	return fmt.Sprintf("%s users", trim(v))
}

func trim(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

// curve returns the levels of one mode sorted by load.
func curve(levels []Level, mode Mode) []*Level {
	var out []*Level
	for i := range levels {
		if levels[i].Load.Mode == mode {
			out = append(out, &levels[i])
		}
	}
	sort.SliceStable(out, func(a, b int) bool { return LoadValue(out[a].Load) < LoadValue(out[b].Load) })
	return out
}

// FindCapacity answers "how much load meets every SLO?" from levels that
// carry SLO verdicts (see ApplySLOs), for the mode of the first level: the
// highest level that passed, interpolated towards the next level above it,
// which failed. Levels below it that failed are named in the statement.
func FindCapacity(levels []Level, slos []SLO) *Capacity {
	if len(levels) == 0 || len(slos) == 0 {
		return nil
	}
	mode := levels[0].Load.Mode
	lv := curve(levels, mode)
	exprs := make([]string, len(slos))
	for i, o := range slos {
		exprs[i] = o.Expr
	}
	goal := strings.Join(exprs, " and ")
	c := &Capacity{Mode: mode}
	// The highest level that passed, wherever it lies: a lower level may
	// fail where a higher one passes (a decode rate that rises with the
	// batch, one slow level), and no level is left out of the verdict.
	pass := -1
	for i, l := range lv {
		if l.SLO != nil && l.SLO.Met {
			pass = i
		}
	}
	var below []string // the levels under the capacity that failed
	for _, l := range lv[:max(pass, 0)] {
		if l.SLO == nil || !l.SLO.Met {
			below = append(below, fmt.Sprintf("%s (%s)", unitOf(mode, LoadValue(l.Load)), firstBroken(l)))
		}
	}
	failedBelow := ""
	if len(below) > 0 {
		failedBelow = "; below it, " + strings.Join(below, ", ") + " did not"
	}
	if pass < 0 {
		first := lv[0]
		c.FirstFailing = LoadValue(first.Load)
		c.LimitedBy = firstBroken(first)
		c.Statement = fmt.Sprintf("no level meets %s: already at %s, %s", goal, unitOf(mode, c.FirstFailing), c.LimitedBy)
		return c
	}
	p := lv[pass]
	c.MeasuredPassing = LoadValue(p.Load)
	c.Value = c.MeasuredPassing
	if pass == len(lv)-1 {
		c.Statement = fmt.Sprintf("holds at least %s at %s (the highest level measured)%s", unitOf(mode, c.Value), goal, failedBelow)
		return c
	}
	f := lv[pass+1]
	c.FirstFailing = LoadValue(f.Load)
	best := c.FirstFailing
	for i, o := range slos {
		mp := o.Margin(p.SLO.Checks[i].Value)
		mf := o.Margin(f.SLO.Checks[i].Value)
		if f.SLO.Checks[i].Met || mf >= 0 {
			continue
		}
		x := c.MeasuredPassing + (c.FirstFailing-c.MeasuredPassing)*mp/(mp-mf)
		if x < best {
			best, c.LimitedBy = x, o.Expr
		}
	}
	if c.LimitedBy == "" { // failed for lack of completed requests
		c.LimitedBy = firstBroken(f)
	}
	c.Value = best
	if mode == ModeConcurrency {
		c.Value = math.Floor(best)
	}
	c.Statement = fmt.Sprintf("holds %s at %s (between %s, which passed, and %s, where %s broke)%s",
		unitOf(mode, c.Value), goal, trim(c.MeasuredPassing), trim(c.FirstFailing), c.LimitedBy, failedBelow)
	return c
}

func firstBroken(l *Level) string {
	if l.SLO == nil {
		return "no verdict"
	}
	for _, ch := range l.SLO.Checks {
		if !ch.Met {
			return fmt.Sprintf("%s (was %s)", ch.Expr, Figure(ch.Value))
		}
	}
	return "no request completed"
}

// FindKnee locates the knee of the degradation curve of the first level's
// mode and input length, where load varies: nil with fewer than three
// loads that completed requests (a context sweep at one load has no
// knee; see FindContextEffect).
func FindKnee(levels []Level) *Knee {
	if len(levels) == 0 {
		return nil
	}
	mode, in := levels[0].Load.Mode, levels[0].Load.InputTokens
	var lv []*Level
	loads := map[float64]bool{}
	for _, l := range curve(levels, mode) {
		if l.Load.InputTokens == in && l.Requests.Completed > 0 && l.DecodeTPS.Count > 0 {
			lv = append(lv, l)
			loads[LoadValue(l.Load)] = true
		}
	}
	if len(loads) < 3 {
		return nil
	}
	best := 0
	for i, l := range lv {
		if l.OutputTPS*l.DecodeTPS.P50 > lv[best].OutputTPS*lv[best].DecodeTPS.P50 {
			best = i
		}
	}
	b := lv[best]
	k := &Knee{Mode: mode, Value: LoadValue(b.Load), OutputTPS: b.OutputTPS, DecodeTPS: b.DecodeTPS.P50, Reached: best < len(lv)-1}
	if k.Reached {
		k.Statement = fmt.Sprintf("knee at %s: %.0f tok/s aggregate, %.1f tok/s per user (p50); more load loses more per-user speed than it adds in total",
			unitOf(mode, k.Value), k.OutputTPS, k.DecodeTPS)
	} else {
		k.Statement = fmt.Sprintf("no knee up to %s: aggregate TPS still pays for lost per-user speed at the highest level measured",
			unitOf(mode, k.Value))
	}
	return k
}

// ContextEffect is how a context-length sweep (--input-tokens 1k,8k,32k)
// slows decode and delays the first token at one load.
type ContextEffect struct {
	Load      Load           `json:"load"` // the load, InputTokens cleared
	Points    []ContextPoint `json:"points"`
	Statement string         `json:"statement"`
}

// ContextPoint is one input length of a context sweep.
type ContextPoint struct {
	InputTokens int     `json:"input_tokens"`
	DecodeTPS   float64 `json:"decode_tps_p50"`
	TTFTMs      float64 `json:"ttft_ms_p50"`
}

// FindContextEffect describes the context sweep of the first level's
// load: its levels of two or more input lengths, in order; nil without
// one.
func FindContextEffect(levels []Level) *ContextEffect {
	if len(levels) == 0 {
		return nil
	}
	at := levels[0].Load
	var pts []ContextPoint
	for _, l := range levels {
		if l.Load.Mode != at.Mode || LoadValue(l.Load) != LoadValue(at) || l.Load.InputTokens == 0 || l.DecodeTPS.Count == 0 {
			continue
		}
		pts = append(pts, ContextPoint{InputTokens: l.Load.InputTokens, DecodeTPS: l.DecodeTPS.P50, TTFTMs: l.TTFT.P50})
	}
	if len(pts) < 2 {
		return nil
	}
	sort.SliceStable(pts, func(i, j int) bool { return pts[i].InputTokens < pts[j].InputTokens })
	a, b := pts[0], pts[len(pts)-1]
	load := at
	load.InputTokens = 0
	return &ContextEffect{Load: load, Points: pts, Statement: fmt.Sprintf(
		"context at %s: from %d to %d input tokens decode p50 goes from %.1f to %.1f tok/s (%+.0f%%) and TTFT p50 from %.0f to %.0f ms",
		load, a.InputTokens, b.InputTokens, a.DecodeTPS, b.DecodeTPS, 100*(b.DecodeTPS/a.DecodeTPS-1), a.TTFTMs, b.TTFTMs)}
}

// LoadLess orders loads: concurrency levels before rate ones, then by
// input length (a context-length sweep keeps its groups), then by the
// level's value.
func LoadLess(a, b Load) bool {
	if a.Mode != b.Mode {
		return a.Mode != ModeRate
	}
	if a.InputTokens != b.InputTokens {
		return a.InputTokens < b.InputTokens
	}
	return LoadValue(a) < LoadValue(b)
}

// SortLevels puts levels in load order (see LoadLess) and returns where each went: newIndex[old] is
// the new place of the level that was at old (a sweep runs 1, 2, 4, 8,
// then 3). Levels of equal load keep their order.
func SortLevels(levels []Level) (newIndex []int, moved bool) {
	order := make([]int, len(levels))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return LoadLess(levels[order[a]].Load, levels[order[b]].Load) })
	newIndex = make([]int, len(levels))
	sorted := make([]Level, len(levels))
	for to, from := range order {
		newIndex[from] = to
		sorted[to] = levels[from]
		moved = moved || to != from
	}
	copy(levels, sorted)
	return newIndex, moved
}
