package physics

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// Workload is what a ceiling is computed for: Batch concurrent streams, each
// with ContextTokens of KV cache, and a prompt of PromptTokens for the TTFT
// floor. Zero Batch means 1.
type Workload struct {
	ContextTokens int
	Batch         int
	PromptTokens  int
}

// maxBatchScan bounds the search for batch sizes.
const maxBatchScan = 1 << 16

// Ceiling is the physics of one deployment and workload. Ceilings use peak
// figures (MBU and MFU 100%, no overheads): no engine can beat them.
// Expected figures use the hardware's calibrated efficiencies.
type Ceiling struct {
	WeightBytes     float64 // all GPUs
	BytesPerToken   float64 // read per decoded token, single stream at ContextTokens
	KVBytesPerToken float64 // one copy
	ContextTokens   int

	DecodeTPSCeiling  float64       // single stream: bandwidth ÷ bytes per token
	DecodeTPSExpected float64       // single stream, calibrated step time
	TPOTExpected      time.Duration // 1 / DecodeTPSExpected

	Batch                  int
	AggregateTPSCeiling    float64 // Batch streams together, roofline
	AggregateTPSExpected   float64 // Batch streams together, calibrated
	PerStreamTPSExpected   float64 // each of Batch streams, calibrated
	BatchComputeBound      bool    // at Batch the compute term exceeds the memory term
	ComputeBoundBatch      int     // smallest batch whose compute term overtakes the memory term; 0: none ≤ maxBatchScan or FLOPs unknown
	ComputeBoundTPSCeiling float64 // aggregate roofline at ComputeBoundBatch

	KVCacheBytes      float64 // Batch × ContextTokens of KV, all copies
	KVCapacityTokens  int     // tokens that fit after weights and reserve
	MaxBatchAtContext int     // KVCapacityTokens ÷ ContextTokens (0 when ContextTokens is 0)
	FitsInMemory      bool    // weights and the batch's KV fit in MemoryUtilization of memory

	PromptTokens    int
	PrefillFloor    time.Duration // PromptTokens alone, roofline; 0 with no prompt or no FLOPs figure
	PrefillExpected time.Duration // calibrated step time of the prompt alone; 0 likewise

	deployment Deployment
}

// ideal is d at peak: MBU and MFU 1, no overheads, free all-reduce.
func (d Deployment) ideal() Deployment {
	d.Hardware = d.Hardware.WithEfficiency(Efficiency{MBU: 1, MFUPrefill: 1, MFUDecode: 1})
	d.Hardware.InterconnectBytesPerSec = 0
	return d
}

func decodeStep(batch, context int) Step {
	return Step{DecodeSeqs: batch, KVTokens: batch * context}
}

func perSecond(n int, t time.Duration) float64 {
	if t <= 0 {
		return 0
	}
	return float64(n) / t.Seconds()
}

