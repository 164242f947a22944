// Package calibrate fits the simulator to a measured deployment: from a
// run's closed-loop levels (decode TPS p50 and TTFT p50 at each
// concurrency) and the physics it was judged against (weight bytes, KV
// bytes per token, bandwidth), it finds the memory efficiency, prefill
// rate and per-step and per-sequence overheads of a sim.Calibrated cost
// model whose simulated levels match the measured ones, and says how far
// each is off. When the levels have more than one prompt length it also
// fits the cost of attention, which makes a token dearer the longer its
// context, and the front end's time per request; with one length it says
// it could not. The simulator then predicts other loads and lengths for
// that deployment (simulate and serve --calibration).
//
// A fit that misses the measured levels by more than a bound (default
// 20% RMS) is a *FitError naming the likely causes: a declared model or
// hardware that cannot have served the run, too few levels, levels at one
// load or in lockstep. Its File carries the error, for a caller that
// writes it anyway.
package calibrate

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/gonum/optimize"

	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/sim"
)

// Schema names the calibration file format.
const Schema = "tokbench.calibration/v1"

// File is a calibration: the fitted cost model, the engine's limits, and
// how well the fit matches what was measured.
type File struct {
	Schema string `json:"schema"`
	// Run is the run directory fitted; Target and Deployment what it
	// measured.
	Run        string         `json:"run"`
	Target     metrics.Target `json:"target"`
	Deployment string         `json:"deployment"`
	Cost       sim.Calibrated `json:"cost"`
	// FrontEnd is the server's time outside its steps; the fit sets its
	// per-request time when the run has more than one prompt length
	// (with one, it cannot be told from the prefill rate).
	FrontEnd sim.FrontEnd `json:"front_end"`
	// MaxBatch is the most sequences the server runs at once (llama.cpp's
	// slots, from the run; 0: the simulator's default), MaxBatchedTokens
	// its tokens per step (0: the simulator's default).
	MaxBatch         int `json:"max_batch,omitempty"`
	MaxBatchedTokens int `json:"max_batched_tokens,omitempty"`
	Fit              Fit `json:"fit"`
}

// Fit is how the calibrated simulator matches each fitted level.
type Fit struct {
	Levels []Point `json:"levels"`
	// PromptLengths are the levels' prompt lengths, shortest first,
	// those within 10% of each other as one (their mean). With
	// one, the cost of context (attention) and the front end's
	// per-request time are not fitted.
	PromptLengths []int `json:"prompt_lengths"`
	// AtBound names the fitted parameters that ended at a bound of
	// their range, with the bound: a fit with more freedom than the data
	// use, or a declared deployment that is off.
	AtBound []string `json:"at_bound,omitempty"`
	// RMSError is the root mean square of the relative errors (fitted ÷
	// measured − 1) over every level's decode TPS and TTFT.
	RMSError float64 `json:"rms_error"`
	// MaxRMSError is the bound the fit was held to; Error, when set, says
	// how it failed it and the likely causes (a file written anyway).
	MaxRMSError float64 `json:"max_rms_error"`
	Error       string  `json:"error,omitempty"`
	Note        string  `json:"note"`
}

// Point is one level: what was measured and what the calibrated
// simulator gives for the same load and lengths.
type Point struct {
	Concurrency  int     `json:"concurrency"`
	InputTokens  int     `json:"input_tokens"`
	OutputTokens int     `json:"output_tokens"`
	Requests     int     `json:"requests"`
	DecodeTPS    Compare `json:"decode_tps_p50"`
	TTFTMs       Compare `json:"ttft_ms_p50"`
}

// Compare is a measured value beside the simulated one.
type Compare struct {
	Measured  float64 `json:"measured"`
	Simulated float64 `json:"simulated"`
	ErrorPct  float64 `json:"error_pct"`
}

