package sim

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestEmbeddingsRoutes: each route answers one vector per input in its
// protocol's shape, with the tokens it counted where the protocol says.
func TestEmbeddingsRoutes(t *testing.T) {
	_, hs := testServer(t, func(c *Config) { c.EmbedDims = 16 })
	ctx := context.Background()
	// 3 + 2 + 1 words: 6 tokens.
	resp := post(t, ctx, hs.URL+"/v1/embeddings", `{"model":"m","input":["a b c","d e","f"]}`)
	var oa struct {
		Data []struct {
			Index     int       `json:"index"`
			Embedding []float64 `json:"embedding"`
		} `json:"data"`
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&oa); err != nil || resp.StatusCode != 200 {
		t.Fatalf("openai: %d %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	if len(oa.Data) != 3 || len(oa.Data[2].Embedding) != 16 || oa.Data[2].Index != 2 || oa.Usage.PromptTokens != 6 {
		t.Errorf("openai answer %+v", oa)
	}
	resp = post(t, ctx, hs.URL+"/api/embed", `{"model":"m","input":"one two three four"}`)
	var ol struct {
		Embeddings      [][]float64 `json:"embeddings"`
		PromptEvalCount int         `json:"prompt_eval_count"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&ol); err != nil || len(ol.Embeddings) != 1 || ol.PromptEvalCount != 4 {
		t.Errorf("ollama answer %+v, %v", ol, err)
	}
	resp.Body.Close()
	resp = post(t, ctx, hs.URL+"/embed", `{"inputs":["x","y"]}`)
	var tei [][]float64
	if err := json.NewDecoder(resp.Body).Decode(&tei); err != nil || len(tei) != 2 || len(tei[1]) != 16 {
		t.Errorf("tei answer %v, %v", tei, err)
	}
	resp.Body.Close()
	for _, body := range []string{`{"input":[]}`, `{"input":7}`, `{}`, `{"inputs":"x"`} {
		resp := post(t, ctx, hs.URL+"/v1/embeddings", body)
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", body, resp.StatusCode, msg)
		}
	}
}

// TestEmbeddingsTooLong: an input past the model's context, or inputs
// past the KV cache together, are refused before the engine sees them.
func TestEmbeddingsTooLong(t *testing.T) {
	_, hs := testServer(t, func(c *Config) { c.MaxModelLen = 8 })
	resp := post(t, context.Background(), hs.URL+"/v1/embeddings", `{"input":["a b c d e f g h i"]}`)
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(msg), "maximum is 8") {
		t.Errorf("%d %s", resp.StatusCode, msg)
	}
}

// TestEmbeddingCostVirtual: in virtual time an embeddings request costs
// its inputs' prefill on the physics — one step of their summed tokens
// when they fit the step's budget, two chunks when they are twice it —
// and two requests arriving together are batched into one step.
func TestEmbeddingCostVirtual(t *testing.T) {
	cfg := DefaultConfig()
	cost, err := DeploymentCost(cfg.Model, cfg.Quant, cfg.Hardware, cfg.GPUs)
	if err != nil {
		t.Fatal(err)
	}
	run := func(reqs ...Request) []time.Duration {
		eng, err := NewEngine(cfg.Engine, cost)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range reqs {
			if err := eng.Submit(r); err != nil {
				t.Fatal(err)
			}
		}
		var done []time.Duration
		for {
			res, ok := eng.Step()
			if !ok {
				return done
			}
			for _, em := range res.Emits {
				if em.Finish != FinishNone {
					done = append(done, res.End)
				}
			}
		}
	}
	four := []int{512, 512, 512, 512}
	one := run(EmbedRequest(1, four))
	want := cost.StepTime(Step{PrefillTokens: 2048, PrefillContextTokens: 2048})
	if len(one) != 1 || one[0] != want {
		t.Fatalf("4 × 512 tokens took %v, want one prefill step of 2048 tokens, %v", one, want)
	}
	budget := cfg.Engine.withDefaults().MaxBatchedTokens
	big := run(EmbedRequest(1, []int{budget, budget}))
	wantBig := cost.StepTime(Step{PrefillTokens: budget, PrefillContextTokens: budget}) +
		cost.StepTime(Step{PrefillTokens: budget, PrefillContextTokens: 2 * budget})
	if len(big) != 1 || big[0] != wantBig {
		t.Errorf("2 × %d tokens took %v, want two chunked steps, %v", budget, big, wantBig)
	}
	// Prefill is compute-bound: batched, the two cost their summed
	// tokens' compute in one step (each attending over its own 2,048
	// tokens), and both answers come at its end.
	two := run(EmbedRequest(1, four), EmbedRequest(2, four))
	together := cost.StepTime(Step{PrefillTokens: 4096, PrefillContextTokens: 4096, PrefillAttentionPairs: 2 * chunkPairs(2048, 0)})
	if len(two) != 2 || two[0] != together || two[1] != together {
		t.Errorf("two requests together ended at %v, want both at the end of one step of 4096 tokens, %v", two, together)
	}
}
