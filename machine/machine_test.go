package machine

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestMeasure(t *testing.T) {
	hog := Load{LoadAvg1: 3.5, OtherCPUCores: 1.25}
	probe := func() func() (Load, bool) { return func() (Load, bool) { return hog, true } }
	m, err := Measure(context.Background(), Options{BufferBytes: 16 << 20, Passes: 2, Trials: 2, Probe: probe})
	if err != nil {
		t.Fatal(err)
	}
	// Any machine reads memory faster than 100 MB/s and slower than 10 TB/s.
	if bw := m.BandwidthBytesPerSec; bw < 1e8 || bw > 1e13 || !strings.Contains(m.Method, "best of 2 trials of 2 passes") {
		t.Fatalf("%g B/s by %q", bw, m.Method)
	}
	if m.Load == nil || *m.Load != hog || time.Since(m.MeasuredAt) > time.Minute {
		t.Fatalf("measurement's load %v at %v, want the probe's %v now", m.Load, m.MeasuredAt, hog)
	}
}

func TestGPUsFromNvidiaSMI(t *testing.T) {
	dir := t.TempDir()
	script := "#!/bin/sh\necho 'NVIDIA H100 80GB HBM3, 81559'\necho 'NVIDIA A100-SXM4-40GB, 40960'\n"
	if err := os.WriteFile(filepath.Join(dir, "nvidia-smi"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	gpus, err := GPUs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(gpus) != 2 {
		t.Fatalf("gpus %+v, want 2", gpus)
	}
	if CatalogName(gpus[0]) != "h100-sxm" || CatalogName(gpus[1]) != "a100-40gb" {
		t.Fatalf("gpus %+v → %q %q", gpus, CatalogName(gpus[0]), CatalogName(gpus[1]))
	}
	t.Setenv("PATH", t.TempDir())
	if _, err := GPUs(context.Background()); err != ErrNoNvidiaSMI {
		t.Fatalf("no nvidia-smi: %v", err)
	}
	for name, want := range map[string]string{"NVIDIA GeForce RTX 4090": "rtx-4090", "NVIDIA L40S": "l40s", "NVIDIA L4": "l4", "Tesla T4": ""} {
		if got := CatalogName(GPU{Name: name}); got != want {
			t.Errorf("%s → %q, want %q", name, got, want)
		}
	}
}
