package results

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigIntegersExact: a 64-bit seed above 2^53 is written to run.json
// as its digits and read back the same, and the same through a rewrite
// (merge copies a shard's config): a float64 would make
// 15273817378005027001 even.
func TestConfigIntegersExact(t *testing.T) {
	const seed = uint64(15273817378005027001)
	const digits = "15273817378005027001"
	dir := filepath.Join(t.TempDir(), "run")
	w, err := Create(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := ConfigMap(struct {
		Seed  uint64  `json:"prompt_seed"`
		Max   int64   `json:"max"`
		Ratio float64 `json:"ratio"`
	}{seed, -9223372036854775807, 0.1})
	if err := w.WriteRun(Run{Tool: "tokbench", Config: cfg}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, RunFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"prompt_seed": ` + digits, `"max": -9223372036854775807`, `"ratio": 0.1`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("run.json lacks %s:\n%s", want, b)
		}
	}
	r, err := ReadRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	n, ok := r.Config["prompt_seed"].(json.Number)
	if !ok || n.String() != digits {
		t.Fatalf("read back prompt_seed = %#v, want %s", r.Config["prompt_seed"], digits)
	}
	again, err := json.Marshal(r.Config)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(again), `"prompt_seed":`+digits) {
		t.Errorf("rewritten config %s lacks %s", again, digits)
	}
}
