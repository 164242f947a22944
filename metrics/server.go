package metrics

import (
	"fmt"
	"slices"
)

// ServerGap is the client's measurement minus the server's own report, per
// request that carried server timing. A server's prefill time covers its
// own work on the prompt, not the time the request waited for a free slot
// (llama.cpp's slots, Ollama's OLLAMA_NUM_PARALLEL): so the TTFT gap is
// the server's queue plus the network, proxies and the client. The level's
// smallest TTFT gap, a request that found a slot free, is NetworkMs, the
// network's and client's share; each request's gap beyond it is its
// server queue (QueueMs), implied by the server's own timing.
type ServerGap struct {
	// Requests counts the completed requests with server timing.
	Requests int `json:"requests"`
	// TTFTMs is client TTFT minus the server's load + prefill time.
	TTFTMs *Stats `json:"ttft_ms,omitempty"`
	// DecodeTPS is client decode TPS minus the server's decode TPS, the
	// server's counted as tokbench counts (see AlignedDecodeTPS) where it
	// gave its token count.
	DecodeTPS *Stats `json:"decode_tps,omitempty"`
	// E2EMs is client E2E minus the server's load + prefill + decode time.
	E2EMs *Stats `json:"e2e_ms,omitempty"`
	// NetworkMs is the smallest TTFT gap of the level (network, proxies,
	// HTTP framing and client); QueueMs each request's gap beyond it.
	NetworkMs float64 `json:"network_ms"`
	QueueMs   *Stats  `json:"server_queue_ms,omitempty"`
}

// queueMs is the share of a gap's p50 that is server queue, by the rule
// that a queue shows when requests' gaps exceed the level's smallest by
// more than a millisecond and more than that smallest gap itself.
func (g *ServerGap) queueMs() float64 {
	if g == nil || g.QueueMs == nil {
		return 0
	}
	if q := g.QueueMs.P50; q > 1 && q > g.NetworkMs {
		return q
	}
	return 0
}

// QueueDominates reports whether the level's TTFT gap is mostly the time
// requests waited inside the server for a free slot.
func (g *ServerGap) QueueDominates() bool { return g.queueMs() > 0 }

// summarizeServer sets the level's server-reported statistics and the
// client-minus-server gap from the records that carry server timing.
func (lv *Level) summarizeServer(recs []Record) {
	var prefill, ttft, gapTTFT, gapTPS, gapE2E, aligned []float64
	n, loads := 0, 0
	loadMax := 0.0
	for i := range recs {
		r := &recs[i]
		s := r.Server
		if !r.OK || s == nil {
			continue
		}
		n++
		if s.LoadMs >= modelLoadMs {
			loads++
			loadMax = max(loadMax, s.LoadMs)
		}
		if s.PromptMs > 0 {
			prefill = append(prefill, s.PromptMs)
			ttft = append(ttft, s.TTFTMs())
			gapTTFT = append(gapTTFT, r.TTFTMs-s.TTFTMs())
			if s.PredictedMs > 0 {
				gapE2E = append(gapE2E, r.E2EMs-(s.TTFTMs()+s.PredictedMs))
			}
		}
		if v, ok := r.DecodeTPS(); ok && s.DecodeTPS > 0 {
			server := s.DecodeTPS
			if a, ok := s.AlignedDecodeTPS(); ok {
				server = a
				aligned = append(aligned, a)
			}
			gapTPS = append(gapTPS, v-server)
		}
	}
	if n == 0 {
		return
	}
	ptr := func(v []float64) *Stats {
		if len(v) == 0 {
			return nil
		}
		s := Describe(v)
		return &s
	}
	lv.ServerAlignedTPS = ptr(aligned)
	lv.ServerPrefillMs = ptr(prefill)
	lv.ServerTTFTMs = ptr(ttft)
	g := &ServerGap{Requests: n, TTFTMs: ptr(gapTTFT), DecodeTPS: ptr(gapTPS), E2EMs: ptr(gapE2E)}
	if len(gapTTFT) > 0 {
		g.NetworkMs = slices.Min(gapTTFT)
		queue := make([]float64, len(gapTTFT))
		for i, v := range gapTTFT {
			queue[i] = v - g.NetworkMs
		}
		g.QueueMs = ptr(queue)
	}
	lv.ClientMinusServer = g
	if loads > 0 {
		lv.Warnings = append(lv.Warnings, fmt.Sprintf(
			"model load: the server loaded the model during %d of %d requests (up to %.0f ms, its load_duration), inside their TTFT: a cold start, not serving speed; a warm-up (--warmup 1) takes it",
			loads, n, loadMax))
	}
}

// modelLoadMs: a server-reported load time this long is a model load (a
// warm Ollama reports well under a millisecond).
const modelLoadMs = 50