// Ceiling computes the ceilings of d for w.
func (d Deployment) Ceiling(w Workload) Ceiling {
	if w.Batch <= 0 {
		w.Batch = 1
	}
	ideal := d.ideal()
	c := Ceiling{
		WeightBytes:     d.WeightBytes(),
		BytesPerToken:   d.BytesPerToken(w.ContextTokens),
		KVBytesPerToken: d.KVBytesPerToken(),
		ContextTokens:   w.ContextTokens,
		Batch:           w.Batch,
		PromptTokens:    w.PromptTokens,
		deployment:      d,
	}
	if c.BytesPerToken > 0 {
		c.DecodeTPSCeiling = d.gpus() * d.Hardware.BandwidthBytesPerSec / c.BytesPerToken
	}
	t1 := d.StepTime(decodeStep(1, w.ContextTokens))
	c.DecodeTPSExpected = perSecond(1, t1)
	c.TPOTExpected = t1

	c.AggregateTPSCeiling = perSecond(w.Batch, ideal.StepTime(decodeStep(w.Batch, w.ContextTokens)))
	tb := d.StepTime(decodeStep(w.Batch, w.ContextTokens))
	c.AggregateTPSExpected = perSecond(w.Batch, tb)
	c.PerStreamTPSExpected = perSecond(1, tb)
	cost := ideal.StepCost(decodeStep(w.Batch, w.ContextTokens))
	c.BatchComputeBound = cost.Compute > cost.Memory
	if d.peakFLOPS() > 0 {
		c.ComputeBoundBatch = ideal.crossoverBatch(w.ContextTokens)
		if c.ComputeBoundBatch > 0 {
			c.ComputeBoundTPSCeiling = perSecond(c.ComputeBoundBatch, ideal.StepTime(decodeStep(c.ComputeBoundBatch, w.ContextTokens)))
		}
	}

	c.KVCacheBytes = float64(w.Batch) * float64(w.ContextTokens) * c.KVBytesPerToken * d.kvReplicas()
	c.KVCapacityTokens = d.KVCapacityTokens()
	if w.ContextTokens > 0 {
		c.MaxBatchAtContext = c.KVCapacityTokens / w.ContextTokens
	}
	c.FitsInMemory = c.WeightBytes+c.KVCacheBytes <= d.gpus()*d.Hardware.MemoryBytes*MemoryUtilization

	if w.PromptTokens > 0 {
		prefill := Step{PrefillTokens: w.PromptTokens, PrefillContextTokens: w.PromptTokens}
		if d.peakFLOPS() > 0 { // without a FLOPs figure prefill time is unknown
			c.PrefillFloor = ideal.StepTime(prefill)
			c.PrefillExpected = d.StepTime(prefill)
		}
	}
	return c
}

