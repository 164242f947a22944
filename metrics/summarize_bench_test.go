package metrics

import (
	"testing"
	"time"
)

// BenchmarkSummarize summarizes a level of 4,096 requests of 64 tokens
// each (262,144 tokens), one chunk a token: the work at a level's end.
func BenchmarkSummarize(b *testing.B) {
	recs := make([]Record, 4096)
	for i := range recs {
		r := Record{ID: i, OK: true, OffsetMs: float64(i%64) * 700, TTFTMs: 50 + float64(i%13), OutputTokens: 64,
			TokenSource: SourceUsage, Start: time.Unix(0, 0)}
		for k := range 64 {
			r.ChunkMs = append(r.ChunkMs, r.TTFTMs+float64(k)*10+float64(i%7)*0.1)
			r.ChunkTokens = append(r.ChunkTokens, 1)
		}
		r.E2EMs = r.ChunkMs[63]
		r.DoneMs = r.E2EMs + 1
		recs[i] = r
	}
	load := Load{Mode: ModeConcurrency, Concurrency: 64}
	b.ReportAllocs()
	for b.Loop() {
		if lv := Summarize(load, recs, 0); lv.Requests.Completed != 4096 {
			b.Fatal(lv.Requests)
		}
	}
}
