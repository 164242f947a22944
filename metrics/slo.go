package metrics

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// SLO is one service-level objective: a statistic of a metric compared with
// a threshold, e.g. "ttft_p95<=500ms" or "decode_tps_p5>=40".
type SLO struct {
	Expr   string  // as the user wrote it, normalised
	Metric Metric  // from Registry
	Stat   string  // "p95", "mean", …; empty for level aggregates such as output_tps
	AtMost bool    // true for <=, false for >=
	Value  float64 // threshold in the metric's unit (ms for times)
}

// SLOCheck is one SLO judged on one level.
type SLOCheck struct {
	Expr  string  `json:"expr"`
	Value float64 `json:"value"`
	Met   bool    `json:"met"`
}

// SLOResult is a level's verdict.
type SLOResult struct {
	Met    bool       `json:"met"`
	Checks []SLOCheck `json:"checks"`
}

// ParseSLOs parses a comma-separated list such as
// "ttft_p95<=500ms,tps_p5>=40,e2e_p99<=8s,error_rate<=0.01". Times accept
// us, ms, s and m (no unit means ms); rates are plain numbers.
func ParseSLOs(s string) ([]SLO, error) {
	var out []SLO
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		slo, err := parseSLO(part)
		if err != nil {
			return nil, err
		}
		out = append(out, slo)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no objective in %q", s)
	}
	return out, nil
}

func parseSLO(s string) (SLO, error) {
	op := ""
	i := strings.Index(s, "<=")
	if i >= 0 {
		op = "<="
	} else if i = strings.Index(s, ">="); i >= 0 {
		op = ">="
	} else {
		return SLO{}, fmt.Errorf("%q: want NAME<=VALUE or NAME>=VALUE, e.g. ttft_p95<=500ms", s)
	}
	lhs, rhs := strings.TrimSpace(s[:i]), strings.TrimSpace(s[i+2:])
	m, stat, err := ParseStat(lhs)
	if err != nil {
		return SLO{}, fmt.Errorf("%q: %v", s, err)
	}
	v, err := parseThreshold(rhs, m.Unit == "ms")
	if err != nil {
		return SLO{}, fmt.Errorf("%q: %v", s, err)
	}
	return SLO{Expr: lhs + op + rhs, Metric: m, Stat: stat, AtMost: op == "<=", Value: v}, nil
}

func parseThreshold(s string, isTime bool) (float64, error) {
	num, scale := s, 1.0
	if isTime {
		for _, u := range []struct {
			suffix string
			ms     float64
		}{{"us", 1e-3}, {"µs", 1e-3}, {"ms", 1}, {"s", 1000}, {"m", 60000}} {
			if strings.HasSuffix(s, u.suffix) {
				num, scale = strings.TrimSuffix(s, u.suffix), u.ms
				break
			}
		}
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		if isTime {
			return 0, fmt.Errorf("threshold %q is not a duration like 500ms or 2s", s)
		}
		return 0, fmt.Errorf("threshold %q is not a non-negative number", s)
	}
	return v * scale, nil
}

// Observed returns the value an SLO judges on a level.
func (o SLO) Observed(lv *Level) float64 {
	v, _ := o.Metric.Of(lv, o.Stat)
	return v
}

// Holds reports whether v satisfies the objective.
func (o SLO) Holds(v float64) bool {
	if o.AtMost {
		return v <= o.Value
	}
	return v >= o.Value
}

// Margin is how far v is inside the objective, relative to the threshold:
// positive when met, negative when broken (−0.5 is 50% past it).
func (o SLO) Margin(v float64) float64 {
	if o.Value == 0 {
		if o.Holds(v) {
			return 0
		}
		return -1
	}
	if o.AtMost {
		return (o.Value - v) / o.Value
	}
	return (v - o.Value) / o.Value
}

// perRequest returns a request's own value of the SLO's metric (a
// latency from the scheduled instant), and whether the SLO can judge the
// request by it at all.
func (o SLO) perRequest(r *Record) (float64, bool) {
	if o.Metric.Sample == nil {
		return 0, false
	}
	v, ok := o.Metric.Sample(r)
	if o.Metric.FromSchedule {
		v += r.QueueMs
	}
	return v, ok
}

// MeetsAll reports whether one completed request met every per-request
// objective (its own TTFT, E2E, TPOT or TPS against each threshold; latency
// counted from the scheduled instant in open loop). Level-only objectives
// (ITL, aggregates) do not judge single requests.
func MeetsAll(r *Record, slos []SLO) bool {
	if !r.OK {
		return false
	}
	for _, o := range slos {
		// A level-only objective, or a one-token answer's undefined decode
		// rate, does not judge the request.
		if v, ok := o.perRequest(r); ok && !o.Holds(v) {
			return false
		}
	}
	return true
}

// ApplySLOs sets a level's goodput from the records (completed requests
// that met every per-request objective, per second of the level) and
// judges the level against the objectives.
func ApplySLOs(lv *Level, recs []Record, slos []SLO) {
	if len(slos) == 0 {
		return
	}
	good := 0
	for i := range recs {
		if MeetsAll(&recs[i], slos) {
			good++
		}
	}
	if lv.DurationS > 0 {
		lv.GoodputRPS = float64(good) / lv.DurationS
	}
	// Last: an objective may name the goodput itself.
	JudgeSLOs(lv, slos)
}

// JudgeSLOs sets a level's verdict from its statistics alone.
func JudgeSLOs(lv *Level, slos []SLO) {
	if len(slos) == 0 {
		return
	}
	res := &SLOResult{Met: true}
	for _, o := range slos {
		v := o.Observed(lv)
		met := o.Holds(v)
		if lv.Requests.Completed == 0 {
			met = false
		}
		res.Checks = append(res.Checks, SLOCheck{Expr: o.Expr, Value: v, Met: met})
		res.Met = res.Met && met
	}
	lv.SLO = res
}
