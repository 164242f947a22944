package benchmark

import (
	"math"
	"strings"
	"testing"
)

func TestPhysicsFromServerFacts(t *testing.T) {
	in := PhysicsInput{Hardware: "rtx-4090"}
	// Ollama's /api/show: a parameter count and a quantization level.
	ph, _, ok, err := in.FromServer(map[string]string{"model_params": "8030261248", "model_quantization": "Q4_K_M", "model_family": "llama"}, "ollama")
	if err != nil || !ok {
		t.Fatalf("ok %v, err %v", ok, err)
	}
	if ph.Deployment.Weights.Name != "q4_k_m" || !ph.Dense || ph.Deployment.Model.ActiveParams != 8030261248 {
		t.Fatalf("weights %q dense %v params %g", ph.Deployment.Weights.Name, ph.Dense, ph.Deployment.Model.ActiveParams)
	}
	if !strings.Contains(ph.Source, "ollama reports 8.03 B parameters") || !strings.Contains(ph.Source, "q4_k_m weights as it names them") {
		t.Errorf("source %q", ph.Source)
	}
	// llama.cpp's /v1/models meta without a readable file: its size over
	// its parameters is the precision.
	ph, _, ok, err = in.FromServer(map[string]string{"model_params": "1000000000", "model_size_bytes": "1062500000", "model_path": "/nowhere.gguf"}, "llama.cpp")
	if err != nil || !ok {
		t.Fatalf("ok %v, err %v", ok, err)
	}
	if w := ph.Deployment.Weights.BitsPerWeight; math.Abs(w-8.5) > 1e-9 {
		t.Errorf("bits per weight %g, want 8.5 (1.0625 GB over 1 B parameters)", w)
	}
	if _, _, ok, _ := in.FromServer(map[string]string{"model_family": "llama"}, "x"); ok {
		t.Error("a server that gives no size still gave physics")
	}
	// MBU above 100%: a reason where there is one, else impossible.
	if n := ph.mbuNote(1.4); !strings.Contains(n, "MBU 140%") || !strings.Contains(n, "mixture-of-experts") {
		t.Errorf("dense count note %q", n)
	}
	ph.Dense, ph.Speculative = false, true
	if n := ph.mbuNote(2); !strings.Contains(n, "speculatively") || strings.Contains(n, "impossible") {
		t.Errorf("speculative note %q", n)
	}
	ph.Speculative = false
	if n := ph.mbuNote(1.2); !strings.Contains(n, "impossible as given") {
		t.Errorf("note %q", n)
	}
	if ph.mbuNote(0.99) != "" {
		t.Error("an MBU under 100% got a note")
	}
}
