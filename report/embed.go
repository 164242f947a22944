package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/tokbench/tokbench/metrics"
)

// Embeddings reports whether s is an embeddings run: a level with
// embeddings figures, or an embeddings API's name (a run whose every
// request failed has no figures).
func Embeddings(s metrics.Summary) bool {
	for _, lv := range s.Levels {
		if lv.Embeddings != nil {
			return true
		}
	}
	return strings.HasSuffix(s.Target.API, "-embeddings") || strings.HasSuffix(s.Target.API, "-embed")
}

// Mixed reports whether s's levels mix token streams and embeddings
// (tokbench proxy's live level carries whatever its clients sent): its
// outputs then show the streams' table and the embeddings' beside it.
func Mixed(s metrics.Summary) bool {
	streams, embed := false, false
	for _, lv := range s.Levels {
		streams = streams || lv.TTFT.Count > 0
		embed = embed || lv.Embeddings != nil
	}
	return streams && embed
}

// MixedNote is what a mixed summary's outputs say of its levels' counts.
const MixedNote = "the embeddings requests are counted in ok, fail and req/s beside the completions; TTFT, decode and output figures are the completions' alone"

// embedCounts are a level's embeddings requests, completed and failed,
// and their rate: the level's own unless it is mixed.
func embedCounts(lv *metrics.Level, mixed bool) (ok, failed int, rps float64) {
	e := lv.Embeddings
	if !mixed || e == nil {
		return lv.Requests.Completed, lv.Requests.Failed, lv.RequestRPS
	}
	if lv.DurationS > 0 {
		rps = float64(e.Latency.Count) / lv.DurationS
	}
	return e.Latency.Count, e.Failed, rps
}

// embedTable writes an embeddings run's rows: latency, inputs and tokens
// embedded per second; no TTFT or decode columns, which the line above
// the table says. Of a mixed summary (see Mixed) it writes the levels'
// embeddings requests alone.
func embedTable(w io.Writer, tw io.Writer, s metrics.Summary, mixed bool) {
	fmt.Fprintln(w, metrics.NoTokenStream+" (no TTFT, decode TPS, ITL or output tokens); latency is t0 to the answer's last byte")
	fmt.Fprintln(tw, "load\tok\tfail\tlatency p50\tp95\tp99 ms\tinputs/s\ttokens/s\treq/s\tinputs/req\tdims\ttokens from\t")
	for i := range s.Levels {
		lv := &s.Levels[i]
		ok, failed, rps := embedCounts(lv, mixed)
		fmt.Fprintf(tw, "%s\t%d\t%d\t", lv.Load, ok, failed)
		e := lv.Embeddings
		if e == nil {
			fmt.Fprintf(tw, "-\t-\t-\t-\t-\t%s\t-\t-\t-\t\n", num(rps, 1))
			continue
		}
		perReq := 0.0
		if ok > 0 {
			perReq = float64(e.Inputs) / float64(ok)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t\n",
			num(e.Latency.P50, e.Latency.Count), num(e.Latency.P95, e.Latency.Count), num(e.Latency.P99, e.Latency.Count),
			num(e.InputsPerS, 1), num(e.TokensPerS, 1), num(rps, 1), num(perReq, 1), e.Dims, embedSource(e.TokenSource))
	}
}

// embedSource says where an embeddings level's token count came from.
func embedSource(src string) string {
	switch src {
	case metrics.EmbedSourceUsage:
		return "server"
	case metrics.EmbedSourcePrompt:
		return "inputs sent"
	}
	return src
}

