package advise

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/tokbench/tokbench/metrics"
)

// WriteText writes the advice for a terminal: per use, each endpoint's
// standing with the figures that decide it, then the choice.
func WriteText(w io.Writer, a *Advice) error {
	var b strings.Builder
	width := 8
	for _, u := range a.Uses {
		for _, s := range u.Endpoints {
			width = max(width, len(s.Endpoint))
		}
	}
	for i, u := range a.Uses {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "%s — %s", u.Profile, u.Description)
		if u.SLOs != "" {
			fmt.Fprintf(&b, " (%s)", u.SLOs)
		}
		b.WriteByte('\n')
		for _, s := range u.Endpoints {
			fmt.Fprintf(&b, "  %-*s  %s\n", width, s.Endpoint, standingLine(s))
		}
		if u.Choice != "" {
			fmt.Fprintf(&b, "  → %s: %s\n", u.Choice, u.Why)
		} else {
			fmt.Fprintf(&b, "  → %s\n", u.Why)
		}
		if u.Note != "" {
			fmt.Fprintf(&b, "  (%s)\n", u.Note)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func standingLine(s Standing) string {
	verdict := "no: " + s.Statement
	if s.Meets {
		verdict = "meets it up to " + s.Load()
	}
	f := s.Level
	if f == nil {
		return verdict
	}
	return fmt.Sprintf("%s; at %s: TTFT p95 %s ms, decode p50 %s tok/s (p5 %s), %s tok/s in all, %s, agent chain %s s",
		verdict, f.Load, metrics.Figure(f.TTFTP95Ms), metrics.Figure(f.DecodeTPSP50), metrics.Figure(f.DecodeTPSP5),
		metrics.Figure(f.OutputTPS), costText(f), metrics.Figure(f.AgentChainS))
}

func costText(f *LevelFigure) string {
	if f.CostPerMillion <= 0 {
		return "no price"
	}
	return fmt.Sprintf("%s per million output tokens (%s)", money(f.CostPerMillion), f.CostBasis)
}

// WriteMarkdown writes the advice as Markdown: a table per use.
func WriteMarkdown(w io.Writer, a *Advice) error {
	var b strings.Builder
	b.WriteString("# Which endpoint for which use\n")
	for _, u := range a.Uses {
		fmt.Fprintf(&b, "\n## %s\n\n%s", u.Profile, u.Description)
		if u.SLOs != "" {
			fmt.Fprintf(&b, " (`%s`)", u.SLOs)
		}
		b.WriteString("\n\n| endpoint | meets | up to | load judged | TTFT p95 ms | decode p50 tok/s | decode p5 tok/s | output tok/s | cost / M output | agent chain s |\n")
		b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
		for _, s := range u.Endpoints {
			meets, upTo := "no", "—"
			if s.Meets {
				meets, upTo = "yes", s.Load()
			}
			f := s.Level
			if f == nil {
				fmt.Fprintf(&b, "| %s | %s | %s | — | — | — | — | — | — | — |\n", mdCell(s.Endpoint), meets, upTo)
				continue
			}
			cost := "—"
			if f.CostPerMillion > 0 {
				cost = money(f.CostPerMillion)
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", mdCell(s.Endpoint), meets, upTo, f.Load,
				metrics.Figure(f.TTFTP95Ms), metrics.Figure(f.DecodeTPSP50), metrics.Figure(f.DecodeTPSP5), metrics.Figure(f.OutputTPS),
				cost, metrics.Figure(f.AgentChainS))
		}
		if u.Choice != "" {
			fmt.Fprintf(&b, "\n**%s**: %s.\n", mdCell(u.Choice), u.Why)
		} else {
			fmt.Fprintf(&b, "\n%s.\n", u.Why)
		}
		if u.Note != "" {
			fmt.Fprintf(&b, "\n_%s._\n", u.Note)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func mdCell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// WriteJSON writes the advice as indented JSON.
func WriteJSON(w io.Writer, a *Advice) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(a)
}
