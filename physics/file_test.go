package physics

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadCatalogYAML(t *testing.T) {
	p := writeFile(t, "cat.yaml", `
hardware:
  - name: My-GPU
    memory_gb: 48
    bandwidth_tbps: 0.96
    bf16_tflops: 181
    mbu: 0.7
    step_overhead_us: 250
models:
  - name: my-13b
    layers: 40
    hidden: 5120
    heads: 40
    kv_heads: 40
    head_dim: 128
    vocab: 32000
    ffn: 13824
precisions:
  - name: q3_k_l
    bits_per_weight: 4.3
`)
	c, err := LoadCatalog(p)
	if err != nil {
		t.Fatal(err)
	}
	h, err := c.LookupHardware("my-gpu")
	if err != nil {
		t.Fatal(err)
	}
	if h.BandwidthBytesPerSec != 0.96e12 || h.MemoryBytes != 48e9 || h.MBU != 0.7 ||
		h.StepOverhead != 250*time.Microsecond || h.MFUPrefill != effDatacenter.MFUPrefill {
		t.Errorf("hardware = %+v", h)
	}
	m, err := c.LookupModel("my-13b")
	if err != nil {
		t.Fatal(err)
	}
	// Llama-2-13B shape: 13.0B derived.
	if !near(m.TotalParams, 13.0e9, 0.01) {
		t.Errorf("derived TotalParams = %g, want ≈ 13.0e9", m.TotalParams)
	}
	if p, err := c.LookupPrecision("q3_k_l"); err != nil || p.BitsPerWeight != 4.3 {
		t.Errorf("precision = %+v, %v", p, err)
	}
	// Built-ins are still there, and the package default is untouched.
	if _, err := c.LookupHardware("h100-sxm"); err != nil {
		t.Error(err)
	}
	if _, err := LookupHardware("my-gpu"); err == nil {
		t.Error("LoadCatalog changed the default catalog")
	}
}

func TestLoadCatalogJSON(t *testing.T) {
	p := writeFile(t, "cat.json", `{"models": [{"name": "dense-30b", "params_b": 30}]}`)
	c, err := LoadCatalog(p)
	if err != nil {
		t.Fatal(err)
	}
	if m, err := c.LookupModel("dense-30b"); err != nil || m.TotalParams != 30e9 || m.ActiveParams != 30e9 {
		t.Errorf("model = %+v, %v", m, err)
	}
}

func TestLoadCatalogErrorsNameFileAndField(t *testing.T) {
	for _, tc := range []struct{ body, want string }{
		{"hardware:\n  - name: x\n    bandwidth_tbps: 1\n    bandwith: 2\n", "bandwith"},
		{"hardware:\n  - name: x\n", "bandwidth_tbps"},
		{"hardware:\n  - name: x\n    bandwidth_tbps: 1\n    mbu: 1.5\n", "mbu"},
		{"hardware:\n  - name: x\n    bandwidth_tbps: 1\n    class: tpu\n", "class"},
		{"models:\n  - name: y\n    layers: 2\n", "params_b"},
		{"precisions:\n  - name: z\n", "bits_per_weight"},
		{"modles: []\n", "modles"},
	} {
		p := writeFile(t, "bad.yaml", tc.body)
		_, err := LoadCatalog(p)
		if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("LoadCatalog(%q) error = %v, want one line naming %s and %q", tc.body, err, p, tc.want)
		}
	}
	if _, err := LoadCatalog(filepath.Join(t.TempDir(), "missing.yaml")); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("missing file error = %v", err)
	}
}
