package physics

import (
	"math"
	"time"
)

// MemoryUtilization is the fraction of device memory an engine gives to
// weights and KV cache; the rest is reserved for activations and the runtime
// (vLLM's default gpu_memory_utilization is 0.9).
const MemoryUtilization = 0.9

// activationBytes is the width of activations exchanged in tensor-parallel
// all-reduces (BF16).
const activationBytes = 2

// Deployment is a model in a precision on GPUs identical devices with tensor
// parallelism across them. GPUs ≤ 0 means 1.
type Deployment struct {
	Model    Model
	Weights  Precision
	KVCache  Precision
	Hardware Hardware
	GPUs     int
}

// Step is one engine iteration: DecodeSeqs sequences each decode one token,
// and their KV caches hold KVTokens tokens in total. PrefillTokens prompt
// tokens are processed in the same iteration (chunked prefill); they attend
// over PrefillContextTokens in total, that is, summed over the sequences
// being prefilled, the prompt tokens already cached plus this chunk.
// PrefillAttentionPairs is the (query, key) pairs those chunks attend over
// under the causal mask, summed over the sequences: a chunk of p tokens
// ending a context of C tokens has p·(C − p/2). Zero means one sequence is
// prefilled, and the pairs are computed from the two sums.
type Step struct {
	DecodeSeqs, KVTokens, PrefillTokens, PrefillContextTokens int
	PrefillAttentionPairs                                     int
}

// PrefillPairs is the step's prefill attention pairs: PrefillAttentionPairs,
// or when that is zero, PrefillTokens as one chunk ending a context of
// PrefillContextTokens.
func (s Step) PrefillPairs() float64 {
	if s.PrefillAttentionPairs > 0 {
		return float64(s.PrefillAttentionPairs)
	}
	p := float64(s.PrefillTokens)
	ctx := math.Max(float64(s.PrefillContextTokens), p)
	return p * (ctx - p/2)
}

func (d Deployment) gpus() float64 {
	if d.GPUs <= 0 {
		return 1
	}
	return float64(d.GPUs)
}

func (m Model) ffnMatrices() float64 {
	if m.FFNMatrices <= 0 {
		return 3
	}
	return float64(m.FFNMatrices)
}

func (m Model) moeLayers() float64 {
	if m.Experts <= 0 {
		return 0
	}
	if m.MoELayers > 0 {
		return float64(m.MoELayers)
	}
	return float64(m.Layers)
}

// headDim is HeadDim, or Hidden / Heads when the config gives none.
func (m Model) headDim() float64 {
	if m.HeadDim > 0 {
		return float64(m.HeadDim)
	}
	if m.Heads > 0 {
		return float64(m.Hidden) / float64(m.Heads)
	}
	return 0
}

// EmbeddingParams is the input embedding table, Vocab × Hidden.
func (m Model) EmbeddingParams() float64 { return float64(m.Vocab) * float64(m.Hidden) }

// ExpertParams is the parameter count of one expert in one layer.
func (m Model) ExpertParams() float64 {
	return m.ffnMatrices() * float64(m.Hidden) * float64(m.ExpertFFN)
}

// RoutedExpertParams is the parameter count of all routed experts.
func (m Model) RoutedExpertParams() float64 {
	return m.moeLayers() * float64(m.Experts) * m.ExpertParams()
}

// ArchParams derives total and active parameter counts from the
// architecture: embeddings (twice unless tied), attention projections, dense
// MLPs, shared and routed experts. Norms and biases are left out (<0.1%).
// Active counts the input embedding too, as model cards do. It cannot derive
// MLA attention and returns zeros for a model with KVLoraRank > 0.
func (m Model) ArchParams() (total, active float64) {
	if m.KVLoraRank > 0 || m.Layers == 0 || m.Hidden == 0 {
		return 0, 0
	}
	d, L := float64(m.Hidden), float64(m.Layers)
	hd := m.headDim()
	attn := d*float64(m.Heads)*hd*2 + d*float64(m.KVHeads)*hd*2
	emb := m.EmbeddingParams()
	if !m.TiedEmbeddings {
		emb *= 2
	}
	moeL := m.moeLayers()
	dense := (L - moeL) * m.ffnMatrices() * d * float64(m.FFN)
	shared := moeL * float64(m.SharedExperts) * m.ExpertParams()
	common := emb + L*attn + dense + shared
	total = common + m.RoutedExpertParams()
	active = common + moeL*float64(m.ExpertsPerToken)*m.ExpertParams()
	return total, active
}

