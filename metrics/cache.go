package metrics

import (
	"fmt"
	"slices"
	"sort"
	"strings"
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

// templateTokens: a cache hit of at most this many tokens is the opening
// every prompt shares (BOS, a chat template's system turn), however
// short the prompt.
const templateTokens = 16

// hitShare: a request counts as served from the cache when the cache held
// at least this share of its prompt. Servers that keep the longest common
// prefix (llama.cpp) always reuse the few tokens every prompt starts with
// (BOS, the chat template's opening): that is no hit that matters.
const hitShare = 0.1

// likelyHitFactor: a prefill this much faster per token than the level's
// median is taken for a cache hit.
const likelyHitFactor = 4

// cacheAcc gathers what the servers said of their prompt cache. Prefill
// times per prompt token are held exactly for RequestLimit requests; a
// longer level judges the rest against the median of those.
type cacheAcc struct {
	c        PromptCache
	perToken []float64 // prefill ms per prompt token, as found
	median   float64   // frozen once perToken filled up (0 until then)
}

func (a *cacheAcc) add(r *Record) {
	c := &a.c
	if !r.OK {
		return
	}
	if r.CacheReported {
		c.Reported++
		c.PromptTokens += r.InputTokens
		c.CachedTokens += r.CachedTokens
		if r.CachedTokens > templateTokens && float64(r.CachedTokens) >= hitShare*float64(r.InputTokens) {
			c.HitRequests++
		}
		return
	}
	s := r.Server
	if s == nil || s.PromptMs <= 0 || r.InputTokens <= 0 {
		return
	}
	v := s.PromptMs / float64(r.InputTokens)
	if a.median > 0 {
		if v*likelyHitFactor < a.median {
			c.LikelyHits++
		}
		return
	}
	a.perToken = append(a.perToken, v)
	if len(a.perToken) == requestLimit {
		var hits int
		hits, a.median = likelyHits(a.perToken)
		c.LikelyHits += hits
		a.perToken = nil
	}
}

// likelyHits counts the values far below their median, and returns the
// median.
func likelyHits(perToken []float64) (hits int, median float64) {
	sorted := slices.Clone(perToken)
	sort.Float64s(sorted)
	median = Percentile(sorted, 50)
	for _, v := range perToken {
		if v*likelyHitFactor < median {
			hits++
		}
	}
	return hits, median
}

// apply sets lv.PromptCache, with a warning when requests were served
// from the cache.
func (a *cacheAcc) apply(lv *Level) {
	cc := a.c
	c := &cc
	if a.median == 0 && len(a.perToken) >= 4 {
		hits, _ := likelyHits(a.perToken)
		c.LikelyHits += hits
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
		lv.Warnings = append(lv.Warnings, cacheHitNote+fmt.Sprintf(
			"the server served %d of %d requests partly from its prompt cache (%d of %d prompt tokens, %.0f%%): their TTFT skips that prefill",
			c.HitRequests, c.Reported, c.CachedTokens, c.PromptTokens, 100*c.TokenShare))
	case c.LikelyHits > 0:
		lv.Warnings = append(lv.Warnings, fmt.Sprintf(
			cacheHitNote+"%d requests prefilled over %d× faster per token than the level's median, by the server's own timing: likely served from its prompt cache, their TTFT skipping that prefill",
			c.LikelyHits, likelyHitFactor))
	}
}

// cacheHitNote starts the warning of a level served from the prompt cache.
const cacheHitNote = "prompt cache: "

// ChainConversation is Level.ChainKind for a chat's conversations.
const ChainConversation = "conversation"

// Conversations marks the level's chains as a chat's conversations. Every
// turn after the first resends the conversation's history, which a
// server's prompt cache is expected to serve: what the cache served is
// then a note to read TTFT by, not a warning.
func (lv *Level) Conversations() {
	lv.ChainKind = ChainConversation
	c := lv.PromptCache
	if c == nil || c.Hits() == 0 {
		return
	}
	lv.Warnings = slices.DeleteFunc(lv.Warnings, func(w string) bool { return strings.HasPrefix(w, cacheHitNote) })
	if c.HitRequests > 0 {
		lv.Notes = append(lv.Notes, fmt.Sprintf(
			"prompt cache: as expected of a chat, whose turns resend their conversation's history, the server served %d of %d requests partly from its prompt cache (%d of %d prompt tokens, %.0f%%): their TTFT skips that prefill",
			c.HitRequests, c.Reported, c.CachedTokens, c.PromptTokens, 100*c.TokenShare))
	} else {
		lv.Notes = append(lv.Notes, fmt.Sprintf(
			"prompt cache: as expected of a chat, whose turns resend their conversation's history, %d requests prefilled over %d× faster per token than the level's median, by the server's own timing: served from its prompt cache",
			c.LikelyHits, likelyHitFactor))
	}
}