// Options shape a fit.
type Options struct {
	// MaxBatch and MaxBatchedTokens are the engine's limits (0: the
	// run's server slots when it said, else the simulator's defaults).
	MaxBatch, MaxBatchedTokens int
	// MaxRMSError is the rms error beyond which the fit is refused (0:
	// DefaultMaxRMSError).
	MaxRMSError float64
	// Lockstep says the run's levels started all their users at once
	// (bench --lockstep), which the fit's spread users do not.
	Lockstep bool
}

// DefaultMaxRMSError is the bound a fit must meet: 20% RMS over every
// level's decode TPS and TTFT.
const DefaultMaxRMSError = 0.20

// FitError is a fit that misses the measured levels by more than the
// bound. File is the fit all the same, its Fit.Error set; Causes are the
// likely reasons, the surest first.
type FitError struct {
	File   *File
	Causes []string
}

func (e *FitError) Error() string { return e.File.Fit.Error }

// InputError is a run that cannot be fitted; its message names why.
type InputError struct{ Msg string }

func (e *InputError) Error() string { return e.Msg }

// FromRun fits a calibration to a run's summary and run.json metadata
// (meta: server_slots when the server said).
func FromRun(ctx context.Context, dir string, s metrics.Summary, meta map[string]string, o Options) (*File, error) {
	var pts []Point
	var ph *metrics.Physics
	for _, lv := range s.Levels {
		if lv.Load.Mode != metrics.ModeConcurrency || lv.Requests.Completed == 0 || lv.DecodeTPS.Count == 0 || lv.Physics == nil {
			continue
		}
		ph = lv.Physics
		pts = append(pts, Point{
			Concurrency: lv.Load.Concurrency, Requests: lv.Requests.Completed,
			InputTokens:  int(math.Round(float64(lv.InputTokens) / float64(lv.Requests.Completed))),
			OutputTokens: int(math.Round(float64(lv.OutputTokens) / float64(lv.Requests.Completed))),
			DecodeTPS:    Compare{Measured: lv.DecodeTPS.P50}, TTFTMs: Compare{Measured: lv.TTFT.P50},
		})
	}
	switch {
	case len(pts) == 0:
		return nil, &InputError{dir + ": no closed-loop level with decode TPS and physics: bench it with --concurrency and --hardware (and --gguf or a model the catalog or the server gives)"}
	case !(ph.WeightBytes > 0) || !(ph.BandwidthBytesPerSec > 0):
		return nil, &InputError{dir + ": its physics lack weight bytes and bandwidth (a run from before tokbench recorded them): bench it again"}
	}
	f := &File{
		Schema: Schema, Run: dir, Target: s.Target, Deployment: ph.Deployment,
		MaxBatch: o.MaxBatch, MaxBatchedTokens: o.MaxBatchedTokens,
		Cost: sim.Calibrated{
			WeightBytes: ph.WeightBytes, KVBytesPerToken: ph.KVBytesPerToken,
			KVCapacity: ph.KVCapacityTokens, BandwidthBytesPerSec: ph.BandwidthBytesPerSec,
		},
	}
	if f.Cost.KVCapacity <= 0 {
		f.Cost.KVCapacity = 1 << 20 // the physics had no capacity (no memory size): not a limit
	}
	if f.MaxBatch == 0 {
		f.MaxBatch, _ = strconv.Atoi(meta["server_slots"])
	}
	if err := f.fit(ctx, pts); err != nil {
		return nil, err
	}
	f.Fit.MaxRMSError = cmp.Or(o.MaxRMSError, DefaultMaxRMSError)
	if f.Fit.RMSError > f.Fit.MaxRMSError {
		causes := f.causes(o)
		f.Fit.Error = fmt.Sprintf("the fit misses the measured levels by %.1f%% rms, beyond the bound of %.0f%%: likely %s",
			100*f.Fit.RMSError, 100*f.Fit.MaxRMSError, strings.Join(causes, "; or "))
		return f, &FitError{File: f, Causes: causes}
	}
	return f, nil
}

