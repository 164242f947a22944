package report

import (
	"cmp"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/tokbench/tokbench/advise"
	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/results"
)

// Page is what an HTML report shows: the run's metadata (run.json), its
// summary and, when present, the per-request records for the histograms.
type Page struct {
	Run     *results.Run // nil when the run directory has no run.json
	Summary metrics.Summary
	Records []metrics.Record
	// Total is each level's count of records when Records are a sample
	// of a long run's (results.ReadSample); nil when they are all.
	Total map[int]int
	// Warnings are notes from reading the run (a torn last line…).
	Warnings []string
}

// WriteHTML writes one self-contained HTML page: inline CSS and inline SVG
// charts, no script and no external resource, so it reads offline and
// prints. Charts: aggregate output TPS and per-user decode TPS (p50, p5,
// the single-stream ceiling when known) against load, TTFT p50/p95 against
// load, and per level histograms of TTFT and decode TPS. Every plotted point
// carries a <title> with its exact value. With records, a timeline of the
// level with the most requests (TimelineLevel) shows output tokens/s and
// requests in flight over time. Levels with SLO verdicts get a panel with
// every objective's measured value, and the capacity and knee statements.
// A print stylesheet sets the charts two to a row. It gathers the page's
// data in the order the page shows it, then runs the template.
func WriteHTML(w io.Writer, p Page) error {
	s := p.Summary
	d := htmlData{Title: "tokbench: " + s.Target.Model, Summary: s, Interrupted: s.Interrupted}
	var labels []string
	var outTPS, dP50, dP5, ttft50, ttft95, ceiling, serverTTFT []float64
	hasCeiling, hasServer := false, false
	// The curves go in load order (a sweep runs 1, 2, 4, 8, then 3), rate
	// levels after concurrency ones; the table keeps the order run.
	order := make([]int, len(s.Levels))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return metrics.LoadLess(s.Levels[order[a]].Load, s.Levels[order[b]].Load) })
	for _, i := range order {
		lv := &s.Levels[i]
		labels = append(labels, lv.Load.String())
		outTPS = append(outTPS, lv.OutputTPS)
		dP50 = append(dP50, valueIf(lv.DecodeTPS.P50, lv.DecodeTPS.Count))
		dP5 = append(dP5, valueIf(lv.DecodeTPS.P5, lv.DecodeTPS.Count))
		ttft50 = append(ttft50, valueIf(lv.TTFT.P50, lv.TTFT.Count))
		ttft95 = append(ttft95, valueIf(lv.TTFT.P95, lv.TTFT.Count))
		c := math.NaN()
		if lv.Physics != nil && lv.Physics.DecodeTPSCeiling > 0 {
			c, hasCeiling = lv.Physics.DecodeTPSCeiling, true
		}
		ceiling = append(ceiling, c)
		// The server's own TTFT beside the client's: its reported load +
		// prefill per request, else its /metrics histogram's p50.
		st := math.NaN()
		switch {
		case lv.ServerTTFTMs != nil:
			st, hasServer = lv.ServerTTFTMs.P50, true
		case lv.ServerMetrics != nil && lv.ServerMetrics.TTFTMsP50 > 0:
			st, hasServer = lv.ServerMetrics.TTFTMsP50, true
		}
		serverTTFT = append(serverTTFT, st)
	}
	for i := range s.Levels {
		d.Rows = append(d.Rows, levelRow(&s.Levels[i]))
	}
	perUser := []series{{Name: "decode p50", Color: "#1f77b4", Values: dP50}, {Name: "decode p5 (slowest 5%)", Color: "#ff7f0e", Values: dP5}}
	if hasCeiling {
		perUser = append(perUser, series{Name: "single-stream ceiling", Color: "#d62728", Values: ceiling, Dashed: true})
	}
	ttftSeries := []series{{Name: "TTFT p50", Color: "#1f77b4", Values: ttft50}, {Name: "TTFT p95", Color: "#d62728", Values: ttft95}}
	if hasServer {
		ttftSeries = append(ttftSeries, series{Name: "server's own TTFT p50", Color: "#7f7f7f", Values: serverTTFT, Dashed: true})
	}
	d.Cols = htmlColumns
	for _, lv := range s.Levels {
		if n := ToolNote(lv); n != "" {
			d.Tools = append(d.Tools, fmt.Sprintf("%s: %s", lv.Load, n))
		}
	}
	mixed := Mixed(s)
	if Embeddings(s) {
		embedHTML(&d, p, labels, order)
		if mixed {
			d.MixedNote = MixedNote
		}
	}
	if (!Embeddings(s) || mixed) && len(labels) > 0 {
		d.Charts = append(d.Charts,
			lineChart("Aggregate output tokens/s vs load", "tok/s", labels, []series{{Name: "output tok/s", Color: "#2ca02c", Values: outTPS}}),
			lineChart("Per-user decode tokens/s vs load", "tok/s", labels, perUser),
			lineChart("TTFT vs load", "ms", labels, ttftSeries),
		)
	}
	for i := range s.Levels {
		var ttft, dtps []float64
		for j := range p.Records {
			r := &p.Records[j]
			if r.Level != i || !r.OK || r.EmbedInputs > 0 {
				continue
			}
			ttft = append(ttft, r.TTFTMs)
			if v, ok := r.DecodeTPS(); ok {
				dtps = append(dtps, v)
			}
		}
		if len(ttft) == 0 || s.Levels[i].Embeddings != nil && !mixed {
			continue
		}
		name := s.Levels[i].Load.String()
		if p.sampled(i) {
			name += fmt.Sprintf(" (a uniform sample of %d of %d requests)", p.count(i), p.Total[i])
		}
		d.Hists = append(d.Hists, histogram("TTFT at "+name, "ms", ttft, "#1f77b4"), histogram("Decode TPS at "+name, "tok/s", dtps, "#2ca02c"))
	}
	for i := range s.Levels {
		if ws := s.Levels[i].Windows; len(ws) > 1 {
			d.PeriodsOf = s.Levels[i].Load.String()
			d.Periods = windowCharts(ws)
			break
		}
	}
	if li := TimelineLevel(s); li >= 0 && !p.sampled(li) && !Embeddings(s) {
		n := 0
		for i := range p.Records {
			if p.Records[i].Level == li {
				n++
			}
		}
		if tl, ok := NewTimeline(p.Records, li, timelineBins(n)); ok {
			d.TimelineOf = s.Levels[li].Load.String()
			d.Timeline = timeCharts(tl, d.TimelineOf, chartW, s.Levels[li].GPU)
			// Zoomed: 4× the width in 4× finer bins, scrolled sideways.
			if wide, ok := NewTimeline(p.Records, li, 4*timelineBins(n)); ok {
				d.Zoom = timeCharts(wide, d.TimelineOf, 4*chartW, s.Levels[li].GPU)
			}
		}
		total := n
		if p.Total != nil {
			total = p.Total[li]
		}
		d.Explorer, d.ExplorerNote = explorer(p.Records, li, total)
	}
	d.SLOs, d.Verdicts = s.SLOs, sloRows(s)
	if s.Capacity != nil {
		d.Statements = append(d.Statements, "Capacity: "+s.Capacity.Statement)
	}
	if s.Knee != nil {
		d.Statements = append(d.Statements, "Knee: "+s.Knee.Statement)
	}
	if s.Context != nil {
		d.Statements = append(d.Statements, "Context: "+s.Context.Statement)
	}
	if s.MediaCost != nil {
		d.Statements = append(d.Statements, s.MediaCost.Note())
	}
	d.Uses = useRows(s.Levels)
	d.Meta = metaRows(p.Run, s)
	for _, lv := range s.Levels {
		for _, n := range []string{serverNote(lv), serverMetricsNote(lv)} {
			if n != "" {
				d.Server = append(d.Server, n)
			}
		}
		if n := lv.Connections.Note(); n != "" {
			d.Server = append(d.Server, fmt.Sprintf("%s: %s", lv.Load, n))
		}
		for _, n := range lv.Notes {
			d.Server = append(d.Server, fmt.Sprintf("%s: %s", lv.Load, n))
		}
	}
	d.Notes = append(d.Notes, p.Warnings...)
	d.Notes = append(d.Notes, s.Warnings...)
	d.Notes = append(d.Notes, levelNotes(s.Levels)...)
	seen := map[string]bool{}
	for _, r := range p.Records {
		if !r.OK && r.Error != "" && !seen[r.ErrorClass+r.Error] && len(d.Errors) < 20 {
			seen[r.ErrorClass+r.Error] = true
			d.Errors = append(d.Errors, fmt.Sprintf("%s: %s", r.ErrorClass, r.Error))
		}
	}
	return htmlTmpl.Execute(w, d)
}

