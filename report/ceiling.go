package report

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/tokbench/tokbench/physics"
)

// Ceiling is what `tokbench ceiling` reports: a deployment's physical
// limits, in the --format json shape (field names are a contract).
type Ceiling struct {
	Model        string  `json:"model"`
	TotalParams  float64 `json:"total_params"`
	ActiveParams float64 `json:"active_params"`
	Quant        string  `json:"quant"`
	KVQuant      string  `json:"kv_quant"`
	Hardware     string  `json:"hardware"`
	GPUs         int     `json:"gpus"`
	Engine       string  `json:"engine"`
	// BandwidthBytesPerSec is one device's peak the ceilings divide;
	// BandwidthDoubt says why it may be wrong (empty: no known doubt).
	BandwidthBytesPerSec float64 `json:"bandwidth_bytes_per_sec"`
	BandwidthDoubt       string  `json:"bandwidth_doubt,omitempty"`

	WeightBytes     float64 `json:"weight_bytes"`
	ContextTokens   int     `json:"context_tokens"`
	BytesPerToken   float64 `json:"bytes_per_token"`
	KVBytesPerToken float64 `json:"kv_bytes_per_token"`

	DecodeTPSCeiling  float64 `json:"decode_tps_ceiling"`
	DecodeTPSExpected float64 `json:"decode_tps_expected"`
	TPOTMsExpected    float64 `json:"tpot_ms_expected"`

	Batch                  int     `json:"batch"`
	AggregateTPSCeiling    float64 `json:"aggregate_tps_ceiling"`
	AggregateTPSExpected   float64 `json:"aggregate_tps_expected"`
	PerStreamTPSExpected   float64 `json:"per_stream_tps_expected"`
	BatchComputeBound      bool    `json:"batch_compute_bound"`
	ComputeBoundBatch      int     `json:"compute_bound_batch"`
	ComputeBoundTPSCeiling float64 `json:"compute_bound_tps_ceiling"`

	KVCacheBytes      float64 `json:"kv_cache_bytes"`
	KVCapacityTokens  int     `json:"kv_capacity_tokens"`
	MaxBatchAtContext int     `json:"max_batch_at_context"`
	FitsInMemory      bool    `json:"fits_in_memory"`

	PromptTokens      int     `json:"prompt_tokens"`
	PrefillFloorMs    float64 `json:"prefill_floor_ms"`
	PrefillExpectedMs float64 `json:"prefill_expected_ms"`

	Verdict *CeilingVerdict `json:"verdict,omitempty"`
	Notes   []string        `json:"notes,omitempty"`

	flopsKnown bool
}

// CeilingVerdict judges a claimed tokens/s.
type CeilingVerdict struct {
	ClaimTPS           float64       `json:"claim_tps"`
	WithinSingleStream bool          `json:"within_single_stream_ceiling"`
	FractionOfCeiling  float64       `json:"fraction_of_ceiling"`
	RequiredMBU        float64       `json:"required_mbu"`
	Summary            string        `json:"summary"`
	Paths              []CeilingPath `json:"paths,omitempty"`
}

// CeilingPath is one way a claim could be reached.
type CeilingPath struct {
	How      string `json:"how"`
	Possible bool   `json:"possible"`
	Detail   string `json:"detail"`
}

// NewCeiling computes the report of deployment d for workload wl: engine
// names the calibration, claim (when positive) is judged, notes come first.
func NewCeiling(d physics.Deployment, engine string, wl physics.Workload, claim float64, notes []string) Ceiling {
	c := d.Ceiling(wl)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	out := Ceiling{
		Model: d.Model.Name, TotalParams: d.Model.TotalParams, ActiveParams: d.Model.ActiveParams,
		Quant: d.Weights.Name, KVQuant: d.KVCache.Name, Hardware: d.Hardware.Name, GPUs: d.GPUs, Engine: engine,
		BandwidthBytesPerSec: d.Hardware.BandwidthBytesPerSec, BandwidthDoubt: d.Hardware.Doubt,
		WeightBytes: c.WeightBytes, ContextTokens: c.ContextTokens, BytesPerToken: c.BytesPerToken, KVBytesPerToken: c.KVBytesPerToken,
		DecodeTPSCeiling: c.DecodeTPSCeiling, DecodeTPSExpected: c.DecodeTPSExpected, TPOTMsExpected: ms(c.TPOTExpected),
		Batch: c.Batch, AggregateTPSCeiling: c.AggregateTPSCeiling, AggregateTPSExpected: c.AggregateTPSExpected,
		PerStreamTPSExpected: c.PerStreamTPSExpected, BatchComputeBound: c.BatchComputeBound,
		ComputeBoundBatch: c.ComputeBoundBatch, ComputeBoundTPSCeiling: c.ComputeBoundTPSCeiling,
		KVCacheBytes: c.KVCacheBytes, KVCapacityTokens: c.KVCapacityTokens, MaxBatchAtContext: c.MaxBatchAtContext,
		FitsInMemory: c.FitsInMemory,
		PromptTokens: c.PromptTokens, PrefillFloorMs: ms(c.PrefillFloor), PrefillExpectedMs: ms(c.PrefillExpected),
		Notes: notes, flopsKnown: d.Hardware.BF16FLOPS > 0,
	}
	if !c.FitsInMemory {
		out.Notes = append(out.Notes, fmt.Sprintf("does not fit: %.1f GB of weights and %.1f GB of KV cache against %.1f GB usable on %d× %s",
			c.WeightBytes/1e9, c.KVCacheBytes/1e9, float64(d.GPUs)*d.Hardware.MemoryBytes*physics.MemoryUtilization/1e9, d.GPUs, d.Hardware.Name))
	}
	if claim > 0 {
		v := c.Judge(claim)
		vj := &CeilingVerdict{ClaimTPS: v.ClaimTPS, WithinSingleStream: v.WithinSingleStream,
			FractionOfCeiling: v.FractionOfCeiling, RequiredMBU: v.RequiredMBU, Summary: v.Summary}
		for _, p := range v.Paths {
			vj.Paths = append(vj.Paths, CeilingPath(p))
		}
		out.Verdict = vj
	}
	return out
}