// ToolNote is a level's tool calling in one line, "" when its requests
// sent no tools.
func ToolNote(lv metrics.Level) string {
	t := lv.ToolCalls
	if t == nil {
		return ""
	}
	s := fmt.Sprintf("tools: %d definitions a request (%s tokens by the local count", t.ToolsPerRequest, metrics.Figure(t.DefinitionTokens))
	switch {
	case lv.TemplateTokensPerRequest > 0:
		s += fmt.Sprintf("; the server counted %s prompt tokens a request beyond the messages", metrics.Figure(lv.TemplateTokensPerRequest))
	case lv.ExtraPromptTokensPerRequest > 0:
		s += fmt.Sprintf("; the server counted %s prompt tokens a request beyond the messages' local count", metrics.Figure(lv.ExtraPromptTokensPerRequest))
	}
	s += fmt.Sprintf("); %d of %d completed requests called one (%.0f%%)", t.Called, lv.Requests.Completed, 100*t.Share)
	if c := t.FirstCall; c.Count > 0 {
		s += fmt.Sprintf(", first tool-call delta p50 %s ms, p95 %s ms; arguments %s tokens a call",
			metrics.Figure(c.P50), metrics.Figure(c.P95), metrics.Figure(t.ArgTokensPerCall))
	}
	return s
}

// embedColumns head an embeddings run's level table in report.html.
var embedColumns = []string{"load", "ok", "failed", "latency p50 ms", "latency p95 ms", "latency p99 ms",
	"inputs/s", "tokens/s", "req/s", "dims"}

// embedHTML fills an embeddings run's page: its level table, the rates and
// the latency against load, and each level's latency histogram. Of a
// mixed summary (see Mixed) the table is a second one, of the levels'
// embeddings requests alone, after the streams'.
func embedHTML(d *htmlData, p Page, labels []string, order []int) {
	s := p.Summary
	mixed := Mixed(s)
	lead := metrics.NoTokenStream + ": no TTFT, decode or output figures; latency is t0 to the answer's last byte."
	var rows [][]string
	defer func() {
		if mixed {
			d.EmbedCols, d.EmbedLead, d.EmbedRows = embedColumns, lead, rows
		} else {
			d.Cols, d.Lead, d.Rows = embedColumns, lead, rows
		}
	}()
	var inputs, tokens, lat50, lat95 []float64
	for _, i := range order {
		e := s.Levels[i].Embeddings
		if e == nil {
			e = &metrics.Embeddings{}
		}
		inputs = append(inputs, e.InputsPerS)
		tokens = append(tokens, e.TokensPerS)
		lat50 = append(lat50, valueIf(e.Latency.P50, e.Latency.Count))
		lat95 = append(lat95, valueIf(e.Latency.P95, e.Latency.Count))
	}
	for i := range s.Levels {
		lv := &s.Levels[i]
		ok, failed, rps := embedCounts(lv, mixed)
		e := lv.Embeddings
		if e == nil {
			rows = append(rows, []string{lv.Load.String(), fmt.Sprint(ok), fmt.Sprint(failed),
				"-", "-", "-", "-", "-", num(rps, 1), "-"})
			continue
		}
		rows = append(rows, []string{lv.Load.String(), fmt.Sprint(ok), fmt.Sprint(failed),
			num(e.Latency.P50, e.Latency.Count), num(e.Latency.P95, e.Latency.Count), num(e.Latency.P99, e.Latency.Count),
			num(e.InputsPerS, 1), num(e.TokensPerS, 1), num(rps, 1), fmt.Sprint(e.Dims)})
	}
	if len(labels) > 0 {
		d.Charts = append(d.Charts,
			lineChart("Inputs embedded per second vs load", "inputs/s", labels, []series{{Name: "inputs/s", Color: "#2ca02c", Values: inputs}}),
			lineChart("Tokens embedded per second vs load", "tok/s", labels, []series{{Name: "tokens/s", Color: "#1f77b4", Values: tokens}}),
			lineChart("Embedding latency vs load", "ms", labels, []series{{Name: "latency p50", Color: "#1f77b4", Values: lat50}, {Name: "latency p95", Color: "#d62728", Values: lat95}}),
		)
	}
	for i := range s.Levels {
		var lat []float64
		for j := range p.Records {
			if r := &p.Records[j]; r.Level == i && r.OK && r.EmbedInputs > 0 {
				lat = append(lat, r.DoneMs)
			}
		}
		if len(lat) > 0 {
			d.Hists = append(d.Hists, histogram("Embedding latency at "+s.Levels[i].Load.String(), "ms", lat, "#1f77b4"))
		}
	}
}
