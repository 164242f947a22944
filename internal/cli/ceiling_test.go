package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runCeilingArgs(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Run(context.Background(), append([]string{"ceiling"}, args...), Env{Stdout: &out, Stderr: &errb})
	return code, out.String(), errb.String()
}

func ceilingJSONOf(t *testing.T, args ...string) map[string]any {
	t.Helper()
	code, out, errOut := runCeilingArgs(t, append(args, "--format", "json")...)
	if code != 0 {
		t.Fatalf("ceiling %v: exit %d, stderr %q", args, code, errOut)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("ceiling %v: output is not JSON: %v\n%s", args, err, out)
	}
	return m
}

func num(t *testing.T, m map[string]any, key string) float64 {
	t.Helper()
	v, ok := m[key].(float64)
	if !ok {
		t.Fatalf("JSON field %q = %v (%T), want a number", key, m[key], m[key])
	}
	return v
}

func checkNum(t *testing.T, m map[string]any, key string, want, relTol float64) {
	t.Helper()
	if got := num(t, m, key); math.Abs(got-want) > relTol*math.Abs(want) {
		t.Errorf("%s = %.6g, want %.6g", key, got, want)
	}
}

// The seeds' example: 70 GB of 8-bit weights on an H100 SXM (3.35 TB/s)
// caps one stream near 48 tokens per second.
func TestCeilingSeedExample(t *testing.T) {
	m := ceilingJSONOf(t, "--params", "70", "--quant", "int8", "--hardware", "h100-sxm")
	checkNum(t, m, "bytes_per_token", 70e9, 1e-12)
	checkNum(t, m, "weight_bytes", 70e9, 1e-12)
	checkNum(t, m, "decode_tps_ceiling", 3.35e12/70e9, 1e-9)
	if got := num(t, m, "decode_tps_ceiling"); math.Round(got) != 48 {
		t.Errorf("decode_tps_ceiling = %.2f, want ≈ 48", got)
	}
	// Compute (2·70e9·B / 989.4e12) overtakes memory (70e9 / 3.35e12) at
	// B ≥ 989.4 / (2·3.35) = 147.7.
	checkNum(t, m, "compute_bound_batch", 148, 0)
	// Prefill of 1024 tokens: 2·70e9·1024 FLOPs at 989.4 TFLOPS = 144.9 ms.
	checkNum(t, m, "prefill_floor_ms", 2*70e9*1024/989.4e12*1000, 1e-6)

	code, out, _ := runCeilingArgs(t, "--params", "70", "--quant", "int8", "--hardware", "h100-sxm")
	if code != 0 || !strings.Contains(out, "ceiling 47.9 tok/s") {
		t.Errorf("table (exit %d) lacks the 47.9 tok/s ceiling:\n%s", code, out)
	}
}

func TestCeilingLlama8BJSON(t *testing.T) {
	m := ceilingJSONOf(t, "--model", "llama-3.1-8b", "--quant", "bf16", "--hardware", "h100-sxm",
		"--context", "1024", "--batch", "64", "--prompt-tokens", "1024")
	const (
		params   = 8.03e9
		embed    = 128256 * 4096 // input embedding, not read per token
		kvTok    = 2 * 32 * 8 * 128 * 2
		bw       = 3.35e12
		flops    = 989.4e12
		weightRd = (params - embed) * 2
	)
	checkNum(t, m, "kv_bytes_per_token", kvTok, 0)
	checkNum(t, m, "weight_bytes", params*2, 1e-12)
	checkNum(t, m, "bytes_per_token", weightRd+1024*kvTok, 1e-12)
	checkNum(t, m, "decode_tps_ceiling", bw/(weightRd+1024*kvTok), 1e-9)
	checkNum(t, m, "kv_capacity_tokens", math.Floor((80e9*0.9-params*2)/kvTok), 0)
	checkNum(t, m, "max_batch_at_context", math.Floor(math.Floor((80e9*0.9-params*2)/kvTok)/1024), 0)
	checkNum(t, m, "kv_cache_bytes", 64*1024*kvTok, 0)
	// Batch 64 is memory-bound: weights once + 64 KV caches.
	checkNum(t, m, "aggregate_tps_ceiling", 64/((weightRd+64*1024*kvTok)/bw), 1e-6)
	if m["batch_compute_bound"] != false {
		t.Errorf("batch_compute_bound = %v, want false", m["batch_compute_bound"])
	}
	// Prefill: 2 FLOPs per non-embedding parameter per token, plus attention
	// 4·layers·(heads·head dim)·(1024·1024/2 pairs).
	prefill := 2*(params-embed)*1024 + 4*32*4096*(1024*512)
	checkNum(t, m, "prefill_floor_ms", prefill/flops*1000, 1e-6)
	// The calibrated single stream is below the ceiling, the measured
	// 154 tok/s of vLLM on H100 within 5%.
	checkNum(t, m, "decode_tps_expected", 154, 0.05)
	if _, ok := m["verdict"]; ok {
		t.Error("verdict present without --claim")
	}
}