func (m Model) withDerivedParams() Model {
	total, active := m.ArchParams()
	if m.TotalParams == 0 {
		m.TotalParams = total
	}
	if m.ActiveParams == 0 {
		if m.Experts == 0 {
			m.ActiveParams = m.TotalParams
		} else {
			m.ActiveParams = active
		}
	}
	return m
}

// unreadEmbedding is the part of TotalParams a decode step does not read:
// the input embedding table (one row per token is read), unless it is tied to
// the output head, which is read in full.
func (m Model) unreadEmbedding() float64 {
	if m.TiedEmbeddings {
		return 0
	}
	return m.EmbeddingParams()
}

// alwaysReadParams are the parameters every step reads whatever the batch:
// everything but the input embedding and the routed experts.
func (m Model) alwaysReadParams() float64 {
	return math.Max(0, m.TotalParams-m.unreadEmbedding()-m.RoutedExpertParams())
}

// ExpertsTouched is the expected number of distinct experts per MoE layer
// that tokens tokens route to: E·(1 − (1 − k/E)^tokens) under uniform routing.
func (m Model) ExpertsTouched(tokens int) float64 {
	if m.Experts <= 0 || tokens <= 0 {
		return 0
	}
	e, k := float64(m.Experts), float64(m.ExpertsPerToken)
	return e * (1 - math.Pow(1-k/e, float64(tokens)))
}

// ReadParams is how many parameters a step with tokens tokens reads.
func (m Model) ReadParams(tokens int) float64 {
	return m.alwaysReadParams() + m.moeLayers()*m.ExpertsTouched(tokens)*m.ExpertParams()
}

// MatmulParamsPerToken is the parameters one token multiplies with: 2 FLOPs
// each per token.
func (m Model) MatmulParamsPerToken() float64 {
	return m.alwaysReadParams() + m.moeLayers()*float64(m.ExpertsPerToken)*m.ExpertParams()
}

// attentionFLOPs is QKᵀ and AV: 4 · layers · (heads·head dim) per
// (query token, key token) pair.
func (m Model) attentionFLOPs(pairs float64) float64 {
	width := float64(m.Heads) * m.headDim()
	if width == 0 {
		width = float64(m.Hidden)
	}
	return 4 * float64(m.Layers) * width * pairs
}

// WeightBytes is the size of all weights, all GPUs together.
func (d Deployment) WeightBytes() float64 {
	return d.Model.TotalParams * d.Weights.BytesPerWeight()
}

// KVBytesPerToken is the KV cache of one token in one copy:
// 2 · layers · KV heads · head dim · bytes, or for MLA
// layers · (kv_lora_rank + qk_rope_head_dim) · bytes. Zero when the model's
// architecture is unknown.
func (d Deployment) KVBytesPerToken() float64 {
	m := d.Model
	b := d.KVCache.BytesPerWeight()
	if m.KVLoraRank > 0 {
		return float64(m.Layers) * float64(m.KVLoraRank+m.QKRopeHeadDim) * b
	}
	return 2 * float64(m.Layers) * float64(m.KVHeads) * m.headDim() * b
}

// kvReplicas is how many copies of each token's KV cache tensor parallelism
// keeps: MLA's latent is replicated on every GPU, and KV heads are
// replicated when there are fewer of them than GPUs (as vLLM does).
func (d Deployment) kvReplicas() float64 {
	g := d.gpus()
	if d.Model.KVLoraRank > 0 {
		return g
	}
	if kv := float64(d.Model.KVHeads); kv > 0 && kv < g {
		return g / kv
	}
	return 1
}