// causes are the likely reasons a fit misses its levels, the surest
// first: a declared deployment that cannot read what was decoded, a fit
// pinned at its bandwidth bound, too few levels or loads, lockstep
// levels; else the cost model itself.
func (f *File) causes(o Options) []string {
	var out []string
	pts, c := f.Fit.Levels, f.Cost
	// The least loaded level reads the weights once a token per stream.
	low := slices.MinFunc(pts, func(a, b Point) int { return cmp.Compare(a.Concurrency, b.Concurrency) })
	ctxTokens := float64(low.InputTokens) + float64(low.OutputTokens)/2
	read := (c.WeightBytes + float64(low.Concurrency)*c.KVBytesPerToken*ctxTokens) * low.DecodeTPS.Measured
	if mbu := read / c.BandwidthBytesPerSec; mbu > 1 {
		out = append(out, fmt.Sprintf("the declared model or hardware cannot have served this run: %.2f tok/s at c=%d reads %.1f GB/s (%.2f GB a step), %.0f%% of the %.1f GB/s that %s can read; the model is smaller or more quantized than declared, or the hardware faster",
			low.DecodeTPS.Measured, low.Concurrency, read/1e9, read/low.DecodeTPS.Measured/1e9, 100*mbu, c.BandwidthBytesPerSec/1e9, f.Deployment))
	} else if c.MBU >= 0.99 {
		out = append(out, fmt.Sprintf("the fit's memory efficiency sits at its bound (%.1f%%): the declared model or hardware may not be what served this run", 100*c.MBU))
	}
	loads := map[int]bool{}
	for _, p := range pts {
		loads[p.Concurrency] = true
	}
	switch {
	case len(pts) < 2:
		out = append(out, fmt.Sprintf("too few levels: %d, for four parameters (bench at least two loads, e.g. --concurrency 1,2)", len(pts)))
	case len(loads) < 2:
		out = append(out, fmt.Sprintf("every level is at c=%d: one load cannot tell per-step from per-sequence costs", pts[0].Concurrency))
	}
	if o.Lockstep {
		out = append(out, "the levels ran in lockstep (bench --lockstep: each level's users started at once, prefilling in one burst), which the fit's users, spread over a request, do not")
	}
	if len(out) == 0 {
		out = append(out, "the simulator's cost model does not describe this server (nothing in the run names a cause: compare the levels' measured and fitted figures)")
	}
	return out
}

// The fitted parameters, in the order of the fit's vector.
const (
	pMBU = iota
	pPrefill
	pStep
	pSeq
	pRequest
	pAttention
	nParams
)

// params name the fitted parameters and their smallest values: a fit
// that ends at one (or at MBU 100%) says so.
var params = [nParams]struct {
	name  string
	floor float64
}{
	{"memory efficiency", 0}, {"prefill rate", 0},
	{"per-step overhead", 1e-4}, {"per-sequence overhead", 1e-4}, // ms
	{"front end per request", 1e-3}, // ms
	{"attention", 1e-3},             // ns a pair
}

