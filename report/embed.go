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

// embedTable writes an embeddings run's rows: latency, inputs and tokens
// embedded per second; no TTFT or decode columns, which the line above
// the table says.
func embedTable(w io.Writer, tw io.Writer, s metrics.Summary) {
	fmt.Fprintln(w, metrics.NoTokenStream+" (no TTFT, decode TPS, ITL or output tokens); latency is t0 to the answer's last byte")
	fmt.Fprintln(tw, "load\tok\tfail\tlatency p50\tp95\tp99 ms\tinputs/s\ttokens/s\treq/s\tinputs/req\tdims\ttokens from\t")
	for _, lv := range s.Levels {
		fmt.Fprintf(tw, "%s\t%d\t%d\t", lv.Load, lv.Requests.Completed, lv.Requests.Failed)
		e := lv.Embeddings
		if e == nil {
			fmt.Fprintf(tw, "-\t-\t-\t-\t-\t%s\t-\t-\t-\t\n", num(lv.RequestRPS, 1))
			continue
		}
		perReq := 0.0
		if lv.Requests.Completed > 0 {
			perReq = float64(e.Inputs) / float64(lv.Requests.Completed)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t\n",
			num(e.Latency.P50, e.Latency.Count), num(e.Latency.P95, e.Latency.Count), num(e.Latency.P99, e.Latency.Count),
			num(e.InputsPerS, 1), num(e.TokensPerS, 1), num(lv.RequestRPS, 1), num(perReq, 1), e.Dims, embedSource(e.TokenSource))
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
// the latency against load, and each level's latency histogram.
func embedHTML(d *htmlData, p Page, labels []string, order []int) {
	s := p.Summary
	d.Cols = embedColumns
	d.Lead = metrics.NoTokenStream + ": no TTFT, decode or output figures; latency is t0 to the answer's last byte."
	d.Rows = d.Rows[:0]
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
		e := lv.Embeddings
		if e == nil {
			d.Rows = append(d.Rows, []string{lv.Load.String(), fmt.Sprint(lv.Requests.Completed), fmt.Sprint(lv.Requests.Failed),
				"-", "-", "-", "-", "-", num(lv.RequestRPS, 1), "-"})
			continue
		}
		d.Rows = append(d.Rows, []string{lv.Load.String(), fmt.Sprint(lv.Requests.Completed), fmt.Sprint(lv.Requests.Failed),
			num(e.Latency.P50, e.Latency.Count), num(e.Latency.P95, e.Latency.Count), num(e.Latency.P99, e.Latency.Count),
			num(e.InputsPerS, 1), num(e.TokensPerS, 1), num(lv.RequestRPS, 1), fmt.Sprint(e.Dims)})
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
