package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/tokbench/tokbench/metrics"
)

// Markdown writes the summary as GitHub-flavoured Markdown for pull-request
// comments and issues: a heading naming the target, one table row per
// level, then failures and warnings as a list. Decode TPS shows the 5th
// percentile as "P95 (slowest 5%)", the rate 95% of requests beat.
func Markdown(w io.Writer, s metrics.Summary) error {
	var b strings.Builder
	t := s.Target
	sim := ""
	if t.Simulated {
		sim = " (simulated)"
	}
	fmt.Fprintf(&b, "### tokbench: %s%s\n\n", mdEscape(t.ModelDesc()), sim)
	fmt.Fprintf(&b, "`%s` · api `%s`\n\n", t.URL, t.API)
	if s.Interrupted {
		b.WriteString("> **Interrupted:** the last level is partial.\n\n")
	}
	mixed := Mixed(s)
	if !Embeddings(s) || mixed {
		streamMarkdown(&b, s)
	}
	if mixed {
		b.WriteString("\n")
	}
	if Embeddings(s) {
		embedMarkdown(&b, s, mixed)
	}
	if mixed {
		b.WriteString("\n_" + MixedNote + "._\n")
	}
	var notes []string
	notes = append(notes, levelNotes(s.Levels)...)
	for _, lv := range s.Levels {
		if n := ToolNote(lv); n != "" {
			notes = append(notes, fmt.Sprintf("%s: %s", lv.Load, n))
		}
	}
	notes = append(notes, s.Warnings...)
	if len(notes) > 0 {
		b.WriteString("\n")
		for _, n := range notes {
			fmt.Fprintf(&b, "- %s\n", mdEscape(n))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// embedMarkdown writes an embeddings run's rows.
func embedMarkdown(b *strings.Builder, s metrics.Summary, mixed bool) {
	b.WriteString("_" + metrics.NoTokenStream + ": no TTFT or decode figures; latency is t0 to the answer's last byte._\n\n")
	b.WriteString("| load | ok | fail | latency p50 ms | latency p95 ms | latency p99 ms | inputs/s | tokens/s | req/s |\n")
	b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for i := range s.Levels {
		lv := &s.Levels[i]
		ok, failed, rps := embedCounts(lv, mixed)
		e := lv.Embeddings
		if e == nil {
			e = &metrics.Embeddings{}
		}
		n := 0
		if lv.Embeddings != nil {
			n = 1
		}
		fmt.Fprintf(b, "| %s | %d | %d | %s | %s | %s | %s | %s | %s |\n",
			mdEscape(lv.Load.String()), ok, failed,
			num(e.Latency.P50, e.Latency.Count), num(e.Latency.P95, e.Latency.Count), num(e.Latency.P99, e.Latency.Count),
			num(e.InputsPerS, n), num(e.TokensPerS, n), num(rps, 1))
	}
}

// streamMarkdown writes a streamed run's rows.
func streamMarkdown(b *strings.Builder, s metrics.Summary) {
	b.WriteString("| load | ok | fail | TTFT p50 ms | TTFT p95 ms | TTFT p99 ms | decode TPS p50 | decode TPS P95 (slowest 5%) | TPOT p50 ms | ITL p99 ms | E2E p50 ms | out tok/s | req/s |\n")
	b.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, lv := range s.Levels {
		fmt.Fprintf(b, "| %s | %d | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			mdEscape(lv.Load.String()), lv.Requests.Completed, lv.Requests.Failed,
			num(lv.TTFT.P50, lv.TTFT.Count), num(lv.TTFT.P95, lv.TTFT.Count), num(lv.TTFT.P99, lv.TTFT.Count),
			num(lv.DecodeTPS.P50, lv.DecodeTPS.Count), num(lv.DecodeTPS.P5, lv.DecodeTPS.Count),
			num(lv.TPOT.P50, lv.TPOT.Count), num(lv.ITL.P99, lv.ITL.Count),
			num(lv.E2E.P50, lv.E2E.Count), num(lv.OutputTPS, 1), num(lv.RequestRPS, 1))
	}
}

// mdEscape keeps text from breaking a table or turning into markup.
func mdEscape(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ", "<", "&lt;", ">", "&gt;").Replace(s)
}