// fit finds MBU, the prefill rate and the two overheads, and with levels
// of more than one prompt length also the attention per (query, key) pair
// and the front end's per-request time, by Nelder-Mead on their
// logarithms, minimizing the squared log errors of every level's decode
// TPS p50 and TTFT p50 in virtual time. Memory efficiency and the
// per-step overhead shift every step alike, so a weak pull towards the MBU
// the first level implies keeps them apart where the data cannot.
func (f *File) fit(ctx context.Context, pts []Point) error {
	first := pts[0]
	mbu0 := min(1, f.Cost.WeightBytes*first.DecodeTPS.Measured/f.Cost.BandwidthBytesPerSec)
	pr0 := float64(max(first.InputTokens, 1)) / max(first.TTFTMs.Measured/1000, 1e-6)
	lengths := promptLengths(pts)
	free := []int{pMBU, pPrefill, pStep, pSeq}
	x0 := []float64{math.Log(mbu0), math.Log(pr0), math.Log(0.1), math.Log(0.05)}
	if len(lengths) > 1 {
		// A tenth of a prompt token's compute spent attending over the
		// shortest prompt, and a millisecond a request, to start from.
		attn0 := 0.1 / pr0 / float64(max(lengths[0], 1)) * 1e9
		free = append(free, pRequest, pAttention)
		x0 = append(x0, math.Log(1), math.Log(attn0))
	}
	var simErr error
	obj := func(x []float64) float64 {
		c, fe := f.modelAt(free, x)
		sum := 0.01 * sq(x[0]-math.Log(mbu0))
		if x[0] > 0 { // more than the bandwidth: impossible
			sum += 100 * sq(x[0])
		}
		for i := range pts {
			tps, ttft, err := f.simulate(ctx, c, fe, pts[i])
			if err != nil {
				simErr = err
				return math.Inf(1)
			}
			sum += sq(math.Log(tps/pts[i].DecodeTPS.Measured)) + sq(math.Log(ttft/pts[i].TTFTMs.Measured))
		}
		return sum
	}
	res, err := optimize.Minimize(optimize.Problem{Func: obj}, x0,
		&optimize.Settings{FuncEvaluations: 200 * len(free), Converger: &optimize.FunctionConverge{Absolute: 1e-7, Iterations: 60}},
		&optimize.NelderMead{})
	if err != nil && res == nil {
		return fmt.Errorf("calibrate: %w", err)
	}
	if simErr != nil {
		return fmt.Errorf("calibrate: simulating: %w", simErr)
	}
	f.Cost, f.FrontEnd = f.modelAt(free, res.X)
	var sumSq float64
	for i := range pts {
		p := &pts[i]
		tps, ttft, err := f.simulate(ctx, f.Cost, f.FrontEnd, *p)
		if err != nil {
			return err
		}
		p.DecodeTPS.set(tps)
		p.TTFTMs.set(ttft)
		sumSq += sq(p.DecodeTPS.ErrorPct/100) + sq(p.TTFTMs.ErrorPct/100)
	}
	f.Fit = Fit{Levels: pts, PromptLengths: lengths, RMSError: math.Sqrt(sumSq / float64(2*len(pts))), AtBound: f.atBound(free)}
	f.Fit.Note = fitNote(len(pts), lengths, f.Fit.AtBound)
	return nil
}

// samePromptLength is how far apart, relative to the shorter, two levels'
// mean prompt lengths may be and still count as one length: the means of
// a dataset's or a ranged --input-tokens' prompts differ by noise from
// level to level, which cannot tell attention from the prefill rate.
const samePromptLength = 0.10

// promptLengths are the levels' distinct prompt lengths, shortest first:
// lengths within samePromptLength of the shortest of a run of them are
// one length, their rounded mean.
func promptLengths(pts []Point) []int {
	var l []int
	for _, p := range pts {
		l = append(l, p.InputTokens)
	}
	slices.Sort(l)
	var out []int
	for i := 0; i < len(l); {
		j, sum := i, 0
		for ; j < len(l) && float64(l[j]) <= float64(l[i])*(1+samePromptLength); j++ {
			sum += l[j]
		}
		out = append(out, int(math.Round(float64(sum)/float64(j-i))))
		i = j
	}
	return out
}

// atBound names the free parameters at an end of their range.
func (f *File) atBound(free []int) []string {
	var out []string
	for _, i := range free {
		switch v := f.value(i); {
		case i == pMBU && v >= 0.99:
			out = append(out, fmt.Sprintf("memory efficiency %.1f%% (at most 100%%)", 100*v))
		case params[i].floor > 0 && v <= params[i].floor*1.01:
			out = append(out, params[i].name+" 0 (none)")
		}
	}
	return out
}

// value is the fitted parameter i.
func (f *File) value(i int) float64 {
	switch i {
	case pMBU:
		return f.Cost.MBU
	case pPrefill:
		return f.Cost.PrefillTPS
	case pStep:
		return f.Cost.StepOverheadMs
	case pSeq:
		return f.Cost.SeqOverheadMs
	case pRequest:
		return f.FrontEnd.RequestMs
	}
	return f.Cost.AttentionNsPerPair
}