// count is how many of the records are of level.
func (p *Page) count(level int) int {
	n := 0
	for i := range p.Records {
		if p.Records[i].Level == level {
			n++
		}
	}
	return n
}

// sampled reports whether level's records are a sample of more.
func (p *Page) sampled(level int) bool { return p.Total != nil && p.count(level) < p.Total[level] }

// windowCharts draw a level's periodic summaries: output tokens/s, TTFT
// (from the scheduled instant for open loop) and failures per window.
func windowCharts(ws []metrics.Window) []template.HTML {
	labels := make([]string, len(ws))
	tps, p50, p99, failed := make([]float64, len(ws)), make([]float64, len(ws)), make([]float64, len(ws)), make([]float64, len(ws))
	ttftName := "TTFT"
	for i, w := range ws {
		labels[i] = clock(w.EndS)
		tps[i], failed[i] = w.OutputTPS, float64(w.Requests.Failed)
		t := w.TTFT
		if w.TTFTSched != nil {
			t, ttftName = *w.TTFTSched, "TTFT from schedule"
		}
		p50[i], p99[i] = valueIf(t.P50, t.Count), valueIf(t.P99, t.Count)
	}
	return []template.HTML{
		lineChart("Output tokens/s per window", "tok/s", labels, []series{{Name: "output tok/s", Color: "#2ca02c", Values: tps}}),
		lineChart(ttftName+" per window", "ms", labels, []series{{Name: "p50", Color: "#1f77b4", Values: p50}, {Name: "p99", Color: "#d62728", Values: p99}}),
		lineChart("Failed requests per window", "requests", labels, []series{{Name: "failed", Color: "#9467bd", Values: failed}}),
	}
}

