package report

import (
	"bytes"
	"html"
	"regexp"
	"strings"
	"testing"

	"github.com/tokbench/tokbench/metrics"
)

// embedSummary is an embeddings run's summary with its records.
func embedSummary() (metrics.Summary, []metrics.Record) {
	load := metrics.Load{Mode: metrics.ModeConcurrency, Concurrency: 4}
	var recs []metrics.Record
	for i := range 10 {
		recs = append(recs, metrics.Record{OK: true, Load: load, EmbedInputs: 16, EmbedDims: 384, InputTokens: 4096,
			TokenSource: metrics.SourceUsage, DoneMs: float64(150 + i)})
	}
	lv := metrics.Summarize(load, recs, 2)
	return metrics.Summary{Schema: metrics.Schema, Target: metrics.Target{API: "openai-embeddings", Model: "m", Simulated: true},
		Levels: []metrics.Level{lv}}, recs
}

// TestEmbeddingsOutputs: the table, Markdown and report.html of an
// embeddings run say there is no token stream and show its latency and
// rates, not zeros in stream columns.
func TestEmbeddingsOutputs(t *testing.T) {
	s, recs := embedSummary()
	var tb, md, page bytes.Buffer
	if err := Table(&tb, s); err != nil {
		t.Fatal(err)
	}
	if err := Markdown(&md, s); err != nil {
		t.Fatal(err)
	}
	if err := WriteHTML(&page, Page{Summary: s, Records: recs}); err != nil {
		t.Fatal(err)
	}
	// 160 inputs and 40960 tokens over 2 s; latency p50 of 150…159 ms.
	for name, out := range map[string]string{"table": tb.String(), "markdown": md.String(), "html": page.String()} {
		for _, want := range []string{metrics.NoTokenStream, "154.5", "80.00", "20480"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s lacks %q:\n%s", name, want, out)
			}
		}
		if strings.Contains(out, "TTFT p50") || strings.Contains(out, "decode TPS p50") {
			t.Errorf("%s shows stream columns:\n%s", name, out)
		}
	}
	if !strings.Contains(page.String(), "Embedding latency at c=4") || strings.Contains(page.String(), "TTFT at c=4") {
		t.Error("report.html lacks the latency histogram or has a TTFT one")
	}
}

// TestToolCallsOutputs: a run with tools says how many called one and
// when, in the table's notes, Markdown and report.html.
func TestToolCallsOutputs(t *testing.T) {
	load := metrics.Load{Mode: metrics.ModeConcurrency, Concurrency: 1}
	var recs []metrics.Record
	for i := range 4 {
		recs = append(recs, metrics.Record{OK: true, TTFTMs: 40, E2EMs: 90, OutputTokens: 2, ChunkMs: []float64{40, 90}, ChunkTokens: []int{1, 1},
			ToolsSent: 8, ToolTokens: 700, ToolCalled: i < 3, ToolCallMs: 40, ToolArgTokens: 12})
	}
	s := metrics.Summary{Schema: metrics.Schema, Target: metrics.Target{API: "openai-chat", Model: "m"}, Levels: []metrics.Level{metrics.Summarize(load, recs, 1)}}
	var tb, md, page bytes.Buffer
	Table(&tb, s)
	Markdown(&md, s)
	if err := WriteHTML(&page, Page{Summary: s, Records: recs}); err != nil {
		t.Fatal(err)
	}
	want := "tools: 8 definitions a request (700.0 tokens by the local count); 3 of 4 completed requests called one (75%), first tool-call delta p50 40.00 ms"
	for name, out := range map[string]string{"table": tb.String(), "markdown": md.String(), "html": page.String()} {
		if !strings.Contains(out, want) {
			t.Errorf("%s lacks %q:\n%s", name, want, out)
		}
	}
}

// TestMixedOutputs: a level of completions and embeddings together (the
// proxy's live level) shows both tables: the completions' TTFT, and the
// embeddings' own counts (4 completed, 1 failed), rate and latency.
func TestMixedOutputs(t *testing.T) {
	load := metrics.Load{Mode: metrics.ModeLive}
	var recs []metrics.Record
	for i := range 6 {
		recs = append(recs, metrics.Record{OK: true, Load: load, TTFTMs: 40 + float64(i), E2EMs: 200, ChunkMs: []float64{40 + float64(i), 200},
			ChunkTokens: []int{1, 9}, OutputTokens: 10, TokenSource: metrics.SourceUsage})
	}
	for i := range 4 {
		recs = append(recs, metrics.Record{OK: true, Load: load, EmbedInputs: 8, EmbedDims: 768, InputTokens: 100,
			TokenSource: metrics.SourceTokenizer, DoneMs: float64(70 + i)})
	}
	recs = append(recs, metrics.Record{Load: load, EmbedInputs: 8, ErrorClass: "http_503"})
	s := metrics.Summary{Schema: metrics.Schema, Target: metrics.Target{API: "proxy"},
		Levels: []metrics.Level{metrics.Summarize(load, recs, 2)}}
	if !Mixed(s) || s.Levels[0].Embeddings.Failed != 1 {
		t.Fatalf("not read as mixed: %+v", s.Levels[0].Embeddings)
	}
	var tb, md, page bytes.Buffer
	if err := Table(&tb, s); err != nil {
		t.Fatal(err)
	}
	if err := Markdown(&md, s); err != nil {
		t.Fatal(err)
	}
	if err := WriteHTML(&page, Page{Summary: s, Records: recs}); err != nil {
		t.Fatal(err)
	}
	// Completions: TTFT p50 42.5 ms, 30 tok/s. Embeddings: latency p50
	// 71.5 ms, 32 inputs and 400 tokens over 2 s, 4 of 2 s = 2.0 req/s.
	for name, out := range map[string]string{"table": tb.String(), "markdown": md.String(), "html": html.UnescapeString(page.String())} {
		for _, want := range []string{"TTFT p50", "42.50", metrics.NoTokenStream, "71.50", "16.00", "200.0", MixedNote} {
			if !strings.Contains(out, want) {
				t.Errorf("%s lacks %q:\n%s", name, want, out)
			}
		}
	}
	if !regexp.MustCompile(`live +4 +1 +71\.50`).MatchString(tb.String()) {
		t.Errorf("the table's embeddings row does not count 4 completed and 1 failed:\n%s", tb.String())
	}
}
