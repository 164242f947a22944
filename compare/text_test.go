package compare

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestWriteTextGolden: the text compare prints for a base and two runs
// (one slower to decode, better in TTFT at c=4 and on other hardware; one
// that differs by noise only) under a gate, byte for byte. The runs are
// generated from fixed seeds and the bootstrap's seed is fixed, so every
// figure is known; go test -update rewrites testdata/compare.txt after a
// change that is meant.
func TestWriteTextGolden(t *testing.T) {
	a := load(t, writeRun(t, meta, level{conc: 1, n: 40, ttft: 50, gap: 10, tokens: 32, seed: 1}, level{conc: 4, n: 40, ttft: 80, gap: 12, tokens: 32, seed: 2}))
	fp8 := map[string]string{"hardware": "h100-sxm", "quant": "fp8", "input_tokens": "64", "output_tokens": "32"}
	slower := load(t, writeRun(t, fp8, level{conc: 1, n: 40, ttft: 50, gap: 12, tokens: 32, seed: 3}, level{conc: 4, n: 40, ttft: 56, gap: 14, tokens: 32, seed: 4, failures: 2}))
	noise := load(t, writeRun(t, meta, level{conc: 1, n: 40, ttft: 50, gap: 10, tokens: 32, seed: 5}, level{conc: 4, n: 40, ttft: 80, gap: 12, tokens: 32, seed: 6}))
	a.Dir, slower.Dir, noise.Dir = "base", "slower", "noise" // not the temporary directories' names
	const failIf = "decode_tps_p50<-5%,ttft_p95>+10%,error_rate>+0.01"
	conds, err := ParseConditions(failIf)
	if err != nil {
		t.Fatal(err)
	}
	outs, _, nothing := All(a, []*Run{slower, noise}, Options{}, conds, failIf)
	if len(nothing) != 0 {
		t.Fatalf("levels in common with none: %v", nothing)
	}
	var b bytes.Buffer
	failed, err := WriteText(&b, outs, failIf)
	if err != nil {
		t.Fatal(err)
	}
	// The gate fails on "slower" only: its decode rate at both levels and
	// its errors at c=4.
	if len(failed) != 3 {
		t.Errorf("gate failures %q, want 3 (slower's decode TPS at c=1 and c=4, its error rate at c=4)", failed)
	}
	golden := filepath.Join("testdata", "compare.txt")
	if *update {
		if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
	}
	if !bytes.Equal(b.Bytes(), want) {
		t.Errorf("WriteText differs from %s:\n--- got\n%s\n--- want\n%s", golden, b.Bytes(), want)
	}
}