type htmlData struct {
	Title        string
	Summary      metrics.Summary
	Interrupted  bool
	Rows         [][]string
	Charts       []template.HTML
	Hists        []template.HTML
	Timeline     []template.HTML
	Zoom         []template.HTML // the timeline 4× wider
	TimelineOf   string
	Periods      []template.HTML
	PeriodsOf    string
	SLOs         []string
	Verdicts     []sloRow
	Statements   []string
	Uses         []useRow
	Explorer     []explored
	ExplorerNote string
	Meta         [][2]string
	Notes        []string
	Server       []string // the server's own timing beside the client's, per level
	Errors       []string
	// Cols head the level table (htmlColumns, or embedColumns); Lead
	// says what the table leaves out; Tools are the levels' tool calling.
	Cols  []string
	Lead  string
	Tools []string
	// EmbedCols, EmbedLead and EmbedRows are a mixed summary's second
	// level table, of its embeddings requests (see Mixed).
	EmbedCols []string
	EmbedLead string
	EmbedRows [][]string
	MixedNote string
}

// htmlColumns head the level table; levelRow fills them.
var htmlColumns = []string{"load", "ok", "failed", "TTFT p50 ms", "TTFT p95 ms", "TTFT p99 ms",
	"decode TPS p50", "P95 (slowest 5%)", "TPOT p50 ms", "ITL p99 ms", "E2E p50 ms", "output tok/s", "req/s"}

func levelRow(lv *metrics.Level) []string {
	return []string{lv.Load.String(), fmt.Sprint(lv.Requests.Completed), fmt.Sprint(lv.Requests.Failed),
		num(lv.TTFT.P50, lv.TTFT.Count), num(lv.TTFT.P95, lv.TTFT.Count), num(lv.TTFT.P99, lv.TTFT.Count),
		num(lv.DecodeTPS.P50, lv.DecodeTPS.Count), num(lv.DecodeTPS.P5, lv.DecodeTPS.Count),
		num(lv.TPOT.P50, lv.TPOT.Count), num(lv.ITL.P99, lv.ITL.Count), num(lv.E2E.P50, lv.E2E.Count),
		num(lv.OutputTPS, 1), num(lv.RequestRPS, 1)}
}

// sloRow is one level's SLO verdict in the HTML panel.
type sloRow struct {
	Load   string
	Met    bool
	Checks []sloCheck
}

type sloCheck struct {
	Expr, Value string
	Met         bool
}

