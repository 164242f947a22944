package load

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/tokbench/tokbench/internal/fakellm"
	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/tokenize"
)

// chunkCounter makes the mistake tokbench must not: one token per chunk.
// With it, the local counts of a stream of 3-, 1- and 2-token chunks are
// all alike, so only the server's counts can give each chunk its own.
type chunkCounter struct{ tokenize.Tokenizer }

func (chunkCounter) Count(s string) int { return min(len(s), 1) }

// TestContinuousUsageEndToEnd runs a level against a server that puts its
// running usage in every chunk (also on its role and empty chunks) and
// sends 3, 1, 2 tokens per chunk, as speculative decoding does: every
// record's chunks carry exactly the tokens the server sent in them, and
// ITL has one value per token after the first chunk. The control, the same
// server without per-chunk usage, shows the local counts alone cannot.
func TestContinuousUsageEndToEnd(t *testing.T) {
	const tokens, requests = 24, 8
	sizes := []int{3, 1, 2}
	cases := []struct {
		name       string
		continuous bool
	}{
		{"usage in every chunk", true},
		{"control: usage at the end only", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// The first two chunks (4 tokens) are reasoning.
			s := fakellm.Script{TTFT: 10 * time.Millisecond, Gap: 3 * time.Millisecond, Tokens: tokens, ChunkSizes: sizes,
				Reasoning: 4, Usage: true, ContinuousUsage: c.continuous, RoleChunk: true, EmptyDeltas: true}
			srv := fakellm.New(s)
			t.Cleanup(srv.Close)
			r := newRunner(t, srv)
			r.Tokenizer = chunkCounter{r.Tokenizer}
			res, err := r.RunLevel(context.Background(), 0, Level{Load: metrics.Load{Mode: "concurrency", Concurrency: 4}, Requests: requests}, fixedSource{maxTokens: tokens})
			if err != nil {
				t.Fatal(err)
			}
			lv := res.Level
			if lv.Requests.Completed != requests || lv.OutputTokens != tokens*requests || lv.TokenSource != metrics.SourceUsage {
				t.Fatalf("completed %d, output tokens %d (%s); want %d, %d (usage)",
					lv.Requests.Completed, lv.OutputTokens, lv.TokenSource, requests, tokens*requests)
			}
			exact := 0
			for i, st := range matchStreams(t, res.Records, srv.Streams()) {
				if slices.Equal(res.Records[i].ChunkTokens, st.Tokens) {
					exact++
				} else if c.continuous {
					t.Errorf("record %d: chunk tokens %v, the server sent %v", res.Records[i].ID, res.Records[i].ChunkTokens, st.Tokens)
				}
			}
			if !c.continuous && exact > 0 {
				t.Errorf("%d of %d records had exact chunk tokens from local counts alone: the test cannot tell the methods apart", exact, requests)
			}
			if want := (tokens - sizes[0]) * requests; c.continuous && lv.ITL.Count != want {
				t.Errorf("ITL count %d, want %d (one per token after each first chunk)", lv.ITL.Count, want)
			}
		})
	}
}
