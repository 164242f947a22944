package report

import (
	"fmt"
	"strings"

	"github.com/tokbench/tokbench/metrics"
)

// GPUNote is a level's GPU counters in one line: the memory activity
// measured beside the MBU computed, SM activity, power, memory, and the
// energy of its output tokens with what it costs beside the GPU-hour
// cost; "" without telemetry.
func GPUNote(lv metrics.Level) string {
	g := lv.GPU
	if g == nil {
		return ""
	}
	var parts []string
	if g.MemoryActivity != nil {
		s := fmt.Sprintf("memory activity %.1f%% measured (%s)", 100**g.MemoryActivity, g.MemoryActivitySource)
		if ph := lv.Physics; ph != nil && lv.DecodeTPS.Count > 0 {
			s += fmt.Sprintf(" beside MBU %.1f%% computed", 100*ph.MBU)
		}
		parts = append(parts, s)
	}
	if g.SMActivity != nil {
		parts = append(parts, fmt.Sprintf("SM activity %.1f%%", 100**g.SMActivity))
	}
	parts = append(parts, fmt.Sprintf("power p50 %s W, max %s W", num(g.PowerWattsP50, 1), num(g.PowerWattsMax, 1)))
	if g.MemoryUsedBytes > 0 {
		parts = append(parts, fmt.Sprintf("%.2f GiB used", g.MemoryUsedBytes/(1<<30)))
	}
	if g.JoulesPerOutputToken > 0 {
		parts = append(parts, fmt.Sprintf("%.4g J per output token, %.4g tokens per J", g.JoulesPerOutputToken, g.OutputTokensPerJoule))
	}
	if g.EnergyCostPerMillion > 0 {
		s := fmt.Sprintf("energy %.4g per million output tokens at %g/kWh", g.EnergyCostPerMillion, g.EnergyPricePerKWh)
		if c := lv.Cost; c != nil && c.Basis == "gpu-hour" && c.PerMillionOutput > 0 {
			s += fmt.Sprintf(" (GPU-hours %.4g)", c.PerMillionOutput)
		}
		parts = append(parts, s)
	}
	return fmt.Sprintf("%s: GPU (%s, %d GPU(s), %d samples): %s", lv.Load, g.Source, g.GPUs, g.Samples, strings.Join(parts, "; "))
}

// telemetrySource is the GPU counters' source and extent, for the
// physics line: "GPU counters: nvidia-smi, 37 samples during the run's
// 3 levels"; "" without telemetry.
func telemetrySource(levels []metrics.Level) string {
	src, samples, n := "", 0, 0
	for _, lv := range levels {
		if g := lv.GPU; g != nil {
			src, samples, n = g.Source, samples+g.Samples, n+1
		}
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("GPU counters: %s, %d samples taken during %d level(s) of this run", src, samples, n)
}