func sloRows(s metrics.Summary) []sloRow {
	var out []sloRow
	for _, lv := range s.Levels {
		if lv.SLO == nil {
			continue
		}
		r := sloRow{Load: lv.Load.String(), Met: lv.SLO.Met}
		for _, c := range lv.SLO.Checks {
			r.Checks = append(r.Checks, sloCheck{Expr: c.Expr, Value: num(c.Value, 1), Met: c.Met})
		}
		out = append(out, r)
	}
	return out
}

func valueIf(v float64, count int) float64 {
	if count == 0 {
		return math.NaN()
	}
	return v
}

func metaRows(run *results.Run, s metrics.Summary) [][2]string {
	t := s.Target
	rows := [][2]string{{"target", t.URL}, {"api", t.API}, {"model", t.ModelDesc()}, {"simulated", fmt.Sprint(t.Simulated)}}
	if run == nil {
		return append(rows, [2]string{"run.json", "missing"})
	}
	rows = append(rows, [2]string{"tool", run.Tool + " " + run.Version})
	if !run.StartedAt.IsZero() {
		rows = append(rows, [2]string{"started", run.StartedAt.UTC().Format("2006-01-02 15:04:05 MST")})
	}
	for _, k := range sortedKeys(run.Meta) {
		rows = append(rows, [2]string{k, run.Meta[k]})
	}
	return configRows(rows, "config ", run.Config)
}

// configRows appends a row per value of a configuration object, in key
// order; a nested object's values get rows of their own, named by their
// path ("config load.slo"), rather than one row of raw JSON.
func configRows(rows [][2]string, prefix string, m map[string]any) [][2]string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if sub, ok := m[k].(map[string]any); ok {
			rows = configRows(rows, prefix+k+".", sub)
			continue
		}
		if v, ok := configValue(m[k]); ok {
			rows = append(rows, [2]string{prefix + k, v})
		}
	}
	return rows
}

// configValue is a run.json configuration value as people read it: text
// as it is, numbers and booleans plainly, lists and objects as compact
// JSON (never Go's map[…] or <nil>); false for a value that is not set
// (null, "", an empty list or object).
func configValue(v any) (string, bool) {
	switch x := v.(type) {
	case nil:
		return "", false
	case string:
		return x, x != ""
	case []any:
		if len(x) == 0 {
			return "", false
		}
		// A list of plain values reads as one: "1, 4, 16".
		parts := make([]string, 0, len(x))
		for _, e := range x {
			switch e.(type) {
			case map[string]any, []any, nil:
				parts = nil
			default:
				if v, ok := configValue(e); ok {
					parts = append(parts, v)
				}
			}
			if parts == nil {
				break
			}
		}
		if parts != nil {
			return strings.Join(parts, ", "), true
		}
	case map[string]any:
		if len(x) == 0 {
			return "", false
		}
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // the template escapes for HTML itself
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v), true
	}
	return strings.TrimSuffix(b.String(), "\n"), true
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

