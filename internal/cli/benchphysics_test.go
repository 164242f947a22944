package cli

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tokbench/tokbench/internal/fakellm"
	"github.com/tokbench/tokbench/results"
)

// llamaProps serves a fake llama.cpp: /props names modelPath, the rest is
// a scripted OpenAI-compatible stream (one token a millisecond).
func llamaProps(t *testing.T, modelPath string) string {
	t.Helper()
	f := fakellm.NewUnstarted(fakellm.Script{TTFT: 5 * time.Millisecond, Gap: time.Millisecond, Tokens: 32, Usage: true})
	inner := f.Config.Handler
	mux := http.NewServeMux()
	mux.HandleFunc("GET /props", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `{"default_generation_settings":{"n_ctx":4096,"speculative":false},"model_path":%q,"build_info":"b1234","total_slots":1}`, modelPath)
	})
	mux.Handle("/", inner)
	f.Config.Handler = mux
	f.Start()
	t.Cleanup(f.Close)
	return f.URL
}

// TestBenchPhysicsFromServer: with --hardware and a model the catalog
// does not know, bench reads the GGUF llama.cpp's /props names, so the
// ceiling's bytes per token are the file's, and says where they came
// from; an MBU the deployment cannot reach is flagged as impossible.
func TestBenchPhysicsFromServer(t *testing.T) {
	layer := map[string][]uint64{}
	add := func(n int, dim uint64) {
		for i := range n {
			p := fmt.Sprintf("blk.%d.", i)
			layer[p+"attn_q.weight"] = []uint64{dim, dim}
			layer[p+"attn_k.weight"] = []uint64{dim, dim / 4}
			layer[p+"attn_v.weight"] = []uint64{dim, dim / 4}
			layer[p+"attn_output.weight"] = []uint64{dim, dim}
			layer[p+"ffn_gate.weight"] = []uint64{dim, 2 * dim}
			layer[p+"ffn_up.weight"] = []uint64{dim, 2 * dim}
			layer[p+"ffn_down.weight"] = []uint64{2 * dim, dim}
		}
		layer["token_embd.weight"] = []uint64{dim, 1000}
		layer["output.weight"] = []uint64{dim, 1000}
	}
	for _, c := range []struct {
		name           string
		layers         int
		dim            uint64
		wantImpossible bool
	}{{"small", 1, 512, false}, {"too big for its speed", 40, 8192, true}} {
		t.Run(c.name, func(t *testing.T) {
			clear(layer)
			add(c.layers, c.dim)
			heads := uint32(c.dim / 64)
			path := writeGGUF(t, map[string]uint32{
				"llama.block_count": uint32(c.layers), "llama.embedding_length": uint32(c.dim), "llama.attention.head_count": heads,
				"llama.attention.head_count_kv": heads / 4, "llama.feed_forward_length": uint32(2 * c.dim), "llama.context_length": 8192,
			}, "llama", layer, 1)
			url := llamaProps(t, path)
			dir := filepath.Join(t.TempDir(), "run")
			code, _, stderr := runCLI(context.Background(), nil, "bench", "--url", url+"/v1", "--model", "tiny-random",
				"--hardware", "h100-sxm", "--concurrency", "1", "--requests", "3", "--output-tokens", "32", "--out", dir)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			s, err := results.ReadSummary(dir)
			if err != nil {
				t.Fatal(err)
			}
			ph := s.Levels[0].Physics
			if ph == nil {
				t.Fatalf("no physics; warnings %v", s.Warnings)
			}
			// F16 weights of every tensor but the embedding table.
			d := float64(c.dim)
			weights := 2 * float64(c.layers) * (d*d*2 + d*d/4*2 + 3*2*d*d)
			weights += 2 * d * 1000
			// Plus the KV cache at the level's context (512 prompt tokens
			// and half of 32 output): K and V, bf16, of every KV head.
			kv := 2 * float64(c.layers) * float64(heads/4) * 64 * 2
			if want := weights + 528*kv; ph.BytesPerToken != want {
				t.Errorf("bytes per token %.0f, want the file's %.0f and %.0f of KV", ph.BytesPerToken, weights, 528*kv)
			}
			st, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			age := " (file of " + st.ModTime().UTC().Format("2006-01-02 15:04 UTC") + ", "
			if !strings.Contains(ph.Source, "model_path "+path) || !strings.Contains(ph.Source, "h100-sxm") || !strings.Contains(ph.Source, age) {
				t.Errorf("source %q does not say where the figures came from", ph.Source)
			}
			if got := strings.Contains(ph.Note, "impossible as given"); got != c.wantImpossible || c.wantImpossible != (ph.MBU > 1) {
				t.Errorf("MBU %.2f, note %q", ph.MBU, ph.Note)
			}
		})
	}
}
