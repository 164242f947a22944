// Package telemetry samples the GPUs' own counters while a benchmark
// runs: a DCGM exporter's /metrics page (DCGM_FI_PROF_DRAM_ACTIVE, the
// fraction of cycles the memory interface is busy, a measured MBU;
// DCGM_FI_PROF_SM_ACTIVE; DCGM_FI_DEV_POWER_USAGE; DCGM_FI_DEV_FB_USED),
// or nvidia-smi's CSV query repeated every 100 ms. A Sampler runs until
// Close, which waits for its goroutine (and nvidia-smi) to end; its
// Window gives the samples of an interval, and Level folds windows into
// a level's metrics.GPU, with the energy of its output tokens. A Sampler
// is safe for concurrent use.
package telemetry

import (
	"cmp"
	"context"
	"errors"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/tokbench/tokbench/metrics"
)

// Sample is one reading of every GPU.
type Sample struct {
	At   time.Time
	GPUs int
	// PowerWatts and MemoryUsedBytes are all GPUs' summed; MemClockMHz
	// and the activities (0–1) their mean. HasMemoryActivity and
	// HasSMActivity say whether the counters gave those.
	PowerWatts                       float64
	MemoryUsedBytes                  float64
	MemClockMHz                      float64
	MemoryActivity, SMActivity       float64
	HasMemoryActivity, HasSMActivity bool
	MemoryActivitySource             string
}

// Sampler collects Samples until Close.
type Sampler struct {
	// Source names the counters ("dcgm URL", "nvidia-smi").
	Source string

	mu      sync.Mutex
	samples []Sample
	err     error // the first failed reading
	cancel  context.CancelFunc
	done    chan struct{}
}

func newSampler(ctx context.Context, source string, loop func(ctx context.Context, s *Sampler)) *Sampler {
	ctx, cancel := context.WithCancel(ctx)
	s := &Sampler{Source: source, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		loop(ctx, s)
	}()
	return s
}

func (s *Sampler) add(x Sample) {
	s.mu.Lock()
	s.samples = append(s.samples, x)
	s.mu.Unlock()
}

func (s *Sampler) fail(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.mu.Unlock()
}

// Err is the first reading that failed, nil when none did.
func (s *Sampler) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Close stops sampling and waits for it to end.
func (s *Sampler) Close() error {
	s.cancel()
	<-s.done
	return s.Err()
}

// Window is the samples taken from t0 to t1; with none in it, the last
// one before t1 (the reading in force), if any.
func (s *Sampler) Window(t0, t1 time.Time) []Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Sample
	var last *Sample
	for i := range s.samples {
		x := s.samples[i]
		if x.At.After(t1) {
			break
		}
		if !x.At.Before(t0) {
			out = append(out, x)
		}
		last = &s.samples[i]
	}
	if len(out) == 0 && last != nil {
		out = append(out, *last)
	}
	return out
}

// WaitSamples blocks until the sampler holds n samples or ctx ends.
func (s *Sampler) WaitSamples(ctx context.Context, n int) error {
	for {
		s.mu.Lock()
		have := len(s.samples)
		s.mu.Unlock()
		if have >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.done:
			return cmp.Or(s.Err(), errors.New("telemetry: the sampler ended"))
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Level folds a level's runs: each run's samples and its duration.
type Level struct {
	Source   string
	samples  []Sample
	energy   float64 // joules
	timeline []metrics.GPUSample
}

// AddRun is Add, keeping the level's first run with samples as its
// timeline, at the samples' times from t0, the run's start.
func (l *Level) AddRun(t0 time.Time, samples []Sample, durationS float64) {
	if l.timeline == nil {
		l.timeline = timeline(t0, samples)
	}
	l.Add(samples, durationS)
}

// timeline is samples from t0 in at most metrics.MaxGPUTimeline points,
// each the mean of consecutive samples when there are more. A sample
// from before t0 (the reading in force when the run began) is at 0.
func timeline(t0 time.Time, samples []Sample) []metrics.GPUSample {
	if len(samples) == 0 {
		return nil
	}
	per := (len(samples) + metrics.MaxGPUTimeline - 1) / metrics.MaxGPUTimeline
	var out []metrics.GPUSample
	for i := 0; i < len(samples); i += per {
		group := samples[i:min(i+per, len(samples))]
		p := metrics.GPUSample{AtMs: max(0, float64(group[0].At.Sub(t0))/float64(time.Millisecond))}
		var mem float64
		nMem := 0
		for _, x := range group {
			p.PowerWatts += x.PowerWatts / float64(len(group))
			if x.HasMemoryActivity {
				mem += x.MemoryActivity
				nMem++
			}
		}
		if nMem > 0 {
			v := mem / float64(nMem)
			p.MemoryActivity = &v
		}
		out = append(out, p)
	}
	return out
}

// Add is one run of the level: its samples and how long it ran.
func (l *Level) Add(samples []Sample, durationS float64) {
	if len(samples) == 0 {
		return
	}
	var p float64
	for _, x := range samples {
		p += x.PowerWatts
	}
	l.energy += p / float64(len(samples)) * durationS
	l.samples = append(l.samples, samples...)
}

// GPU is the level's figures for outputTokens tokens, priced at
// pricePerKWh (0: not priced); nil without samples.
func (l *Level) GPU(outputTokens int, pricePerKWh float64) *metrics.GPU {
	if len(l.samples) == 0 {
		return nil
	}
	g := &metrics.GPU{Source: l.Source, Samples: len(l.samples), EnergyJoules: l.energy, Timeline: l.timeline}
	var power []float64
	var mem, sm, clock float64
	var nMem, nSM int
	for _, x := range l.samples {
		g.GPUs = max(g.GPUs, x.GPUs)
		power = append(power, x.PowerWatts)
		g.MemoryUsedBytes = max(g.MemoryUsedBytes, x.MemoryUsedBytes)
		clock += x.MemClockMHz
		if x.HasMemoryActivity {
			mem += x.MemoryActivity
			nMem++
			g.MemoryActivitySource = x.MemoryActivitySource
		}
		if x.HasSMActivity {
			sm += x.SMActivity
			nSM++
		}
	}
	slices.Sort(power)
	g.PowerWattsP50, g.PowerWattsMax = metrics.Percentile(power, 50), power[len(power)-1]
	g.MemClockMHz = clock / float64(len(l.samples))
	if nMem > 0 {
		v := mem / float64(nMem)
		g.MemoryActivity = &v
	}
	if nSM > 0 {
		v := sm / float64(nSM)
		g.SMActivity = &v
	}
	if outputTokens > 0 && l.energy > 0 {
		g.JoulesPerOutputToken = l.energy / float64(outputTokens)
		g.OutputTokensPerJoule = float64(outputTokens) / l.energy
		if pricePerKWh > 0 {
			g.EnergyPricePerKWh = pricePerKWh
			g.EnergyCostPerMillion = pricePerKWh * g.JoulesPerOutputToken * 1e6 / 3.6e6
		}
	}
	return g
}

// ErrNoGPU: nothing to sample (no nvidia-smi on PATH).
var ErrNoGPU = errors.New("no GPU telemetry: nvidia-smi is not on PATH")

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
