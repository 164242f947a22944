package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/tokbench/tokbench/calibrate"
)

// CalibrationText writes a calibration's fitted terms and each level's
// measured and simulated figures; out is the file it was written to.
// An empty out says nothing was written.
func CalibrationText(w io.Writer, f *calibrate.File, out string) error {
	c := f.Cost
	var b strings.Builder
	fmt.Fprintf(&b, "calibrated %s from %s\n\n", f.Deployment, f.Run)
	fmt.Fprintf(&b, "  memory efficiency (MBU)   %.1f%% of %.1f GB/s, reading %.1f MB a step and %.0f B per token of context\n",
		100*c.MBU, c.BandwidthBytesPerSec/1e9, c.WeightBytes/1e6, c.KVBytesPerToken)
	fmt.Fprintf(&b, "  prefill (and decode) rate %.0f tokens/s of compute\n", c.PrefillTPS)
	fmt.Fprintf(&b, "  overhead                  %.3f ms a step, %.3f ms a sequence\n", c.StepOverheadMs, c.SeqOverheadMs)
	if len(f.Fit.PromptLengths) > 1 {
		fmt.Fprintf(&b, "  attention                 %.3g ns a (query, key) pair of context\n", c.AttentionNsPerPair)
		fmt.Fprintf(&b, "  front end                 %.3f ms a request before the engine has it\n", f.FrontEnd.RequestMs)
	}
	if f.MaxBatch > 0 {
		fmt.Fprintf(&b, "  engine                    at most %d sequences at once\n", f.MaxBatch)
	}
	fmt.Fprintf(&b, "\n  %-6s %6s %6s  %-30s  %-30s\n", "load", "in", "out", "decode TPS p50 (measured → sim)", "TTFT p50 ms (measured → sim)")
	for _, p := range f.Fit.Levels {
		fmt.Fprintf(&b, "  c=%-4d %6d %6d  %9.2f → %-9.2f (%+5.1f%%)  %9.1f → %-9.1f (%+5.1f%%)\n", p.Concurrency, p.InputTokens, p.OutputTokens,
			p.DecodeTPS.Measured, p.DecodeTPS.Simulated, p.DecodeTPS.ErrorPct, p.TTFTMs.Measured, p.TTFTMs.Simulated, p.TTFTMs.ErrorPct)
	}
	fmt.Fprintf(&b, "\n  rms error %.1f%% (bound %.0f%%); %s\n", 100*f.Fit.RMSError, 100*f.Fit.MaxRMSError, f.Fit.Note)
	if f.Fit.Error != "" {
		fmt.Fprintf(&b, "FIT REFUSED: %s\n", f.Fit.Error)
	}
	if out != "" {
		fmt.Fprintf(&b, "wrote %s (simulate --calibration, serve --calibration)\n", out)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
