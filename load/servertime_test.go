package load

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/tokbench/tokbench/api"
	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/tokenize"
)

// TestServerTokenStamps: an Ollama-speaking server stamps each line's
// created_at as it writes it; the record's first_token_ms and
// last_token_ms are the first and last token lines' stamps less t0,
// exactly, and the client reads each of those chunks after the server
// stamped it.
func TestServerTokenStamps(t *testing.T) {
	const tokens = 6
	var mu sync.Mutex
	var stamps [][]time.Time // per request, each token line's created_at
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var mine []time.Time
		for i := range tokens {
			time.Sleep(2 * time.Millisecond)
			now := time.Now().UTC()
			mine = append(mine, now)
			fmt.Fprintf(w, `{"model":"m","created_at":%q,"message":{"role":"assistant","content":"w%d "},"done":false}`+"\n", now.Format(time.RFC3339Nano), i)
			w.(http.Flusher).Flush()
		}
		// The done line's own stamp is later and is no token's.
		fmt.Fprintf(w, `{"model":"m","created_at":%q,"message":{"role":"assistant","content":""},"done":true,"done_reason":"length","load_duration":1000,"prompt_eval_count":2,"prompt_eval_duration":2000000,"eval_count":%d,"eval_duration":12000000}`+"\n",
			time.Now().Add(time.Second).UTC().Format(time.RFC3339Nano), tokens)
		mu.Lock()
		stamps = append(stamps, mine)
		mu.Unlock()
	}))
	defer srv.Close()
	tok, err := tokenize.Get("cl100k_base")
	if err != nil {
		t.Fatal(err)
	}
	r := &Runner{
		Client:    &api.Client{HTTP: srv.Client(), Adapter: api.Ollama{Chat: true}, BaseURL: srv.URL},
		Tokenizer: tok, Timeout: 10 * time.Second,
	}
	res, err := r.RunLevel(context.Background(), 0, Level{Load: metrics.Load{Mode: metrics.ModeConcurrency, Concurrency: 1}, Requests: 3}, fixedSource{maxTokens: tokens})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Records) != 3 || len(stamps) != 3 {
		t.Fatalf("%d records, %d answers stamped; want 3 and 3", len(res.Records), len(stamps))
	}
	for i, rec := range res.Records {
		s := rec.Server
		if !rec.OK || s == nil || len(rec.ChunkMs) != tokens {
			t.Fatalf("record %d: ok %v, server %+v, %d chunks", i, rec.OK, s, len(rec.ChunkMs))
		}
		// One user: records in the order the answers were written.
		want := stamps[i]
		wall := rec.Start.Round(0)
		first, last := float64(want[0].Sub(wall))/1e6, float64(want[tokens-1].Sub(wall))/1e6
		if s.FirstTokenMs != first || s.LastTokenMs != last {
			t.Errorf("record %d: server stamps %.6f … %.6f ms after t0, want %.6f … %.6f", i, s.FirstTokenMs, s.LastTokenMs, first, last)
		}
		if rec.ChunkMs[0] < s.FirstTokenMs || rec.ChunkMs[tokens-1] < s.LastTokenMs {
			t.Errorf("record %d: chunks read at %.3f and %.3f ms, before the server stamped them at %.3f and %.3f",
				i, rec.ChunkMs[0], rec.ChunkMs[tokens-1], s.FirstTokenMs, s.LastTokenMs)
		}
	}
}
