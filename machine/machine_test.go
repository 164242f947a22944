package machine

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestMeasure(t *testing.T) {
	bw, method, err := Measure(context.Background(), Options{BufferBytes: 16 << 20, Passes: 2, Trials: 2})
	if err != nil {
		t.Fatal(err)
	}
	// Any machine reads memory faster than 100 MB/s and slower than 10 TB/s.
	if bw < 1e8 || bw > 1e13 || !strings.Contains(method, "best of 2 trials of 2 passes") {
		t.Fatalf("%g B/s by %q", bw, method)
	}
}

func TestLocalCaches(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokbench", "machine.json")
	info := Info{CPU: cpuModel(), Cores: runtime.NumCPU(), MemoryBytes: memTotal(), BandwidthBytesPerSec: 12.5e9, Method: "by hand"}
	b, _ := json.Marshal(info)
	os.MkdirAll(filepath.Dir(path), 0o755)
	os.WriteFile(path, b, 0o644)
	got, cached, err := Local(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	if !cached {
		t.Fatal("a cached figure of this machine was measured again")
	}
	if cached && (got.BandwidthBytesPerSec != 12.5e9 || got.Method != "by hand") {
		t.Fatalf("cached figure %+v", got)
	}
	h := got.Hardware()
	if h.Name != "local" || h.BandwidthBytesPerSec != got.BandwidthBytesPerSec || h.MBU <= 0 || !strings.Contains(h.Source, "measured") {
		t.Fatalf("hardware %+v", h)
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
	if len(gpus) != 2 || CatalogName(gpus[0]) != "h100-sxm" || CatalogName(gpus[1]) != "a100-40gb" {
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