// crossoverBatch is the smallest decode batch at which the compute term
// reaches the memory term, 0 if none up to maxBatchScan. Both terms grow
// with the batch, so it searches by doubling, then bisects.
func (d Deployment) crossoverBatch(context int) int {
	computeBound := func(b int) bool {
		c := d.StepCost(decodeStep(b, context))
		return c.Compute >= c.Memory
	}
	hi := 1
	for !computeBound(hi) {
		if hi >= maxBatchScan {
			return 0
		}
		hi *= 2
	}
	lo := hi / 2 // not compute bound (or 0)
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if computeBound(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// Speculative-decoding reference: acceptance 0.8 at draft length 4 gives
// 3.36 tokens per target step (formulas.md); reported speedups reach 3.5×
// (EAGLE) to 4.26× (EAGLE-2).
const (
	specDraftLen      = 4
	specTypicalAccept = 0.8
	specBestSpeedup   = 4.26
)

// Path is one way a claim above the single-stream ceiling could be real.
type Path struct {
	How      string // "batching", "speculative-decoding", "moe", "smaller-model-or-precision", "more-gpus"
	Possible bool
	Detail   string
}

// Verdict judges a claimed decode rate against a Ceiling.
type Verdict struct {
	ClaimTPS           float64
	WithinSingleStream bool    // claim ≤ DecodeTPSCeiling
	FractionOfCeiling  float64 // claim ÷ DecodeTPSCeiling
	RequiredMBU        float64 // bandwidth utilisation a single stream at the claim needs
	Summary            string
	Paths              []Path // when not within the single-stream ceiling
}

// Judge decides whether a single stream could decode at claimTPS, and if
// not, which of batching, speculative decoding, a mixture-of-experts model,
// a smaller model or lower precision, or more GPUs could explain it.
func (c Ceiling) Judge(claimTPS float64) Verdict {
	d := c.deployment
	v := Verdict{ClaimTPS: claimTPS}
	if c.DecodeTPSCeiling <= 0 {
		v.Summary = "no ceiling: bytes per token unknown"
		return v
	}
	v.FractionOfCeiling = claimTPS / c.DecodeTPSCeiling
	v.RequiredMBU = v.FractionOfCeiling
	v.WithinSingleStream = claimTPS <= c.DecodeTPSCeiling
	if v.WithinSingleStream {
		v.Summary = fmt.Sprintf("%.4g tok/s is within the single-stream ceiling of %.4g tok/s (%.0f%% of it: needs %.0f%% bandwidth utilisation)",
			claimTPS, c.DecodeTPSCeiling, 100*v.FractionOfCeiling, 100*v.RequiredMBU)
		if claimTPS > c.DecodeTPSExpected && c.DecodeTPSExpected > 0 {
			v.Summary += fmt.Sprintf("; above the %.4g tok/s calibrated engines reach here, so it needs an unusually efficient engine", c.DecodeTPSExpected)
		}
		return v
	}
	v.Summary = fmt.Sprintf("%.4g tok/s is %.2f× the single-stream ceiling of %.4g tok/s (%.3g GB read per token at %.3g TB/s): no single stream can decode this fast here",
		claimTPS, v.FractionOfCeiling, c.DecodeTPSCeiling, c.BytesPerToken/1e9, d.gpus()*d.Hardware.BandwidthBytesPerSec/1e12)
	v.Paths = []Path{c.batchingPath(claimTPS), c.specPath(v.FractionOfCeiling), c.moePath(claimTPS), c.smallerPath(claimTPS), c.moreGPUsPath(claimTPS)}
	var possible []string
	for _, p := range v.Paths {
		if p.Possible {
			possible = append(possible, p.How)
		}
	}
	if len(possible) == 0 {
		v.Summary += "; none of batching, speculative decoding, MoE, a smaller model or more GPUs explains it"
	} else {
		v.Summary += "; possible only with: " + strings.Join(possible, ", ")
	}
	return v
}

func (c Ceiling) batchingPath(claim float64) Path {
	d := c.deployment
	ideal := d.ideal()
	limit := maxBatchScan
	if c.ContextTokens > 0 {
		limit = min(limit, max(c.MaxBatchAtContext, 0))
	}
	agg := func(b int) float64 { return perSecond(b, ideal.StepTime(decodeStep(b, c.ContextTokens))) }
	p := Path{How: "batching"}
	if limit < 1 {
		p.Detail = "no batch fits in memory at this context"
		return p
	}
	if agg(limit) < claim {
		p.Detail = fmt.Sprintf("even %d concurrent streams (the most whose KV cache fits) reach only %.4g tok/s aggregate", limit, agg(limit))
		return p
	}
	b := 1
	for b < limit && agg(b) < claim {
		b *= 2
	}
	lo, hi := b/2, min(b, limit)
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if agg(mid) >= claim {
			hi = mid
		} else {
			lo = mid
		}
	}
	p.Possible = true
	p.Detail = fmt.Sprintf("as aggregate throughput of ≥ %d concurrent streams (ceiling %.4g tok/s together, each stream still ≤ %.4g tok/s)",
		hi, agg(hi), agg(hi)/float64(hi))
	return p
}

// acceptanceFor solves SpecExpectedTokens(a, draftLen) = tokens for a.
func acceptanceFor(tokens float64, draftLen int) float64 {
	if tokens <= 1 {
		return 0
	}
	if tokens >= float64(draftLen+1) {
		return 1
	}
	lo, hi := 0.0, 1.0
	for range 60 {
		mid := (lo + hi) / 2
		if SpecExpectedTokens(mid, draftLen) < tokens {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

func (c Ceiling) specPath(ratio float64) Path {
	p := Path{How: "speculative-decoding"}
	a := acceptanceFor(ratio, specDraftLen)
	typical := SpecExpectedTokens(specTypicalAccept, specDraftLen)
	switch {
	case ratio <= typical:
		p.Possible = true
		p.Detail = fmt.Sprintf("needs %.2f tokens per target step: acceptance %.2f at draft length %d, within the typical %.2f (a = %.1f); the draft model's cost is extra",
			ratio, a, specDraftLen, typical, specTypicalAccept)
	case ratio <= specBestSpeedup:
		p.Possible = true
		p.Detail = fmt.Sprintf("needs %.2f tokens per target step (acceptance %.2f at draft length %d): only the best reported speedups (EAGLE-2 up to %.2f×) reach it",
			ratio, a, specDraftLen, specBestSpeedup)
	default:
		p.Detail = fmt.Sprintf("needs %.2f× the ceiling, beyond the best reported speculative speedup (%.2f×)", ratio, specBestSpeedup)
	}
	return p
}

func (c Ceiling) moePath(claim float64) Path {
	d := c.deployment
	p := Path{How: "moe"}
	if d.Model.Experts > 0 {
		p.Detail = fmt.Sprintf("%s is already a mixture of experts: the ceiling counts only its %d active experts per layer", d.Model.Name, d.Model.ExpertsPerToken)
		return p
	}
	budget := d.gpus()*d.Hardware.BandwidthBytesPerSec/claim - d.kvReadBytes(c.ContextTokens, 1)
	if budget <= 0 {
		p.Detail = "the KV cache of the context alone exceeds the bytes per token the claim allows"
		return p
	}
	p.Possible = true
	p.Detail = fmt.Sprintf("a mixture-of-experts model reading ≤ %.3g B active parameters per token at %s (%.3g GB) would allow it, if the claim is about such a model",
		budget/d.Weights.BytesPerWeight()/1e9, d.Weights.Name, budget/1e9)
	return p
}

// lowerPrecisions are the precisions suggested for a smaller footprint,
// from most to fewest bits.
var lowerPrecisions = []string{"fp8", "q6_k", "q5_k_m", "q4_k_m", "int4", "q3_k_m", "q2_k"}

func (c Ceiling) smallerPath(claim float64) Path {
	d := c.deployment
	p := Path{How: "smaller-model-or-precision"}
	budget := d.gpus()*d.Hardware.BandwidthBytesPerSec/claim - d.kvReadBytes(c.ContextTokens, 1)
	readParams := d.Model.ReadParams(1)
	if budget <= 0 || readParams <= 0 {
		p.Detail = "the KV cache of the context alone exceeds the bytes per token the claim allows"
		return p
	}
	maxParams := budget / d.Weights.BytesPerWeight()
	maxBits := 8 * budget / readParams
	p.Possible = true
	p.Detail = fmt.Sprintf("a model reading ≤ %.3g B parameters per token at %s, or %s at ≤ %.2f bits per weight",
		maxParams/1e9, d.Weights.Name, d.Model.Name, maxBits)
	var fits []Precision
	for _, name := range lowerPrecisions {
		if q, err := LookupPrecision(name); err == nil && q.BitsPerWeight <= maxBits && q.BitsPerWeight < d.Weights.BitsPerWeight {
			fits = append(fits, q)
		}
	}
	if len(fits) > 0 {
		best := slices.MaxFunc(fits, func(a, b Precision) int { return int(math.Copysign(1, a.BitsPerWeight-b.BitsPerWeight)) })
		p.Detail += fmt.Sprintf(" (e.g. %s, %.3g bits)", best.Name, best.BitsPerWeight)
	} else if maxBits < 2.5 {
		p.Detail += " (below any practical quantisation)"
		p.Possible = maxParams >= 1e8
	}
	return p
}

func (c Ceiling) moreGPUsPath(claim float64) Path {
	d := c.deployment
	p := Path{How: "more-gpus"}
	need := math.Ceil(claim * c.BytesPerToken / d.Hardware.BandwidthBytesPerSec)
	p.Possible = true
	p.Detail = fmt.Sprintf("tensor parallelism over ≥ %.0f × %s at 100%% bandwidth (all-reduce overhead makes it more in practice)", need, d.Hardware.Name)
	return p
}
