package report

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/tokbench/tokbench/metrics"
)

// CompareRun is one run of a comparison, by the name it is shown under.
type CompareRun struct {
	Name    string
	Summary metrics.Summary
}

// VerdictTable is one run's comparison with the baseline: a row per
// metric and level (load, metric, baseline, run, change, verdict).
type VerdictTable struct {
	Title string
	Rows  [][]string
}

// runColors tell the runs apart in every chart, in order.
var runColors = []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"}

// WriteCompareHTML writes one self-contained page setting runs side by
// side: their degradation curves and latency overlaid (one color a run,
// levels matched by load) and, beside them, the comparison's verdicts.
func WriteCompareHTML(w io.Writer, runs []CompareRun, tables []VerdictTable, warnings []string) error {
	charts := overlayCharts(runs)
	return compareTemplate.Execute(w, struct {
		Runs     []CompareRun
		Colors   []string
		Charts   []template.HTML
		Tables   []VerdictTable
		Warnings []string
	}{runs, runColors, charts, tables, warnings})
}

// overlayCharts draws decode TPS p50, TTFT p50 and p95, and aggregate
// output TPS against load for every run, on the loads any run measured
// (of the first run's mode).
func overlayCharts(runs []CompareRun) []template.HTML {
	if len(runs) == 0 || len(runs[0].Summary.Levels) == 0 {
		return nil
	}
	mode := runs[0].Summary.Levels[0].Load.Mode
	type key struct {
		v  float64
		in int
	}
	byKey := map[key]string{}
	var keys []key
	for _, r := range runs {
		for _, lv := range r.Summary.Levels {
			if lv.Load.Mode != mode {
				continue
			}
			k := key{metrics.LoadValue(lv.Load), lv.Load.InputTokens}
			if _, ok := byKey[k]; !ok {
				byKey[k] = lv.Load.String()
				keys = append(keys, k)
			}
		}
	}
	slices.SortFunc(keys, func(a, b key) int {
		if a.in != b.in {
			return a.in - b.in
		}
		return int(math.Copysign(1, a.v-b.v))
	})
	labels := make([]string, len(keys))
	for i, k := range keys {
		labels[i] = byKey[k]
	}
	values := func(r CompareRun, get func(*metrics.Level) (float64, bool)) []float64 {
		out := make([]float64, len(keys))
		for i := range out {
			out[i] = math.NaN()
		}
		for li := range r.Summary.Levels {
			lv := &r.Summary.Levels[li]
			if lv.Load.Mode != mode {
				continue
			}
			i := slices.Index(keys, key{metrics.LoadValue(lv.Load), lv.Load.InputTokens})
			if v, ok := get(lv); ok && i >= 0 {
				out[i] = v
			}
		}
		return out
	}
	stat := func(s func(*metrics.Level) *metrics.Stats, p func(*metrics.Stats) float64) func(*metrics.Level) (float64, bool) {
		return func(lv *metrics.Level) (float64, bool) { st := s(lv); return p(st), st.Count > 0 }
	}
	var decode, ttft, out []series
	for i, r := range runs {
		c := runColors[i%len(runColors)]
		decode = append(decode, series{Name: r.Name + " decode p50", Color: c,
			Values: values(r, stat(func(l *metrics.Level) *metrics.Stats { return &l.DecodeTPS }, func(s *metrics.Stats) float64 { return s.P50 }))})
		ttft = append(ttft,
			series{Name: r.Name + " TTFT p50", Color: c,
				Values: values(r, stat(func(l *metrics.Level) *metrics.Stats { return &l.TTFT }, func(s *metrics.Stats) float64 { return s.P50 }))},
			series{Name: r.Name + " TTFT p95", Color: c, Dashed: true,
				Values: values(r, stat(func(l *metrics.Level) *metrics.Stats { return &l.TTFT }, func(s *metrics.Stats) float64 { return s.P95 }))})
		out = append(out, series{Name: r.Name + " output tok/s", Color: c,
			Values: values(r, func(l *metrics.Level) (float64, bool) { return l.OutputTPS, l.Requests.Completed > 0 })})
	}
	return []template.HTML{
		lineChart("Decode tokens/s per user (p50)", "tok/s", labels, decode),
		lineChart("TTFT p50 (solid) and p95 (dashed)", "ms", labels, ttft),
		lineChart("Aggregate output tokens/s", "tok/s", labels, out),
	}
}

var compareTemplate = template.Must(template.New("compare").Funcs(template.FuncMap{
	"color": func(i int) string { return runColors[i%len(runColors)] },
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>tokbench: comparison of {{len .Runs}} runs</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:2em auto;max-width:1180px;padding:0 1em;color:#222}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ddd;padding:3px 8px}
td.n{text-align:right;font-variant-numeric:tabular-nums}
.charts{display:flex;flex-wrap:wrap;gap:12px}.charts svg{border:1px solid #eee;background:#fff}
.warn{background:#fff4e5;border-left:4px solid #f0a020;padding:6px 10px;margin:6px 0}
.better{color:#137333;font-weight:bold}.worse{color:#a50e0e;font-weight:bold}
.key{display:inline-block;width:1em;height:.6em;margin-right:.3em}
svg{max-width:100%;height:auto}
</style></head>
<body>
<h1>Comparison of {{len .Runs}} runs</h1>
<p>{{range $i, $r := .Runs}}{{if $i}} · {{end}}<span class="key" style="background:{{color $i}}"></span>{{$r.Name}}{{if not $i}} (baseline){{end}}{{end}}</p>
{{range .Warnings}}<p class="warn">{{.}}</p>
{{end}}<h2>Curves</h2>
<div class="charts">{{range .Charts}}{{.}}{{end}}</div>
{{range .Tables}}<h2>{{.Title}}</h2>
<table><tr><th>load</th><th>metric</th><th>baseline</th><th>this run</th><th>change</th><th>verdict</th></tr>
{{range .Rows}}<tr><td>{{index . 0}}</td><td>{{index . 1}}</td><td class="n">{{index . 2}}</td><td class="n">{{index . 3}}</td><td class="n">{{index . 4}}</td><td class="{{index . 6}}">{{index . 5}}</td></tr>
{{end}}</table>
{{end}}</body></html>
`))

// pct is a relative change in percent ("" when undefined).
func pct(rel float64) string {
	if math.IsNaN(rel) || math.IsInf(rel, 0) {
		return ""
	}
	return fmt.Sprintf("%+.1f%%", 100*rel)
}

// VerdictRow is one row of a VerdictTable; a verdict starting "better"
// or "worse" is colored so.
func VerdictRow(load, metric string, a, b, rel float64, verdict string) []string {
	class := ""
	switch {
	case strings.HasPrefix(verdict, "better"):
		class = "better"
	case strings.HasPrefix(verdict, "worse"):
		class = "worse"
	}
	return []string{load, metric, num(a, 1), num(b, 1), pct(rel), verdict, class}
}
