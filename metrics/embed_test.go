package metrics

import "testing"

// TestEmbeddingsLevel: an embeddings level's inputs, tokens and their
// rates are exact over its records and wall time, its latency is each
// request's end, and it has no stream figures.
func TestEmbeddingsLevel(t *testing.T) {
	var recs []Record
	for i := range 5 {
		recs = append(recs, Record{OK: true, EmbedInputs: 4, EmbedDims: 384, InputTokens: 512 + i, TokenSource: SourceUsage, DoneMs: float64(10 * (i + 1))})
	}
	recs = append(recs, Record{OK: false, ErrorClass: "http_500", EmbedInputs: 4})
	lv := Summarize(Load{Mode: ModeConcurrency, Concurrency: 2}, recs, 2.5)
	e := lv.Embeddings
	if e == nil {
		t.Fatal("no embeddings figures")
	}
	tokens := 512*5 + 10
	if e.Inputs != 20 || e.Tokens != tokens || e.InputsPerS != 20/2.5 || e.TokensPerS != float64(tokens)/2.5 || e.Dims != 384 || e.TokenSource != EmbedSourceUsage {
		t.Errorf("embeddings %+v", *e)
	}
	if e.Latency.Count != 5 || e.Latency.P50 != 30 || e.Latency.Max != 50 {
		t.Errorf("latency %+v", e.Latency)
	}
	if lv.TTFT.Count != 0 || lv.E2E.Count != 0 || lv.OutputTokens != 0 || lv.InputTokens != tokens || lv.Requests.Failed != 1 {
		t.Errorf("stream figures of an embeddings level: ttft %d, e2e %d, output %d, input %d", lv.TTFT.Count, lv.E2E.Count, lv.OutputTokens, lv.InputTokens)
	}
	m, stat, err := ParseStat("embed_latency_p50")
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := m.Of(&lv, stat); !ok || v != 30 {
		t.Errorf("embed_latency_p50 = %v, %v", v, ok)
	}
	rate, _ := Lookup("embed_inputs_per_s")
	if v, ok := rate.Of(&lv, ""); !ok || v != 8 {
		t.Errorf("embed_inputs_per_s = %v, %v", v, ok)
	}
	chat := Summarize(Load{Mode: ModeConcurrency, Concurrency: 1}, []Record{{OK: true, TTFTMs: 5, E2EMs: 9, OutputTokens: 2, ChunkMs: []float64{5, 9}, ChunkTokens: []int{1, 1}}}, 1)
	if _, ok := rate.Of(&chat, ""); ok || chat.Embeddings != nil || rate.Present(&chat) {
		t.Error("a chat level has an embeddings rate")
	}
	recs[0].TokenSource = SourceTokenizer
	if lv := Summarize(Load{Mode: ModeConcurrency, Concurrency: 2}, recs, 2.5); lv.Embeddings.TokenSource != EmbedSourceMixed {
		t.Errorf("token source %q, want mixed", lv.Embeddings.TokenSource)
	}
}

// TestToolCallsLevel: the share that called, the time to the first
// tool-call delta of those that did, their argument tokens.
func TestToolCallsLevel(t *testing.T) {
	rec := func(called bool, at float64, args int) Record {
		return Record{OK: true, TTFTMs: 50, E2EMs: 90, OutputTokens: 2, ChunkMs: []float64{50, 90}, ChunkTokens: []int{1, 1},
			ToolsSent: 8, ToolTokens: 640, ToolCalled: called, ToolCallMs: at, ToolArgTokens: args}
	}
	lv := Summarize(Load{Mode: ModeConcurrency, Concurrency: 1}, []Record{rec(true, 40, 10), rec(true, 60, 14), rec(false, 0, 0), rec(true, 80, 6)}, 1)
	tc := lv.ToolCalls
	if tc == nil {
		t.Fatal("no tool figures")
	}
	if tc.ToolsPerRequest != 8 || tc.DefinitionTokens != 640 || tc.Called != 3 || tc.Share != 0.75 ||
		tc.FirstCall.Count != 3 || tc.FirstCall.P50 != 60 || tc.FirstCall.Min != 40 || tc.ArgTokens != 30 || tc.ArgTokensPerCall != 10 {
		t.Errorf("tool calls %+v", *tc)
	}
	share, _ := Lookup("tool_call_share")
	if v, ok := share.Of(&lv, ""); !ok || v != 0.75 {
		t.Errorf("tool_call_share = %v, %v", v, ok)
	}
	if lv := Summarize(Load{Mode: ModeConcurrency, Concurrency: 1}, []Record{{OK: true, TTFTMs: 1, E2EMs: 1, OutputTokens: 1, ChunkMs: []float64{1}, ChunkTokens: []int{1}}}, 1); lv.ToolCalls != nil {
		t.Error("a level without tools has tool figures")
	}
}
