package metrics

import (
	"strings"
	"testing"
)

func TestSummarizeInputAndReasoningTokens(t *testing.T) {
	rec := func(in, req, reasoning int) Record {
		return Record{OK: true, InputTokens: in, InputTokensRequested: req, OutputTokens: 10, ReasoningTokens: reasoning,
			ChunkMs: []float64{1, 2}, ChunkTokens: []int{5, 5}, E2EMs: 2, DoneMs: 3}
	}
	failed := Record{ErrorClass: "http_500", InputTokensRequested: 100}
	lv := Summarize(Load{Mode: "concurrency", Concurrency: 1, InputTokens: 100},
		[]Record{rec(107, 100, 4), rec(107, 100, 0), failed}, 1)
	if lv.InputTokens != 214 || lv.InputTokensRequested != 200 || lv.TemplateTokensPerRequest != 7 || lv.ReasoningTokens != 4 {
		t.Errorf("input %d requested %d template %g reasoning %d, want 214 200 7 4",
			lv.InputTokens, lv.InputTokensRequested, lv.TemplateTokensPerRequest, lv.ReasoningTokens)
	}
	if len(lv.Warnings) != 0 {
		t.Errorf("warnings %q", lv.Warnings)
	}
	if got := lv.Load.String(); got != "c=1 in=100" {
		t.Errorf("Load.String() = %q", got)
	}
	short := Summarize(Load{Mode: "concurrency", Concurrency: 1}, []Record{rec(90, 100, 0)}, 1)
	if short.TemplateTokensPerRequest != 0 || len(short.Warnings) != 1 || !strings.Contains(short.Warnings[0], "90 prompt tokens for 100") {
		t.Errorf("a server count below the request: template %g, warnings %q", short.TemplateTokensPerRequest, short.Warnings)
	}
}