// kvReadBytes is the KV bytes read by sequences holding tokens tokens in
// total, all copies. Sliding-window layers read at most their window per
// sequence; seqs is the number of sequences the tokens belong to.
func (d Deployment) kvReadBytes(tokens, seqs int) float64 {
	if tokens <= 0 {
		return 0
	}
	m := d.Model
	perLayer := d.KVBytesPerToken() / math.Max(1, float64(m.Layers))
	full := float64(m.Layers - m.SlidingLayers)
	t := float64(tokens)
	windowed := t
	if m.SlidingLayers > 0 && m.SlidingWindow > 0 && seqs > 0 {
		windowed = math.Min(t, float64(seqs)*float64(m.SlidingWindow))
	}
	return perLayer * (full*t + float64(m.SlidingLayers)*windowed) * d.kvReplicas()
}

// KVCapacityTokens is how many tokens of KV cache fit in the memory left
// after the weights, keeping 1 − MemoryUtilization in reserve.
func (d Deployment) KVCapacityTokens() int {
	perToken := d.KVBytesPerToken() * d.kvReplicas()
	free := d.gpus()*d.Hardware.MemoryBytes*MemoryUtilization - d.WeightBytes()
	if perToken <= 0 || free <= 0 {
		return 0
	}
	return int(free / perToken)
}

// BytesPerToken is the bytes read per decoded token of a single stream with
// contextTokens of context: the weights a token uses (all but the input
// embedding rows, unless tied; for MoE only the top-k experts) plus the KV
// cache of the context, all GPUs together.
func (d Deployment) BytesPerToken(contextTokens int) float64 {
	return d.Model.ReadParams(1)*d.Weights.BytesPerWeight() + d.kvReadBytes(contextTokens, 1)
}

// peakFLOPS is the dense peak of one device for this precision: FP8 when the
// weights run on FP8 tensor cores and the device has them, else BF16.
func (d Deployment) peakFLOPS() float64 {
	if d.Weights.FP8Compute && d.Hardware.FP8FLOPS > 0 {
		return d.Hardware.FP8FLOPS
	}
	return d.Hardware.BF16FLOPS
}

// StepCost splits a step's time into its terms.
type StepCost struct {
	Memory    time.Duration // bytes read ÷ (bandwidth × MBU)
	Compute   time.Duration // FLOPs ÷ (peak × MFU); 0 when the FLOPs figure is unknown
	Overhead  time.Duration // per-step + per-layer
	AllReduce time.Duration // tensor parallelism
	BytesRead float64       // all GPUs
	FLOPs     float64       // all GPUs
}

// Total is max(memory, compute) + overheads + all-reduce.
func (c StepCost) Total() time.Duration {
	return max(c.Memory, c.Compute) + c.Overhead + c.AllReduce
}

// StepTime is the duration of one engine iteration:
// max(memory term, compute term) + per-step and per-layer overheads +
// tensor-parallel all-reduce. An empty step takes no time.
func (d Deployment) StepTime(s Step) time.Duration { return d.StepCost(s).Total() }

// StepCost is StepTime term by term. The memory term reads the weights once
// (for MoE only the experts the step's tokens touch) plus the KV of every
// decoding sequence and the context of the prefill. The compute term is
// 2 FLOPs per active parameter per token plus attention, decode at MFUDecode
// and prefill at MFUPrefill. Hardware with no FLOPs figure has no compute
// term.
func (d Deployment) StepCost(s Step) StepCost {
	tokens := s.DecodeSeqs + s.PrefillTokens
	if tokens <= 0 {
		return StepCost{}
	}
	m, h, g := d.Model, d.Hardware, d.gpus()
	var c StepCost

	prefillSeqs := 0
	if s.PrefillTokens > 0 {
		prefillSeqs = 1
	}
	c.BytesRead = m.ReadParams(tokens)*d.Weights.BytesPerWeight() +
		d.kvReadBytes(s.KVTokens, s.DecodeSeqs) + d.kvReadBytes(s.PrefillContextTokens, prefillSeqs)
	c.Memory = seconds(c.BytesRead / (g * h.BandwidthBytesPerSec * nonZero(h.MBU)))

	// Attention is counted per sequence (Step.PrefillPairs): k prompts of
	// L tokens attend over k·L²/2 pairs, not (kL)²/2.
	p := float64(s.PrefillTokens)
	linear := 2 * m.MatmulParamsPerToken()
	decodeFLOPs := linear*float64(s.DecodeSeqs) + m.attentionFLOPs(float64(s.KVTokens))
	prefillFLOPs := linear*p + m.attentionFLOPs(s.PrefillPairs())
	c.FLOPs = decodeFLOPs + prefillFLOPs
	if peak := g * d.peakFLOPS(); peak > 0 {
		c.Compute = seconds(decodeFLOPs/(peak*nonZero(h.MFUDecode)) + prefillFLOPs/(peak*nonZero(h.MFUPrefill)))
	}

	c.Overhead = h.StepOverhead + time.Duration(m.Layers)*h.LayerOverhead
	c.AllReduce = d.allReduceTime(tokens)
	return c
}

