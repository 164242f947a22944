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
	Metric string  // canonical metric name, e.g. "ttft_ms", "decode_tps"
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

// sloMetric describes a metric an SLO may name.
type sloMetric struct {
	canonical string
	time      bool // a duration: the threshold may carry a unit; stored in ms
	perReq    bool // has a per-request value, so goodput can judge each request
	level     bool // a level aggregate: no statistic
}

var sloMetrics = map[string]sloMetric{
	"ttft":        {"ttft_ms", true, true, false},
	"ttfvt":       {"ttfvt_ms", true, true, false},
	"tpot":        {"tpot_ms", true, true, false},
	"itl":         {"itl_ms", true, false, false},
	"e2e":         {"e2e_ms", true, true, false},
	"decode_tps":  {"decode_tps", false, true, false},
	"tps":         {"decode_tps", false, true, false},
	"e2e_tps":     {"e2e_tps", false, true, false},
	"output_tps":  {"output_tps", false, false, true},
	"request_rps": {"request_rps", false, false, true},
	"error_rate":  {"error_rate", false, false, true},
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
	name, stat := lhs, ""
	if j := strings.LastIndex(lhs, "_"); j > 0 {
		if isStat(lhs[j+1:]) {
			name, stat = lhs[:j], lhs[j+1:]
		}
	}
	m, ok := sloMetrics[name]
	if !ok {
		return SLO{}, fmt.Errorf("%q: unknown metric %q (known: ttft, ttfvt, tpot, itl, e2e, decode_tps (tps), e2e_tps, output_tps, request_rps, error_rate)", s, name)
	}
	switch {
	case m.level && stat != "":
		return SLO{}, fmt.Errorf("%q: %s is one number per level and takes no statistic", s, name)
	case !m.level && stat == "":
		return SLO{}, fmt.Errorf("%q: name a statistic, e.g. %s_p95 or %s_p50", s, name, name)
	}
	if stat == "median" {
		stat = "p50"
	}
	v, err := parseThreshold(rhs, m.time)
	if err != nil {
		return SLO{}, fmt.Errorf("%q: %v", s, err)
	}
	return SLO{Expr: lhs + op + rhs, Metric: m.canonical, Stat: stat, AtMost: op == "<=", Value: v}, nil
}

func isStat(s string) bool {
	switch s {
	case "mean", "min", "max", "median", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99":
		return true
	}
	return false
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
	var st Stats
	switch o.Metric {
	case "ttft_ms":
		st = lv.TTFT
	case "ttfvt_ms":
		st = lv.TTFVT
	case "tpot_ms":
		st = lv.TPOT
	case "itl_ms":
		st = lv.ITL
	case "e2e_ms":
		st = lv.E2E
	case "decode_tps":
		st = lv.DecodeTPS
	case "e2e_tps":
		st = lv.E2ETPS
	case "output_tps":
		return lv.OutputTPS
	case "request_rps":
		return lv.RequestRPS
	case "error_rate":
		return lv.ErrorRate
	}
	v, _ := st.Get(o.Stat)
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

// perRequest returns a request's own value of the SLO's metric, and whether
// the SLO can judge single requests at all.
func (o SLO) perRequest(r *Record) (float64, bool) {
	switch o.Metric {
	case "ttft_ms":
		return r.TTFTMs + r.QueueMs, true
	case "ttfvt_ms":
		return r.TTFVTMs + r.QueueMs, true
	case "e2e_ms":
		return r.E2EMs + r.QueueMs, true
	case "tpot_ms":
		v, ok := r.TPOTMs()
		return v, ok
	case "decode_tps":
		v, ok := r.DecodeTPS()
		return v, ok
	case "e2e_tps":
		v, ok := r.E2ETPS()
		return v, ok
	}
	return 0, false
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

// ApplySLOs judges a level against the objectives and sets its goodput
// from the records: completed requests that met every per-request objective,
// per second of the level.
func ApplySLOs(lv *Level, recs []Record, slos []SLO) {
	if len(slos) == 0 {
		return
	}
	JudgeSLOs(lv, slos)
	good := 0
	for i := range recs {
		if MeetsAll(&recs[i], slos) {
			good++
		}
	}
	if lv.DurationS > 0 {
		lv.GoodputRPS = float64(good) / lv.DurationS
	}
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
