// Package report renders summaries for people and programs: a terminal
// table and JSON. Renderers write to an io.Writer and never touch the
// terminal themselves.
package report

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/tokbench/tokbench/metrics"
)

// JSON writes the summary as indented JSON.
func JSON(w io.Writer, s metrics.Summary) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(s)
}

// Table writes a human-readable table: one row per level. For decode TPS,
// where higher is better, the second figure is the 5th percentile — the rate
// 95% of requests beat — and is labelled "P95 (slowest 5%)". An
// embeddings run's table has its own columns (no token stream: latency,
// inputs and tokens embedded per second). The notes after the table are
// written in the order they print, in one function (tableNotes).
func Table(w io.Writer, s metrics.Summary) error {
	t := s.Target
	sim := ""
	if t.Simulated {
		sim = " (simulated)"
	}
	fmt.Fprintf(w, "target %s%s  api %s  model %s\n", t.URL, sim, t.API, t.ModelDesc())
	if s.Interrupted {
		fmt.Fprintln(w, "INTERRUPTED: the last level is partial")
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	mixed := Mixed(s)
	if !Embeddings(s) || mixed {
		streamTable(tw, s)
	}
	if mixed {
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	if Embeddings(s) {
		embedTable(w, tw, s, mixed)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if mixed {
		fmt.Fprintln(w, "\n"+MixedNote)
	}
	notes := tableNotes(s)
	if len(notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range notes {
			fmt.Fprintln(w, n)
		}
	}
	return nil
}

// streamTable writes a streamed run's rows.
func streamTable(tw io.Writer, s metrics.Summary) {
	// Open-loop levels also show TTFT from each request's scheduled send:
	// the figure a late client cannot hide (coordinated omission).
	sched := false
	for _, lv := range s.Levels {
		sched = sched || lv.TTFTSched != nil
	}
	head := "load\tok\tfail\tTTFT p50\tp95\tp99 ms\t"
	if sched {
		// Led by TTFT from the schedule, labelled apart from the send's.
		head = "load\tok\tfail\tTTFT from schedule p50\tp95\tp99 ms\tfrom send p50\tp95\tp99 ms\t"
	}
	fmt.Fprintln(tw, head+"decode TPS p50\tP95 (slowest 5%)\tTPOT p50 ms\tITL p50\tp99 ms\tE2E p50 ms\tout tok/s\treq/s\t")
	for _, lv := range s.Levels {
		fmt.Fprintf(tw, "%s\t%d\t%d\t", lv.Load, lv.Requests.Completed, lv.Requests.Failed)
		if st := lv.TTFTSched; sched && st != nil {
			fmt.Fprintf(tw, "%s\t%s\t%s\t", num(st.P50, st.Count), num(st.P95, st.Count), num(st.P99, st.Count))
		} else if sched {
			fmt.Fprint(tw, "-\t-\t-\t") // a closed loop has no schedule
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t", num(lv.TTFT.P50, lv.TTFT.Count), num(lv.TTFT.P95, lv.TTFT.Count), num(lv.TTFT.P99, lv.TTFT.Count))
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
			num(lv.DecodeTPS.P50, lv.DecodeTPS.Count), num(lv.DecodeTPS.P5, lv.DecodeTPS.Count),
			num(lv.TPOT.P50, lv.TPOT.Count),
			num(lv.ITL.P50, lv.ITL.Count), num(lv.ITL.P99, lv.ITL.Count),
			num(lv.E2E.P50, lv.E2E.Count),
			num(lv.OutputTPS, 1), num(lv.RequestRPS, 1))
	}
}

// tableNotes are the lines after the table, in the order they print.
func tableNotes(s metrics.Summary) []string {
	var notes []string
	for _, lv := range s.Levels {
		if lv.SLO != nil {
			verdict := "PASS"
			if !lv.SLO.Met {
				verdict = "FAIL"
			}
			var parts []string
			for _, c := range lv.SLO.Checks {
				mark := "ok"
				if !c.Met {
					mark = "BROKEN"
				}
				parts = append(parts, fmt.Sprintf("%s: %s %s", c.Expr, metrics.Figure(c.Value), mark))
			}
			notes = append(notes, fmt.Sprintf("%s: SLO %s (%s); goodput %s req/s", lv.Load, verdict, strings.Join(parts, ", "), metrics.Figure(lv.GoodputRPS)))
		}
		if r := lv.Repeats; r != nil {
			sp := r.Spread
			f := metrics.Figure
			notes = append(notes, fmt.Sprintf("%s: %s of %d runs; TTFT p50 %s–%s ms, decode TPS p50 %s–%s, output %s–%s tok/s",
				lv.Load, cmp.Or(r.Fold, "median"), r.Runs, f(sp["ttft_p50"][0]), f(sp["ttft_p50"][1]), f(sp["decode_tps_p50"][0]), f(sp["decode_tps_p50"][1]), f(sp["output_tps"][0]), f(sp["output_tps"][1])))
		}
		if lv.Retries > 0 {
			notes = append(notes, fmt.Sprintf("%s: %d retries (--retry) after failures before the first token; each request counted once", lv.Load, lv.Retries))
		}
		if n := lv.Connections.Note(); n != "" {
			notes = append(notes, fmt.Sprintf("%s: %s", lv.Load, n))
		}
		if c := lv.ChainMs; c != nil {
			what, many := "agent chain", "chains"
			if lv.ChainKind == metrics.ChainConversation {
				what, many = "conversation", "conversations"
			}
			notes = append(notes, fmt.Sprintf("%s: %s wall-clock p50 %s s, p95 %s s over %d %s", lv.Load, what, metrics.Figure(c.P50/1000), metrics.Figure(c.P95/1000), c.Count, many))
		}
		for _, n := range lv.Notes {
			notes = append(notes, fmt.Sprintf("%s: %s", lv.Load, n))
		}
		if n := TurnsNote(lv.Turns); n != "" {
			notes = append(notes, fmt.Sprintf("%s: %s", lv.Load, n))
		}
		if c := lv.Cost; c != nil {
			notes = append(notes, fmt.Sprintf("%s: %s per million output tokens (%s)", lv.Load, metrics.Figure(c.PerMillionOutput), c.Basis))
		}
		if n := ToolNote(lv); n != "" {
			notes = append(notes, fmt.Sprintf("%s: %s", lv.Load, n))
		}
	}
	if s.Profile != "" {
		notes = append(notes, "profile: "+s.Profile)
	}
	if s.Capacity != nil {
		notes = append(notes, "capacity: "+s.Capacity.Statement)
	}
	if len(s.Levels) > 1 && !Embeddings(s) {
		best := 0
		for i, lv := range s.Levels {
			if lv.OutputTPS > s.Levels[best].OutputTPS {
				best = i
			}
		}
		b := s.Levels[best]
		notes = append(notes, fmt.Sprintf("peak aggregate throughput: %s tok/s at %s (decode p50 %s tok/s per user)", num(b.OutputTPS, 1), b.Load, num(b.DecodeTPS.P50, b.DecodeTPS.Count)))
	}
	if s.Knee != nil {
		notes = append(notes, s.Knee.Statement)
	}
	if s.Context != nil {
		notes = append(notes, s.Context.Statement)
	}
	if s.MediaCost != nil {
		notes = append(notes, s.MediaCost.Note())
	}
	source, doubt := "", ""
	for _, lv := range s.Levels {
		if ph := lv.Physics; ph != nil && lv.DecodeTPS.Count > 0 {
			mark := ""
			if ph.Doubt != "" {
				mark, doubt = " (DOUBTFUL: see below)", ph.Doubt
			}
			notes = append(notes, fmt.Sprintf("%s: decode p50 %s tok/s = %.0f%% of the %s tok/s single-stream ceiling (%s, %d-token context); MBU %.0f%%%s",
				lv.Load, num(lv.DecodeTPS.P50, 1), 100*ph.CeilingFraction, num(ph.DecodeTPSCeiling, 1), ph.Deployment, ph.ContextTokens, 100*ph.MBU, mark))
			if ph.Note != "" {
				notes = append(notes, fmt.Sprintf("%s: %s", lv.Load, ph.Note))
			}
			source = ph.Source
		}
	}
	if t := telemetrySource(s.Levels); t != "" {
		source = strings.TrimPrefix(source+"; "+t, "; ")
	}
	if source != "" {
		notes = append(notes, "physics: "+source) // once: every level's is the run's
	}
	if doubt != "" {
		notes = append(notes, "DOUBTFUL ceiling and MBU: "+doubt)
	}
	for _, lv := range s.Levels {
		if n := serverNote(lv); n != "" {
			notes = append(notes, n)
		}
		if n := serverMetricsNote(lv); n != "" {
			notes = append(notes, n)
		}
		if n := GPUNote(lv); n != "" {
			notes = append(notes, n)
		}
	}
	notes = append(notes, levelNotes(s.Levels)...)
	notes = append(notes, s.Warnings...)
	if len(s.Levels) > 0 && !Embeddings(s) {
		src := s.Levels[0].TokenSource
		switch src {
		case metrics.SourceUsage:
			notes = append(notes, "output tokens: server-reported usage")
		case metrics.SourceTokenizer:
			notes = append(notes, "output tokens: counted locally with the tokenizer (the server sent no usage)")
		case metrics.SourceMixed:
			notes = append(notes, "output tokens: usage where the server sent it, the tokenizer elsewhere")
		}
	}
	return notes
}

// levelNotes are the levels' failures, by class with the first message of
// each, and their warnings, one line each.
func levelNotes(levels []metrics.Level) []string {
	var notes []string
	for _, lv := range levels {
		if lv.Requests.Failed > 0 {
			notes = append(notes, fmt.Sprintf("%s: %d failed: %s", lv.Load, lv.Requests.Failed, errorList(lv.Requests)))
		}
		if n := lv.Requests.Interrupted; n > 0 {
			notes = append(notes, fmt.Sprintf("%s: %d interrupted: streams cut when the grace after the interrupt ran out, kept with what they measured; not counted as failed", lv.Load, n))
		}
		for _, wn := range lv.Warnings {
			notes = append(notes, fmt.Sprintf("%s: %s", lv.Load, wn))
		}
	}
	return notes
}

// errorList is "class ×n (first message), …" in class order.
func errorList(r metrics.Requests) string {
	keys := slices.Sorted(maps.Keys(r.Errors))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s ×%d", k, r.Errors[k])
		if msg := r.ErrorSamples[k]; msg != "" {
			if rs := []rune(msg); len(rs) > 160 {
				msg = string(rs[:160]) + "…"
			}
			parts[i] += " (" + msg + ")"
		}
	}
	return strings.Join(parts, ", ")
}

// num formats a figure as metrics.Figure does; "-" when there were no
// samples.
func num(v float64, count int) string {
	if count == 0 {
		return "-"
	}
	return metrics.Figure(v)
}

// serverMetricsNote is the line for the server's own /metrics means.
func serverMetricsNote(lv metrics.Level) string {
	sm := lv.ServerMetrics
	if sm == nil {
		return ""
	}
	if sm.Engine == "llamacpp" {
		return fmt.Sprintf("%s: llama.cpp /metrics over the level: %d prompt tokens at %s tok/s, %d generated at %s tok/s (per busy slot)",
			lv.Load, sm.PromptTokens, metrics.Figure(sm.PromptTokensPerSecond), sm.PredictedTokens, metrics.Figure(sm.PredictedTokensPerSecond))
	}
	var server, gap []string
	for _, m := range []struct {
		name string
		v    float64
	}{{"TTFT", sm.TTFTMsMean}, {"TPOT", sm.TPOTMsMean}, {"E2E", sm.E2EMsMean}} {
		if m.v > 0 {
			server = append(server, fmt.Sprintf("%s %s ms", m.name, metrics.Figure(m.v)))
		}
	}
	if sm.TTFTMsP50 > 0 {
		server = append(server, fmt.Sprintf("TTFT p50 %s ms, p99 %s ms (its histogram)", metrics.Figure(sm.TTFTMsP50), metrics.Figure(sm.TTFTMsP99)))
	}
	if g := sm.ClientMinus; g != nil {
		for _, m := range []struct {
			name string
			v    float64
		}{{"TTFT", g.TTFTMs}, {"TPOT", g.TPOTMs}, {"E2E", g.E2EMs}} {
			if m.v != 0 {
				gap = append(gap, fmt.Sprintf("%s %+.4g ms", m.name, m.v))
			}
		}
	}
	line := fmt.Sprintf("%s: server /metrics mean %s over %d requests", lv.Load, strings.Join(server, ", "), sm.Requests)
	if len(gap) > 0 {
		line += "; client − server mean: " + strings.Join(gap, ", ")
	}
	return line
}

// TurnsNote is a conversation level's figures by turn ("" for a level of
// single requests): each turn's prompt, TTFT p50 and decode rate p50, the
// first and last turns always, the middle ones while they fit.
func TurnsNote(turns []metrics.TurnStats) string {
	if len(turns) < 2 {
		return ""
	}
	var parts []string
	for i, t := range turns {
		if len(turns) > 8 && i >= 3 && i < len(turns)-3 {
			if i == 3 {
				parts = append(parts, "…")
			}
			continue
		}
		parts = append(parts, fmt.Sprintf("%d: %.0f tok in, TTFT %s ms, decode %s tok/s", t.Turn, t.InputTokens.P50,
			metrics.Figure(t.TTFT.P50), metrics.Figure(t.DecodeTPS.P50)))
	}
	return "by turn (p50s): " + strings.Join(parts, "; ")
}
