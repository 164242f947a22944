package metrics

import "fmt"

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
	// StepMs is the level's TPOT p50, one step of the server's loop: a
	// request that arrives mid-step waits up to a step for the loop to
	// take it, so a queue no longer than that is the level's noise.
	StepMs float64 `json:"step_ms,omitempty"`
	// Slots are the sequences the server runs at once when it said
	// (llama.cpp's total_slots); QueueCause is what the server's figures
	// show the queue was (a QueueCause constant), empty when the queue is
	// within the noise or was not named.
	Slots      int    `json:"server_slots,omitempty"`
	QueueCause string `json:"queue_cause,omitempty"`
}

// What a server queue was, as far as the server's figures show.
const (
	// QueueSlotsFull: more requests than the server has slots; the rest
	// wait for one.
	QueueSlotsFull = "slots_full"
	// QueueOthersPrefill: every request had a slot, so the wait was the
	// server's loop busy with other requests' prefill in the same batch.
	QueueOthersPrefill = "others_prefill"
	// QueueSlotsOrPrefill: several requests at once on a server that did
	// not say its slots: either.
	QueueSlotsOrPrefill = "slots_or_prefill"
	// QueueUnexplained: one request at a time, nothing to wait for.
	QueueUnexplained = "unexplained"
)

// queueMs is the share of a gap's p50 that is server queue, by the rule
// that a queue shows when requests' gaps exceed the level's smallest by
// more than the level's noise: a millisecond, that smallest gap itself,
// and one step of the server's loop.
func (g *ServerGap) queueMs() float64 {
	if g == nil || g.QueueMs == nil {
		return 0
	}
	if q := g.QueueMs.P50; q > 1 && q > g.NetworkMs && q > g.StepMs {
		return q
	}
	return 0
}

// QueueDominates reports whether the level's TTFT gap is mostly time
// requests waited inside the server before their prefill.
func (g *ServerGap) QueueDominates() bool { return g.queueMs() > 0 }

// NameQueue sets what the level's server queue was from the server's
// slots (0: not said) and the level's load: nothing when the queue is
// within the noise.
func (lv *Level) NameQueue(slots int) {
	g := lv.ClientMinusServer
	if g == nil {
		return
	}
	g.Slots, g.QueueCause = slots, ""
	if !g.QueueDominates() {
		return
	}
	c := lv.Load.Concurrency // 0 for an open-loop level: unknown
	switch {
	case c == 1:
		g.QueueCause = QueueUnexplained
	case slots > 0 && c > slots:
		g.QueueCause = QueueSlotsFull
	case slots > 0 && c > 0:
		g.QueueCause = QueueOthersPrefill
	default:
		g.QueueCause = QueueSlotsOrPrefill
	}
}

// serverAcc gathers the level's server-reported statistics and the
// client-minus-server gaps, request by request.
type serverAcc struct {
	prefill, ttft, gapTTFT, gapTPS, gapE2E, aligned Sample
	n, loads                                        int
	loadMax                                         float64
}

func (a *serverAcc) add(r *Record) {
	s := r.Server
	if !r.OK || s == nil {
		return
	}
	a.n++
	if s.LoadMs >= modelLoadMs {
		a.loads++
		a.loadMax = max(a.loadMax, s.LoadMs)
	}
	if s.PromptMs > 0 {
		a.prefill.Add(s.PromptMs)
		a.ttft.Add(s.TTFTMs())
		a.gapTTFT.Add(r.TTFTMs - s.TTFTMs())
		if s.PredictedMs > 0 {
			a.gapE2E.Add(r.E2EMs - (s.TTFTMs() + s.PredictedMs))
		}
	}
	if v, ok := r.DecodeTPS(); ok && s.DecodeTPS > 0 {
		server := s.DecodeTPS
		if al, ok := s.AlignedDecodeTPS(); ok {
			server = al
			a.aligned.Add(al)
		}
		a.gapTPS.Add(v - server)
	}
}

// apply sets the level's server statistics.
func (a *serverAcc) apply(lv *Level) {
	if a.n == 0 {
		return
	}
	lv.ServerAlignedTPS = a.aligned.somePtr()
	lv.ServerPrefillMs = a.prefill.somePtr()
	lv.ServerTTFTMs = a.ttft.somePtr()
	g := &ServerGap{Requests: a.n, TTFTMs: a.gapTTFT.somePtr(), DecodeTPS: a.gapTPS.somePtr(), E2EMs: a.gapE2E.somePtr()}
	if g.TTFTMs != nil {
		g.NetworkMs = g.TTFTMs.Min
		if vals := a.gapTTFT.Values(); vals != nil {
			queue := make([]float64, len(vals))
			for i, v := range vals {
				queue[i] = v - g.NetworkMs
			}
			q := Describe(queue)
			g.QueueMs = &q
		} else {
			q := shifted(*g.TTFTMs, -g.NetworkMs) // each gap less the smallest
			g.QueueMs = &q
		}
	}
	g.StepMs = lv.TPOT.P50
	lv.ClientMinusServer = g
	if a.loads > 0 {
		lv.Warnings = append(lv.Warnings, fmt.Sprintf(
			"model load: the server loaded the model during %d of %d requests (up to %.0f ms, its load_duration), inside their TTFT: a cold start, not serving speed; a warm-up (--warmup 1) takes it",
			a.loads, a.n, a.loadMax))
	}
}

// shifted is s with every value moved by d.
func shifted(s Stats, d float64) Stats {
	for _, p := range []*float64{&s.Mean, &s.Min, &s.P5, &s.P10, &s.P25, &s.P50, &s.P75, &s.P90, &s.P95, &s.P99, &s.Max} {
		*p += d
	}
	return s
}

// modelLoadMs: a server-reported load time this long is a model load (a
// warm Ollama reports well under a millisecond).
const modelLoadMs = 50
