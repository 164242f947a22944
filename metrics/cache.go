package metrics

import (
	"fmt"
	"sort"
)

// PromptCache is how much of a level's prompts the server served from its
// prefix cache. Reported counts completed requests whose server said
// (usage's cached_tokens, Anthropic's cache_read_input_tokens, llama.cpp's
// timings); HitRequests those with any cached token; CachedTokens and
// PromptTokens are summed over the reporting requests. LikelyHits counts
// requests without a report (Ollama counts the whole prompt either way)
// whose server prefill took under a quarter of the level's median time per
// prompt token: served from cache, by its own timing.
type PromptCache struct {
	Reported     int     `json:"reported"`
	HitRequests  int     `json:"hit_requests"`
	CachedTokens int     `json:"cached_tokens"`
	PromptTokens int     `json:"prompt_tokens"`
	HitRate      float64 `json:"hit_rate"`
	TokenShare   float64 `json:"token_share"`
	LikelyHits   int     `json:"likely_hits,omitempty"`
}

// Hits is the requests served from cache, reported or likely.
func (c *PromptCache) Hits() int {
	if c == nil {
		return 0
	}
	return c.HitRequests + c.LikelyHits
}

// hitShare: a request counts as served from the cache when the cache held
// at least this share of its prompt. Servers that keep the longest common
// prefix (llama.cpp) always reuse the few tokens every prompt starts with
// (BOS, the chat template's opening): that is no hit that matters.
const hitShare = 0.1

// likelyHitFactor: a prefill this much faster per token than the level's
// median is taken for a cache hit.
const likelyHitFactor = 4

func (lv *Level) summarizeCache(recs []Record) {
	c := &PromptCache{}
	var perToken, open []float64 // prefill ms per prompt token, sorted later, and as found
	for i := range recs {
		r := &recs[i]
		if !r.OK {
			continue
		}
		if r.CacheReported {
			c.Reported++
			c.PromptTokens += r.InputTokens
			c.CachedTokens += r.CachedTokens
			if r.CachedTokens > 0 && float64(r.CachedTokens) >= hitShare*float64(r.InputTokens) {
				c.HitRequests++
			}
			continue
		}
		if s := r.Server; s != nil && s.PromptMs > 0 && r.InputTokens > 0 {
			v := s.PromptMs / float64(r.InputTokens)
			perToken = append(perToken, v)
			open = append(open, v)
		}
	}
	if len(perToken) >= 4 {
		sort.Float64s(perToken)
		median := Percentile(perToken, 50)
		for _, v := range open {
			if v*likelyHitFactor < median {
				c.LikelyHits++
			}
		}
	}
	if c.Reported == 0 && c.LikelyHits == 0 {
		return
	}
	if c.Reported > 0 {
		c.HitRate = float64(c.HitRequests) / float64(c.Reported)
	}
	if c.PromptTokens > 0 {
		c.TokenShare = float64(c.CachedTokens) / float64(c.PromptTokens)
	}
	lv.PromptCache = c
	switch {
	case c.HitRequests > 0:
		lv.Warnings = append(lv.Warnings, fmt.Sprintf(
			"prompt cache: the server served %d of %d requests partly from its prompt cache (%d of %d prompt tokens, %.0f%%): their TTFT skips that prefill",
			c.HitRequests, c.Reported, c.CachedTokens, c.PromptTokens, 100*c.TokenShare))
	case c.LikelyHits > 0:
		lv.Warnings = append(lv.Warnings, fmt.Sprintf(
			"prompt cache: %d requests prefilled over %d× faster per token than the level's median, by the server's own timing: likely served from its prompt cache, their TTFT skipping that prefill",
			c.LikelyHits, likelyHitFactor))
	}
}