func fmtBytes(b float64) string {
	switch {
	case b >= 1e12:
		return fmt.Sprintf("%.2f TB", b/1e12)
	case b >= 1e9:
		return fmt.Sprintf("%.2f GB", b/1e9)
	case b >= 1e6:
		return fmt.Sprintf("%.2f MB", b/1e6)
	case b >= 1e3:
		return fmt.Sprintf("%.1f kB", b/1e3)
	}
	return fmt.Sprintf("%.0f B", b)
}

// fmtNum prints a count with thousands separators.
func fmtNum(v float64) string { return physics.GroupDigits(v) }

func fmtTPS(v float64) string {
	if v >= 1000 {
		return fmtNum(v) + " tok/s"
	}
	return fmt.Sprintf("%.1f tok/s", v)
}

// CeilingTable writes the report as the terminal table.
func CeilingTable(w io.Writer, o Ceiling) error {
	params := fmt.Sprintf("%.3gB params", o.TotalParams/1e9)
	if o.ActiveParams > 0 && o.ActiveParams < o.TotalParams {
		params = fmt.Sprintf("%.3gB params, %.3gB active", o.TotalParams/1e9, o.ActiveParams/1e9)
	}
	fmt.Fprintf(w, "%s (%s) · %s weights · %s KV · %d× %s · calibration: %s\n\n",
		o.Model, params, o.Quant, o.KVQuant, o.GPUs, o.Hardware, o.Engine)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	fits := "fits"
	if !o.FitsInMemory {
		fits = "DOES NOT FIT"
	}
	row("weights", fmt.Sprintf("%s (%s with the KV cache below)", fmtBytes(o.WeightBytes), fits))
	row("bytes read per token", fmt.Sprintf("%s at %d tokens of context", fmtBytes(o.BytesPerToken), o.ContextTokens))
	if o.KVBytesPerToken > 0 {
		row("KV cache per token", fmtBytes(o.KVBytesPerToken))
		kv := fmt.Sprintf("%s tokens fit", fmtNum(float64(o.KVCapacityTokens)))
		if o.ContextTokens > 0 {
			kv += fmt.Sprintf(" (%s streams at %d tokens)", fmtNum(float64(o.MaxBatchAtContext)), o.ContextTokens)
		}
		row("KV cache capacity", kv)
		row(fmt.Sprintf("KV cache, batch %d", o.Batch), fmtBytes(o.KVCacheBytes))
	} else {
		row("KV cache per token", "unknown (no architecture)")
	}
	row("single-stream decode", fmt.Sprintf("ceiling %s · expected %s (TPOT %.2f ms)", fmtTPS(o.DecodeTPSCeiling), fmtTPS(o.DecodeTPSExpected), o.TPOTMsExpected))
	bound := "memory-bound"
	if o.BatchComputeBound {
		bound = "compute-bound"
	}
	row(fmt.Sprintf("batch %d aggregate", o.Batch), fmt.Sprintf("ceiling %s · expected %s (%s per stream, %s)",
		fmtTPS(o.AggregateTPSCeiling), fmtTPS(o.AggregateTPSExpected), fmtTPS(o.PerStreamTPSExpected), bound))
	switch {
	case o.ComputeBoundBatch > 0:
		row("compute overtakes memory", fmt.Sprintf("at batch %s (aggregate ceiling %s)", fmtNum(float64(o.ComputeBoundBatch)), fmtTPS(o.ComputeBoundTPSCeiling)))
	case !o.flopsKnown:
		row("compute overtakes memory", "unknown (no FLOPs figure)")
	default:
		row("compute overtakes memory", fmt.Sprintf("never at %d tokens of context: each stream's KV reads take longer than its FLOPs", o.ContextTokens))
	}
	if o.PromptTokens > 0 {
		prefill := "unknown (no FLOPs figure)"
		if o.flopsKnown {
			prefill = fmt.Sprintf("TTFT floor ≥ %.1f ms · expected %.1f ms", o.PrefillFloorMs, o.PrefillExpectedMs)
		}
		row(fmt.Sprintf("prefill, %d tokens", o.PromptTokens), prefill)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if v := o.Verdict; v != nil {
		fmt.Fprintf(w, "\nclaim %s: %s\n", fmtTPS(v.ClaimTPS), v.Summary)
		for _, p := range v.Paths {
			mark := "no "
			if p.Possible {
				mark = "yes"
			}
			fmt.Fprintf(w, "  %s  %-27s %s\n", mark, p.How, p.Detail)
		}
	}
	for _, n := range o.Notes {
		fmt.Fprintf(w, "\nnote: %s", n)
	}
	if len(o.Notes) > 0 {
		fmt.Fprintln(w)
	}
	return nil
}
