package api

import (
	"os"
	"strings"
	"testing"
)

func TestLlamaCppRequest(t *testing.T) {
	req := &Request{Model: "m", Messages: []Message{{Role: "user", Content: "hi"}}, MaxTokens: 12, IgnoreEOS: true}
	path, _, body := capture(t, LlamaCpp{}, "/v1", req, nil)
	if path != "/completion" || body["prompt"] != "hi" || body["n_predict"] != float64(12) || body["ignore_eos"] != true || body["stream"] != true {
		t.Errorf("POST %s %v", path, body)
	}
}

// TestLlamaCppCapture decodes the real capture: 12 tokens and the final
// timings as llama-server reported them.
func TestLlamaCppCapture(t *testing.T) {
	raw, err := os.ReadFile("testdata/llamacpp-native-completion.sse")
	if err != nil {
		t.Fatal(err)
	}
	var resp Response
	LlamaCpp{}.Decode(strings.NewReader(string(raw)), &resp)
	if resp.Failed() || len(resp.Chunks) != 12 || resp.Usage == nil || resp.Usage.CompletionTokens != 12 || resp.Finish != "length" {
		t.Fatalf("decode: %s %s, %d chunks, usage %+v, finish %q", resp.ErrorClass, resp.Error, len(resp.Chunks), resp.Usage, resp.Finish)
	}
	s := resp.Server
	if s == nil || s.PromptMs != 25.274 || s.PredictedMs != 108.321 || s.PromptTokens != 10 || s.PredictedTokens != 12 ||
		s.DecodeTPS != 110.78184285595592 || s.PrefillTPS != 395.6635277360133 {
		t.Errorf("server timing %+v", s)
	}
}

// TestLlamaCppCachedTokens: the native endpoint's tokens_evaluated (the
// whole prompt) less timings.prompt_n (the tokens evaluated now) are the
// prompt tokens llama.cpp took from its cache.
func TestLlamaCppCachedTokens(t *testing.T) {
	resp := do(t, serveFile(t, "testdata/llamacpp-native-completion.sse").URL, LlamaCpp{})
	if resp.Failed() || resp.Usage == nil {
		t.Fatalf("%s %s", resp.ErrorClass, resp.Error)
	}
	if !resp.Usage.CachedKnown || resp.Usage.CachedTokens != 1 {
		t.Errorf("cached %d (known %v), want 1 (11 prompt tokens, 10 evaluated)", resp.Usage.CachedTokens, resp.Usage.CachedKnown)
	}
}
