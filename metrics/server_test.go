package metrics

import (
	"math"
	"testing"
)

// TestClientMinusServer: records with known client instants and server
// durations give the exact differences.
func TestClientMinusServer(t *testing.T) {
	rec := func(ttft, step float64, n int, st *ServerTiming) Record {
		r := Record{OK: true, TTFTMs: ttft, OutputTokens: n, Server: st}
		for i := 0; i < n; i++ {
			r.ChunkMs = append(r.ChunkMs, ttft+float64(i)*step)
			r.ChunkTokens = append(r.ChunkTokens, 1)
		}
		r.E2EMs = r.ChunkMs[n-1]
		return r
	}
	recs := []Record{
		// client: TTFT 40, 9 tokens 10 ms apart (100 tok/s), E2E 120.
		// server: 5 load + 25 prefill = 30; decode 80 ms at 112.5 tok/s.
		rec(40, 10, 9, &ServerTiming{LoadMs: 5, PromptMs: 25, PredictedMs: 80, DecodeTPS: 112.5}),
		// client: TTFT 60, 5 tokens 20 ms apart (50 tok/s), E2E 140.
		// server: 0 load + 50 prefill; decode 70 ms at 60 tok/s.
		rec(60, 20, 5, &ServerTiming{PromptMs: 50, PredictedMs: 70, DecodeTPS: 60}),
		// no server timing: not part of the comparison.
		rec(10, 10, 3, nil),
		{OK: false, ErrorClass: "http_500", Server: &ServerTiming{PromptMs: 1}},
	}
	lv := Summarize(Load{Mode: "concurrency", Concurrency: 1}, recs, 1)
	g := lv.ClientMinusServer
	if g == nil || g.Requests != 2 {
		t.Fatalf("client_minus_server = %+v, want 2 requests", g)
	}
	near := func(name string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("%s = %g, want %g", name, got, want)
		}
	}
	// TTFT gaps 10 and 10; decode gaps -12.5 and -10; E2E gaps 10 and 20.
	near("ttft gap min", g.TTFTMs.Min, 10)
	near("ttft gap max", g.TTFTMs.Max, 10)
	near("decode gap min", g.DecodeTPS.Min, -12.5)
	near("decode gap max", g.DecodeTPS.Max, -10)
	near("decode gap p50", g.DecodeTPS.P50, -11.25)
	near("e2e gap p50", g.E2EMs.P50, 15)
	near("server ttft p50", lv.ServerTTFTMs.P50, 40)
	near("server prefill max", lv.ServerPrefillMs.Max, 50)
	near("server decode tps p50", lv.ServerTPS.P50, 86.25)

	if lv := Summarize(Load{Mode: "concurrency", Concurrency: 1}, recs[2:3], 1); lv.ClientMinusServer != nil || lv.ServerTTFTMs != nil {
		t.Errorf("a level without server timing has a comparison: %+v", lv.ClientMinusServer)
	}
}