func fitNote(levels int, lengths []int, atBound []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "fitted to %d level(s)", levels)
	if len(lengths) == 1 {
		fmt.Fprintf(&b, ", all with %d-token prompts: the cost of context (attention) and the front end's time per request are not told apart from the prefill rate at one length, so predictions at other lengths assume neither (bench --input-tokens with two lengths, e.g. 256,1024, to fit them)", lengths[0])
	} else {
		fmt.Fprintf(&b, " with prompts of %s tokens: attention and the front end's time per request fitted", joinInts(lengths))
	}
	b.WriteString("; memory efficiency and per-step overhead act alike on every step, so with few levels the split between them is the fit's choice")
	if len(atBound) > 0 {
		fmt.Fprintf(&b, "; at a bound: %s (the model has more freedom than the levels use, or the declared deployment is off)", strings.Join(atBound, ", "))
	}
	return b.String()
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}

func (c *Compare) set(sim float64) {
	c.Simulated = sim
	if c.Measured != 0 {
		c.ErrorPct = 100 * (sim/c.Measured - 1)
	}
}

// modelAt is the cost model and front end at log-parameters x of the
// free parameters; the others stay as they are.
func (f *File) modelAt(free []int, x []float64) (sim.Calibrated, sim.FrontEnd) {
	c, fe := f.Cost, f.FrontEnd
	for j, i := range free {
		v := max(math.Exp(x[j]), params[i].floor)
		switch i {
		case pMBU:
			c.MBU = v
		case pPrefill:
			c.PrefillTPS = v
		case pStep:
			c.StepOverheadMs = v
		case pSeq:
			c.SeqOverheadMs = v
		case pRequest:
			fe.RequestMs = v
		case pAttention:
			c.AttentionNsPerPair = v
		}
	}
	return c, fe
}

// Engine is the simulator's engine configuration the calibration asks for.
func (f *File) Engine() sim.EngineConfig {
	e := sim.DefaultConfig().Engine
	if f.MaxBatch > 0 {
		e.MaxNumSeqs = f.MaxBatch
	}
	if f.MaxBatchedTokens > 0 {
		e.MaxBatchedTokens = f.MaxBatchedTokens
	}
	e.FrontEnd = f.FrontEnd
	return e
}

// SimConfig is the simulator of the calibrated deployment: the fitted
// cost model, the engine's limits, the measured server's model name.
func (f *File) SimConfig() sim.Config {
	cfg := sim.DefaultConfig()
	cfg.Cost, cfg.Engine = f.Cost, f.Engine()
	if f.Target.Model != "" {
		cfg.ServedModel = f.Target.Model
	}
	return cfg
}

// simulate runs p's load in virtual time on cost behind front end fe: its
// decode TPS p50 and TTFT p50.
func (f *File) simulate(ctx context.Context, cost sim.Calibrated, fe sim.FrontEnd, p Point) (tps, ttftMs float64, err error) {
	// A long level's every request is no better a fit than a few rounds
	// of its users, and a soak's would take hours over the fit's
	// hundreds of simulations.
	n := min(p.Requests, max(8*p.Concurrency, 64))
	eng := f.Engine()
	eng.FrontEnd = fe
	levels, err := sim.Curve(ctx, eng, cost, sim.CurveConfig{
		Users: []int{p.Concurrency}, Requests: n, PromptTokens: max(p.InputTokens, 1), MaxTokens: max(p.OutputTokens, 2),
	})
	if err != nil {
		return 0, 0, err
	}
	lv := levels[0]
	if lv.DecodeTPS.Count == 0 {
		return 0, 0, errors.New("the simulated level decoded nothing")
	}
	return lv.DecodeTPS.P50, lv.TTFT.P50, nil
}

func sq(v float64) float64 { return v * v }

// Write writes the calibration as indented JSON.
func (f *File) Write(path string) error {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// Read reads and checks a calibration file.
func Read(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f File
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if f.Schema != Schema {
		return nil, fmt.Errorf("%s: schema %q, want %q", path, f.Schema, Schema)
	}
	if err := f.Cost.Validate(); err != nil {
		return nil, fmt.Errorf("%s: cost: %w", path, err)
	}
	if err := f.FrontEnd.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &f, nil
}