var htmlTmpl = template.Must(template.New("report").Funcs(template.FuncMap{}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ddd;padding:3px 8px}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
.meta td{overflow-wrap:anywhere;word-break:break-word}
.charts{display:flex;flex-wrap:wrap;gap:12px}.charts svg{border:1px solid #eee;background:#fff}
.warn{background:#fff4e5;border-left:4px solid #f0a020;padding:6px 10px;margin:6px 0}
.sim{color:#b00;font-weight:bold}
.slo td.pass{background:#e6f4ea;color:#137333;font-weight:bold}.slo td.fail{background:#fce8e6;color:#a50e0e;font-weight:bold}
.slo td.ok{color:#137333}.slo td.broken{color:#a50e0e;font-weight:bold}
details.zoom div{overflow-x:auto}details.zoom svg{max-width:none;display:block;margin:6px 0}details.zoom summary{cursor:pointer}
details.req{margin:2px 0}details.req summary{cursor:pointer;font-variant-numeric:tabular-nums}
.statement{background:#eef3fb;border-left:4px solid #1f77b4;padding:6px 10px;margin:6px 0}
svg{max-width:100%;height:auto}
@media print{
@page{margin:12mm}
body{margin:0;max-width:none;font-size:10pt;color:#000}
h2{break-after:avoid}
.charts{gap:6px}.charts svg{break-inside:avoid;width:48%;border:none}
table,tr,.warn,.statement{break-inside:avoid}
td.pass,td.fail,.warn,.statement{print-color-adjust:exact;-webkit-print-color-adjust:exact}
}
</style></head>
<body>
<h1>{{.Title}}{{if .Summary.Target.Simulated}} <span class="sim">(simulated)</span>{{end}}</h1>
{{if .Interrupted}}<p class="warn">Interrupted: the last level is partial.</p>{{end}}
{{if .Notes}}<h2>Warnings</h2>{{range .Notes}}<p class="warn">{{.}}</p>
{{end}}{{end}}<h2>Levels</h2>{{if .Lead}}
<p>{{.Lead}}</p>{{end}}
<table><tr>{{range .Cols}}<th class="n">{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr>{{range .}}<td class="n">{{.}}</td>{{end}}</tr>
{{end}}</table>
{{if .EmbedRows}}<p>{{.EmbedLead}}</p>
<table><tr>{{range .EmbedCols}}<th class="n">{{.}}</th>{{end}}</tr>
{{range .EmbedRows}}<tr>{{range .}}<td class="n">{{.}}</td>{{end}}</tr>
{{end}}</table>
<p>{{.MixedNote}}</p>{{end}}
<p>For decode TPS, higher is better: "P95 (slowest 5%)" is the 5th percentile, the rate 95% of requests beat.</p>
{{if or .Verdicts .Statements}}<h2>{{if .Verdicts}}Service-level objectives{{else}}Capacity{{end}}</h2>
{{if .SLOs}}<p>Objectives: {{range $i, $o := .SLOs}}{{if $i}}, {{end}}<code>{{$o}}</code>{{end}}</p>{{end}}
{{range .Statements}}<p class="statement">{{.}}</p>
{{end}}{{if .Verdicts}}<table class="slo"><tr><th>load</th><th>verdict</th><th>objective</th><th class="n">measured</th><th>result</th></tr>
{{range $v := .Verdicts}}{{range $i, $c := $v.Checks}}<tr>{{if not $i}}<td rowspan="{{len $v.Checks}}">{{$v.Load}}</td><td rowspan="{{len $v.Checks}}" class="{{if $v.Met}}pass{{else}}fail{{end}}">{{if $v.Met}}✓ PASS{{else}}✗ FAIL{{end}}</td>{{end}}<td><code>{{$c.Expr}}</code></td><td class="n">{{$c.Value}}</td><td class="{{if $c.Met}}ok{{else}}broken{{end}}">{{if $c.Met}}met{{else}}BROKEN{{end}}</td></tr>
{{end}}{{end}}</table>{{end}}{{end}}
{{if .Tools}}<h2>Tool calls</h2>{{range .Tools}}<p>{{.}}</p>
{{end}}{{end}}
{{if .Uses}}<h2>Use cases</h2>
<p>This endpoint against each use-case profile's objectives (<code>tokbench advise</code> sets several endpoints side by side, with their costs).</p>
<table class="slo"><tr><th>use</th><th>objectives</th><th>verdict</th><th>why</th></tr>
{{range .Uses}}<tr><td>{{.Profile}}</td><td><code>{{.SLOs}}</code></td><td class="{{if .Meets}}pass{{else}}fail{{end}}">{{if .Meets}}✓ meets{{else}}✗ not met{{end}}</td><td>{{.Why}}</td></tr>
{{end}}</table>{{end}}
<h2>Degradation curve and latency</h2>
<div class="charts">{{range .Charts}}{{.}}{{end}}</div>
{{if .Timeline}}<h2>Timeline of {{.TimelineOf}}</h2>
<p>The level with the most requests, in equal time bins: output tokens streamed per second (each chunk's tokens when it arrived), the GPUs' power and memory activity when bench sampled their counters (its first run, as sampled), the requests in flight (sent, response not yet ended), the TTFT of the requests that started in each bin (p50 and the slowest), and the failed requests by when they ended.</p>
<div class="charts">{{range .Timeline}}{{.}}{{end}}</div>
{{if .Zoom}}<details class="zoom"><summary>Zoom: the timeline four times wider, in bins four times finer (scroll sideways)</summary><div>{{range .Zoom}}{{.}}{{end}}</div></details>{{end}}{{end}}
{{if .Explorer}}<h2>Requests of {{.TimelineOf}}</h2>
<p>{{.ExplorerNote}}. Open one for its phases, its tokens and its chunks as they arrived.</p>
{{range .Explorer}}<details class="req"><summary>{{.Summary}}</summary><table class="meta">{{range .Facts}}<tr><th>{{index . 0}}</th><td>{{index . 1}}</td></tr>{{end}}</table>{{.Chart}}</details>
{{end}}{{end}}
{{if .Periods}}<h2>Periodic summaries of {{.PeriodsOf}}</h2>
<p>The level summarized window by window (bench --summary-every): each window holds the requests that ended in it.</p>
<div class="charts">{{range .Periods}}{{.}}{{end}}</div>{{end}}
{{if .Hists}}<h2>Distributions per level</h2>
<div class="charts">{{range .Hists}}{{.}}{{end}}</div>{{end}}
<h2>Run</h2>
<table class="meta">{{range .Meta}}<tr><th>{{index . 0}}</th><td>{{index . 1}}</td></tr>
{{end}}</table>
{{if .Server}}<h2>The server's own timing</h2>{{range .Server}}<p>{{.}}</p>
{{end}}{{end}}
{{if .Errors}}<h2>Errors</h2><ul>{{range .Errors}}<li>{{.}}</li>
{{end}}</ul>{{end}}
</body></html>
`))

// useRow is the run's endpoint against one use-case profile.
type useRow struct {
	Profile, SLOs, Why string
	Meets              bool
}

// useRows judge the run's planned levels against every use-case profile
// (none for live traffic, which has no load levels).
func useRows(levels []metrics.Level) []useRow {
	var planned []metrics.Level
	for _, lv := range levels {
		if lv.Load.Mode == metrics.ModeConcurrency || lv.Load.Mode == metrics.ModeRate {
			planned = append(planned, lv)
		}
	}
	if len(planned) == 0 {
		return nil
	}
	a, err := advise.Of([]advise.Endpoint{{Name: "this endpoint", Levels: planned}})
	if err != nil {
		return nil
	}
	chain := "agent chain"
	if planned[0].ChainKind == metrics.ChainConversation {
		chain = "conversation"
	}
	var rows []useRow
	for _, u := range a.Uses {
		st := u.Endpoints[0]
		why := st.Statement
		if st.Meets && st.Level != nil {
			why = fmt.Sprintf("up to %s; at %s: TTFT p95 %s ms, decode p50 %s tok/s, %s %s s", st.Load(),
				st.Level.Load, metrics.Figure(st.Level.TTFTP95Ms), metrics.Figure(st.Level.DecodeTPSP50), chain, metrics.Figure(st.Level.AgentChainS))
		}
		if u.Note != "" {
			why += " (" + u.Note + ")"
		}
		rows = append(rows, useRow{Profile: u.Profile, SLOs: cmp.Or(u.SLOs, "throughput and cost"), Why: why, Meets: st.Meets})
	}
	return rows
}

// series is one line of a chart; NaN values are gaps.
type series struct {
	Name   string
	Color  string
	Values []float64
	Dashed bool
}

const (
	chartW, chartH                 = 520, 300
	padL, padR, padT, padB float64 = 60, 16, 30, 60
)

// lineChart draws series against evenly spaced categories (the load
// levels), with a y axis from 0 to a rounded maximum.
func lineChart(title, unit string, labels []string, ss []series) template.HTML {
	var b strings.Builder
	top := 0.0
	for _, s := range ss {
		for _, v := range s.Values {
			if !math.IsNaN(v) {
				top = max(top, v)
			}
		}
	}
	ymax, step := niceScale(top)
	pw, ph := chartW-padL-padR, chartH-padT-padB
	x := func(i int) float64 {
		if len(labels) == 1 {
			return padL + pw/2
		}
		return padL + pw*float64(i)/float64(len(labels)-1)
	}
	y := func(v float64) float64 { return padT + ph*(1-v/ymax) }
	svgOpen(&b, title)
	axes(&b, unit, ymax, step)
	stride := max(1, (len(labels)+11)/12) // at most a dozen labels fit under the axis
	for i, l := range labels {
		if i%stride != 0 {
			continue
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="11">%s</text>`, x(i), padT+ph+16, template.HTMLEscapeString(l))
	}
	for k, s := range ss {
		dash := ""
		if s.Dashed {
			dash = ` stroke-dasharray="6 4"`
		}
		var pts []string
		for i, v := range s.Values {
			if math.IsNaN(v) {
				continue
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(i), y(v)))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`, s.Color, dash, strings.Join(pts, " "))
		for i, v := range s.Values {
			if math.IsNaN(v) {
				continue
			}
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"><title>%s %s: %s %s</title></circle>`,
				x(i), y(v), s.Color, template.HTMLEscapeString(labels[i]), template.HTMLEscapeString(s.Name), num(v, 1), unit)
		}
		lx := padL + float64(k%2)*pw/2
		ly := float64(chartH) - 22 + float64(k/2)*14
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"%s/><text x="%.1f" y="%.1f" font-size="11">%s</text>`,
			lx, ly-4, lx+18, ly-4, s.Color, dash, lx+22, ly, template.HTMLEscapeString(s.Name))
	}
	b.WriteString("</svg>")
	return template.HTML(b.String())
}

// histogram draws the distribution of values in up to 20 equal bins.
func histogram(title, unit string, values []float64, color string) template.HTML {
	var b strings.Builder
	svgOpen(&b, title)
	if len(values) == 0 {
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">no samples</text></svg>`, chartW/2, chartH/2)
		return template.HTML(b.String())
	}
	lo, hi := values[0], values[0]
	for _, v := range values {
		lo, hi = min(lo, v), max(hi, v)
	}
	bins := min(20, max(1, int(math.Ceil(math.Sqrt(float64(len(values)))))*2))
	width := (hi - lo) / float64(bins)
	if width == 0 {
		bins, width = 1, 1
	}
	counts := make([]int, bins)
	for _, v := range values {
		i := min(int((v-lo)/width), bins-1)
		counts[i]++
	}
	top := 0
	for _, c := range counts {
		top = max(top, c)
	}
	ymax, step := niceScale(float64(top))
	pw, ph := chartW-padL-padR, chartH-padT-padB
	axes(&b, "requests", ymax, step)
	bw := pw / float64(bins)
	for i, c := range counts {
		h := ph * float64(c) / ymax
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s–%s %s: %d</title></rect>`,
			padL+bw*float64(i)+1, padT+ph-h, max(bw-2, 1), h, color, num(lo+width*float64(i), 1), num(lo+width*float64(i+1), 1), unit, c)
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="11">%s</text><text x="%.1f" y="%.1f" font-size="11" text-anchor="end">%s %s</text>`,
		padL, padT+ph+16, num(lo, 1), padL+pw, padT+ph+16, num(hi, 1), unit)
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="11" text-anchor="middle">%d requests</text></svg>`, padL+pw/2, float64(chartH)-20, len(values))
	return template.HTML(b.String())
}

func svgOpen(b *strings.Builder, title string) { svgOpenW(b, title, chartW) }

// svgOpenW opens a chart w wide.
func svgOpenW(b *strings.Builder, title string, w float64) {
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%d" viewBox="0 0 %.0f %d" role="img" aria-label="%s">`,
		w, chartH, w, chartH, template.HTMLEscapeString(title))
	fmt.Fprintf(b, `<text x="%.0f" y="18" text-anchor="middle" font-size="13" font-weight="bold">%s</text>`, w/2, template.HTMLEscapeString(title))
}

// axes draws the plot frame, horizontal grid lines and y tick labels.
func axes(b *strings.Builder, unit string, ymax, step float64) { axesW(b, unit, ymax, step, chartW) }

// axesW draws the axes of a chart w wide.
func axesW(b *strings.Builder, unit string, ymax, step, w float64) {
	pw, ph := w-padL-padR, chartH-padT-padB
	for v := 0.0; v <= ymax+step/2; v += step {
		yy := padT + ph*(1-v/ymax)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/><text x="%.1f" y="%.1f" text-anchor="end" font-size="11">%s</text>`,
			padL, yy, padL+pw, yy, padL-4, yy+4, trimNum(v))
	}
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#888"/><line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#888"/>`,
		padL, padT, padL, padT+ph, padL, padT+ph, padL+pw, padT+ph)
	fmt.Fprintf(b, `<text x="14" y="%.1f" font-size="11" transform="rotate(-90 14 %.1f)" text-anchor="middle">%s</text>`, padT+ph/2, padT+ph/2, template.HTMLEscapeString(unit))
}

// niceScale rounds top up to 1, 2 or 5 times a power of ten over about five
// ticks and returns that maximum and the tick step.
func niceScale(top float64) (float64, float64) {
	if top <= 0 || math.IsNaN(top) {
		return 1, 0.2
	}
	raw := top / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := 10 * mag
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	return step * math.Ceil(top/step-1e-9), step
}

func trimNum(v float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.3f", v), "0"), ".")
}
