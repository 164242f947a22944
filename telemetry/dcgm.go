package telemetry

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The DCGM exporter's fields tokbench reads, in NVIDIA's units
// (docs.nvidia.com/datacenter/dcgm, "Field Identifiers"): power in W,
// profiling activities as ratios 0–1, framebuffer in MiB, clocks in MHz,
// the copy utilization in percent.
const (
	dcgmPower       = "DCGM_FI_DEV_POWER_USAGE"
	dcgmDRAMActive  = "DCGM_FI_PROF_DRAM_ACTIVE"
	dcgmSMActive    = "DCGM_FI_PROF_SM_ACTIVE"
	dcgmFBUsed      = "DCGM_FI_DEV_FB_USED"
	dcgmMemClock    = "DCGM_FI_DEV_MEM_CLOCK"
	dcgmMemCopyUtil = "DCGM_FI_DEV_MEM_COPY_UTIL"
)

// ParseDCGM reads a DCGM exporter page (Prometheus text format): one
// series per GPU (label gpu) of each field, summed or averaged over the
// GPUs. Memory activity is DCGM_FI_PROF_DRAM_ACTIVE where the exporter
// has profiling metrics, else DCGM_FI_DEV_MEM_COPY_UTIL ÷ 100 (the
// fraction of time memory was read or written, nvidia-smi's figure).
func ParseDCGM(r io.Reader) (Sample, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return Sample{}, err
	}
	// per GPU: field → value
	gpus := map[string]map[string]float64{}
	for _, name := range []string{dcgmPower, dcgmDRAMActive, dcgmSMActive, dcgmFBUsed, dcgmMemClock, dcgmMemCopyUtil} {
		f := families[name]
		if f == nil {
			continue
		}
		for _, m := range f.GetMetric() {
			id := label(m, "gpu") + "/" + label(m, "UUID")
			if gpus[id] == nil {
				gpus[id] = map[string]float64{}
			}
			gpus[id][name] = value(m)
		}
	}
	if len(gpus) == 0 {
		return Sample{}, fmt.Errorf("no %s or other DCGM field on the page", dcgmPower)
	}
	x := Sample{GPUs: len(gpus)}
	var mem, sm, copyUtil, clock float64
	var nMem, nSM, nCopy int
	for _, g := range gpus {
		x.PowerWatts += g[dcgmPower]
		x.MemoryUsedBytes += g[dcgmFBUsed] * (1 << 20)
		clock += g[dcgmMemClock]
		if v, ok := g[dcgmDRAMActive]; ok {
			mem += v
			nMem++
		}
		if v, ok := g[dcgmSMActive]; ok {
			sm += v
			nSM++
		}
		if v, ok := g[dcgmMemCopyUtil]; ok {
			copyUtil += v / 100
			nCopy++
		}
	}
	x.MemClockMHz = clock / float64(len(gpus))
	switch {
	case nMem > 0:
		x.MemoryActivity, x.HasMemoryActivity, x.MemoryActivitySource = mem/float64(nMem), true, dcgmDRAMActive
	case nCopy > 0:
		x.MemoryActivity, x.HasMemoryActivity, x.MemoryActivitySource = copyUtil/float64(nCopy), true, dcgmMemCopyUtil
	}
	if nSM > 0 {
		x.SMActivity, x.HasSMActivity = sm/float64(nSM), true
	}
	return x, nil
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func value(m *dto.Metric) float64 {
	switch {
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetUntyped() != nil:
		return m.GetUntyped().GetValue()
	}
	return 0
}

// DCGM samples a DCGM exporter's /metrics at url every interval with
// client (each GET bounded by the interval and 2 s at least) until Close.
func DCGM(ctx context.Context, client *http.Client, url string, every time.Duration) *Sampler {
	return newSampler(ctx, "dcgm "+url, func(ctx context.Context, s *Sampler) {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			x, err := scrapeDCGM(ctx, client, url, max(every, 2*time.Second))
			if err != nil && ctx.Err() == nil {
				s.fail(err)
			} else if err == nil {
				s.add(x)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
}

func scrapeDCGM(ctx context.Context, client *http.Client, url string, timeout time.Duration) (Sample, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Sample{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return Sample{}, fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Sample{}, fmt.Errorf("GET %s: HTTP %d", url, resp.StatusCode)
	}
	x, err := ParseDCGM(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return Sample{}, fmt.Errorf("GET %s: %w", url, err)
	}
	x.At = time.Now()
	return x, nil
}
