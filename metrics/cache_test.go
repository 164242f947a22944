package metrics

import (
	"strings"
	"testing"
)

func cacheRec(input, cached int, reported bool, prefillMs float64) Record {
	r := Record{OK: true, InputTokens: input, OutputTokens: 2, TTFTMs: 10, E2EMs: 20, ChunkMs: []float64{10, 20}, ChunkTokens: []int{1, 1},
		CachedTokens: cached, CacheReported: reported}
	if prefillMs > 0 {
		r.Server = &ServerTiming{PromptMs: prefillMs}
	}
	return r
}

// TestPromptCacheReported: hits the server reported are counted and warned
// about; a level with reports and no hit says so without a warning.
func TestPromptCacheReported(t *testing.T) {
	recs := []Record{cacheRec(100, 96, true, 0), cacheRec(100, 0, true, 0), cacheRec(100, 0, true, 0), cacheRec(100, 64, true, 0)}
	lv := Summarize(Load{Mode: "concurrency", Concurrency: 1}, recs, 1)
	c := lv.PromptCache
	if c == nil || c.Reported != 4 || c.HitRequests != 2 || c.CachedTokens != 160 || c.PromptTokens != 400 || c.HitRate != 0.5 || c.TokenShare != 0.4 {
		t.Fatalf("prompt cache %+v", c)
	}
	if !hasWarning(lv.Warnings, "prompt cache: the server served 2 of 4 requests") {
		t.Errorf("no cache warning in %q", lv.Warnings)
	}
	// llama.cpp reuses the 2 tokens every prompt starts with: no hit.
	lv = Summarize(Load{Mode: "concurrency", Concurrency: 1}, []Record{cacheRec(514, 2, true, 0), cacheRec(514, 0, true, 0)}, 1)
	if lv.PromptCache == nil || lv.PromptCache.CachedTokens != 2 || lv.PromptCache.HitRequests != 0 {
		t.Errorf("a shared 2-token start: %+v", lv.PromptCache)
	}
	lv = Summarize(Load{Mode: "concurrency", Concurrency: 1}, recs[1:3], 1)
	if lv.PromptCache == nil || lv.PromptCache.HitRequests != 0 || hasWarning(lv.Warnings, "prompt cache") {
		t.Errorf("no hits: %+v, warnings %q", lv.PromptCache, lv.Warnings)
	}
}

// TestPromptCacheLikelyFromTiming: a server that counts the whole prompt
// either way (Ollama) shows a hit only in its prefill time: one far under
// the level's median time per token is a likely hit.
func TestPromptCacheLikelyFromTiming(t *testing.T) {
	recs := []Record{cacheRec(130, 0, false, 300), cacheRec(130, 0, false, 250), cacheRec(130, 0, false, 20), cacheRec(130, 0, false, 280), cacheRec(130, 0, false, 310)}
	lv := Summarize(Load{Mode: "concurrency", Concurrency: 1}, recs, 1)
	if lv.PromptCache == nil || lv.PromptCache.LikelyHits != 1 || lv.PromptCache.Reported != 0 {
		t.Fatalf("prompt cache %+v", lv.PromptCache)
	}
	if !hasWarning(lv.Warnings, "likely served from its prompt cache") {
		t.Errorf("no likely-hit warning in %q", lv.Warnings)
	}
}

func hasWarning(ws []string, s string) bool {
	for _, w := range ws {
		if strings.Contains(w, s) {
			return true
		}
	}
	return false
}

// TestModelLoadWarned: a request during which the server loaded the model
// (Ollama's load_duration, a cold first request) is named as such.
func TestModelLoadWarned(t *testing.T) {
	cold := cacheRec(130, 0, false, 300)
	cold.Server.LoadMs = 1151
	warm := cacheRec(130, 0, false, 300)
	warm.Server.LoadMs = 0.2
	lv := Summarize(Load{Mode: "concurrency", Concurrency: 1}, []Record{cold, warm, warm}, 1)
	if !hasWarning(lv.Warnings, "model load: the server loaded the model during 1 of 3 requests (up to 1151 ms") {
		t.Errorf("warnings %q", lv.Warnings)
	}
	lv = Summarize(Load{Mode: "concurrency", Concurrency: 1}, []Record{warm, warm}, 1)
	if hasWarning(lv.Warnings, "model load") {
		t.Errorf("warm requests warned: %q", lv.Warnings)
	}
}

// TestProtocols: run.json's transport names every version the levels'
// answers came over, once each.
func TestProtocols(t *testing.T) {
	levels := []Level{
		{Connections: &Connections{HTTP: "HTTP/1.1"}},
		{},
		{Connections: &Connections{HTTP: "HTTP/1.1, HTTP/2.0", TLS: "TLS 1.3"}},
	}
	if h, tl := Protocols(levels); h != "HTTP/1.1, HTTP/2.0" || tl != "TLS 1.3" {
		t.Errorf("Protocols = %q, %q", h, tl)
	}
}