// allReduceTime is two all-reduces per layer (after attention and after
// the MLP) of the step's activations: each costs a fixed latency plus
// 2(g−1)/g of the message at the all-reduce's bus bandwidth (the link speed
// × AllReduceEfficiency). They are not overlapped with compute: in vLLM and
// TensorRT-LLM each all-reduce sits between the layer's matmuls on the same
// stream, so a step waits for it.
func (d Deployment) allReduceTime(tokens int) time.Duration {
	g := d.gpus()
	if g <= 1 {
		return 0
	}
	h := d.Hardware
	perOp := h.AllReduceLatency
	if h.InterconnectBytesPerSec > 0 {
		msg := float64(tokens) * float64(d.Model.Hidden) * activationBytes
		perOp += seconds(2 * (g - 1) / g * msg / (h.InterconnectBytesPerSec * nonZero(h.AllReduceEfficiency)))
	}
	return time.Duration(2*d.Model.Layers) * perOp
}

// SpecExpectedTokens is the expected number of tokens one target-model step
// yields with speculative decoding at acceptance rate acceptance and draft
// length draftLen: (1 − a^(k+1)) / (1 − a) (Leviathan et al. 2023).
func SpecExpectedTokens(acceptance float64, draftLen int) float64 {
	if draftLen <= 0 || acceptance <= 0 {
		return 1
	}
	if acceptance >= 1 {
		return float64(draftLen + 1)
	}
	return (1 - math.Pow(acceptance, float64(draftLen+1))) / (1 - acceptance)
}

// MBU is the model bandwidth utilisation of a measured single-stream decode
// rate: bytes per token × tokens/s ÷ peak bandwidth of all GPUs.
func MBU(d Deployment, decodeTPS float64, contextTokens int) float64 {
	peak := d.gpus() * d.Hardware.BandwidthBytesPerSec
	if peak <= 0 {
		return 0
	}
	return d.BytesPerToken(contextTokens) * decodeTPS / peak
}

func seconds(s float64) time.Duration {
	if math.IsInf(s, 0) || math.IsNaN(s) {
		return 0
	}
	return time.Duration(s * float64(time.Second))
}

// nonZero keeps a missing efficiency from dividing by zero: 0 means 100%.
func nonZero(f float64) float64 {
	if f <= 0 {
		return 1
	}
	return f
}

// BytesPerStep is what one decode step of batch sequences, each with
// contextTokens of KV cache, reads: the weights the batch touches (MoE
// experts included) once, plus every sequence's KV cache.
func (d Deployment) BytesPerStep(batch, contextTokens int) float64 {
	batch = max(batch, 1)
	return d.Model.ReadParams(batch)*d.Weights.BytesPerWeight() + d.kvReadBytes(batch*contextTokens, batch)
}

// AchievedMBU is the bandwidth utilisation implied by a measured per-stream
// decode rate with batch streams decoding together: one step per token of
// each stream, BytesPerStep per step, over the peak bandwidth of all GPUs.
// With batch 1 it equals MBU.
func (d Deployment) AchievedMBU(perStreamTPS float64, batch, contextTokens int) float64 {
	peak := d.gpus() * d.Hardware.BandwidthBytesPerSec
	if peak <= 0 {
		return 0
	}
	return d.BytesPerStep(batch, contextTokens) * perStreamTPS / peak
}