func TestCeilingClaimVerdicts(t *testing.T) {
	args := []string{"--params", "70", "--quant", "int8", "--hardware", "h100-sxm"}
	m := ceilingJSONOf(t, append(args, "--claim", "40")...)
	v := m["verdict"].(map[string]any)
	if v["within_single_stream_ceiling"] != true {
		t.Errorf("claim 40: verdict %v, want within the ceiling", v)
	}
	checkNum(t, v, "required_mbu", 40/(3.35e12/70e9), 1e-9)

	m = ceilingJSONOf(t, append(args, "--claim", "120")...)
	v = m["verdict"].(map[string]any)
	if v["within_single_stream_ceiling"] != false {
		t.Fatalf("claim 120: verdict %v, want beyond the ceiling", v)
	}
	paths := map[string]map[string]any{}
	for _, p := range v["paths"].([]any) {
		pm := p.(map[string]any)
		paths[pm["how"].(string)] = pm
	}
	// 2 streams give 95.7 tok/s, 3 give 143.6: batching needs 3.
	if b := paths["batching"]; b["possible"] != true || !strings.Contains(b["detail"].(string), "≥ 3 concurrent streams") {
		t.Errorf("batching path = %v, want possible with ≥ 3 streams", b)
	}
	// 120 / 47.86 = 2.51 tokens per step: within the 3.36 of a = 0.8, k = 4.
	if s := paths["speculative-decoding"]; s["possible"] != true || !strings.Contains(s["detail"].(string), "2.51 tokens") {
		t.Errorf("speculative path = %v", s)
	}
	// Bytes allowed per token: 3.35e12 / 120 = 27.9 GB → 27.9B params at int8, 3.19 bits for 70B.
	if s := paths["smaller-model-or-precision"]; s["possible"] != true || !strings.Contains(s["detail"].(string), "27.9 B") ||
		!strings.Contains(s["detail"].(string), "3.19 bits") {
		t.Errorf("smaller path = %v", s)
	}
	if s := paths["moe"]; s["possible"] != true {
		t.Errorf("moe path = %v, want possible for a dense model", s)
	}

	// 2000 tok/s from one 70B stream: 41.8× the ceiling, beyond any speculative speedup.
	m = ceilingJSONOf(t, append(args, "--claim", "2000")...)
	for _, p := range m["verdict"].(map[string]any)["paths"].([]any) {
		pm := p.(map[string]any)
		if pm["how"] == "speculative-decoding" && pm["possible"] != false {
			t.Errorf("claim 2000: speculative path %v, want impossible", pm)
		}
	}
}

func TestCeilingUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"--model", "llama-3.1-8b", "--hardware", "h100-sxn"}, "--hardware"},
		{[]string{"--model", "llama-9"}, "--model"},
		{[]string{"--model", "llama-3.1-8b", "--quant", "int3"}, "--quant"},
		{[]string{"--hardware", "h100-sxm"}, "--model"},
		{[]string{"--model", "llama-3.1-8b", "--gpus", "0"}, "--gpus"},
		{[]string{"--model", "llama-3.1-8b", "--batch", "0"}, "--batch"},
		{[]string{"--model", "llama-3.1-8b", "--claim", "-5"}, "--claim"},
		{[]string{"--model", "llama-3.1-8b", "--format", "xml"}, "--format"},
		{[]string{"--model", "llama-3.1-8b", "--params", "8"}, "--params"},
		{[]string{"--model", "llama-3.1-8b", "--catalog", "/nonexistent/cat.yaml"}, "--catalog"},
	} {
		code, out, errOut := runCeilingArgs(t, tc.args...)
		if code != ExitUsage || out != "" || !strings.Contains(errOut, tc.flag) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("ceiling %v: exit %d, stderr %q, stdout %q; want exit 2 and one line naming %s", tc.args, code, errOut, out, tc.flag)
		}
	}
	_, _, errOut := runCeilingArgs(t, "--model", "llama-3.1-8b", "--hardware", "h100-sxn")
	if !strings.Contains(errOut, `"h100-sxn"`) || !strings.Contains(errOut, "h100-sxm") {
		t.Errorf("unknown hardware error %q should name the value and list known ones", errOut)
	}
}

func TestCeilingUserCatalog(t *testing.T) {
	p := filepath.Join(t.TempDir(), "cat.yaml")
	body := "hardware:\n  - name: half-h100\n    memory_gb: 80\n    bandwidth_tbps: 1.675\n    bf16_tflops: 494.7\n"
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	m := ceilingJSONOf(t, "--params", "70", "--quant", "int8", "--hardware", "half-h100", "--catalog", p)
	checkNum(t, m, "decode_tps_ceiling", 1.675e12/70e9, 1e-9)

	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("hardware:\n  - name: x\n    bandwidth_tbps: 1\n    bandwith_tbps: 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := runCeilingArgs(t, "--params", "70", "--catalog", bad)
	if code != ExitUsage || !strings.Contains(errOut, bad) || !strings.Contains(errOut, "bandwith_tbps") {
		t.Errorf("bad catalog: exit %d, stderr %q; want exit 2 naming the file and field", code, errOut)
	}
}

// MoE: Mixtral at batch 1 reads 2 of 8 experts per layer, so its ceiling is
// set by 12.9B parameters' worth of bytes, not 46.7B.
func TestCeilingMoE(t *testing.T) {
	m := ceilingJSONOf(t, "--model", "mixtral-8x7b", "--quant", "fp8", "--hardware", "h100-sxm", "--claim", "300")
	expert := 3.0 * 4096 * 14336
	common := 46.7e9 - 32000*4096 - 32*8*expert
	checkNum(t, m, "bytes_per_token", common+32*2*expert, 1e-12)
	for _, p := range m["verdict"].(map[string]any)["paths"].([]any) {
		pm := p.(map[string]any)
		if pm["how"] == "moe" && pm["possible"] != false {
			t.Errorf("MoE model: moe path %v, want not applicable", pm)
		}
	}
}
