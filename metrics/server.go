package metrics

// ServerGap is the client's measurement minus the server's own report, per
// request that carried server timing: what the network, proxies and the
// client added (or, for decode TPS, took away).
type ServerGap struct {
	// Requests counts the completed requests with server timing.
	Requests int `json:"requests"`
	// TTFTMs is client TTFT minus the server's load + prefill time.
	TTFTMs *Stats `json:"ttft_ms,omitempty"`
	// DecodeTPS is client decode TPS minus the server's decode TPS.
	DecodeTPS *Stats `json:"decode_tps,omitempty"`
	// E2EMs is client E2E minus the server's load + prefill + decode time.
	E2EMs *Stats `json:"e2e_ms,omitempty"`
}

// summarizeServer sets the level's server-reported statistics and the
// client-minus-server gap from the records that carry server timing.
func (lv *Level) summarizeServer(recs []Record) {
	var prefill, ttft, gapTTFT, gapTPS, gapE2E []float64
	n := 0
	for i := range recs {
		r := &recs[i]
		s := r.Server
		if !r.OK || s == nil {
			continue
		}
		n++
		if s.PromptMs > 0 {
			prefill = append(prefill, s.PromptMs)
			ttft = append(ttft, s.TTFTMs())
			gapTTFT = append(gapTTFT, r.TTFTMs-s.TTFTMs())
			if s.PredictedMs > 0 {
				gapE2E = append(gapE2E, r.E2EMs-(s.TTFTMs()+s.PredictedMs))
			}
		}
		if v, ok := r.DecodeTPS(); ok && s.DecodeTPS > 0 {
			gapTPS = append(gapTPS, v-s.DecodeTPS)
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
	lv.ServerPrefillMs = ptr(prefill)
	lv.ServerTTFTMs = ptr(ttft)
	lv.ClientMinusServer = &ServerGap{Requests: n, TTFTMs: ptr(gapTTFT), DecodeTPS: ptr(gapTPS), E2EMs: ptr(gapE2E)}
}
