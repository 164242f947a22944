package cli

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeGGUF writes a GGUF v3 header: uint32 metadata and tensor infos.
func writeGGUF(t *testing.T, meta map[string]uint32, arch string, tensors map[string][]uint64, typ uint32) string {
	t.Helper()
	var b bytes.Buffer
	le := func(v any) { binary.Write(&b, binary.LittleEndian, v) }
	str := func(s string) { le(uint64(len(s))); b.WriteString(s) }
	b.WriteString("GGUF")
	le(uint32(3))
	le(uint64(len(tensors)))
	le(uint64(len(meta) + 1))
	str("general.architecture")
	le(uint32(8))
	str(arch)
	for k, v := range meta {
		str(k)
		le(uint32(4))
		le(v)
	}
	for name, dims := range tensors {
		str(name)
		le(uint32(len(dims)))
		for _, d := range dims {
			le(d)
		}
		le(typ)
		le(uint64(0))
	}
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCeilingGGUF: one layer of F16 weights, hidden 512, 8 heads, 2 KV heads.
func TestCeilingGGUF(t *testing.T) {
	path := writeGGUF(t, map[string]uint32{
		"llama.block_count": 1, "llama.embedding_length": 512, "llama.attention.head_count": 8,
		"llama.attention.head_count_kv": 2, "llama.feed_forward_length": 1024, "llama.context_length": 8192,
	}, "llama", map[string][]uint64{
		"token_embd.weight":        {512, 1000},
		"blk.0.attn_q.weight":      {512, 512},
		"blk.0.attn_k.weight":      {512, 128},
		"blk.0.attn_v.weight":      {512, 128},
		"blk.0.attn_output.weight": {512, 512},
		"blk.0.ffn_gate.weight":    {512, 1024},
		"blk.0.ffn_up.weight":      {512, 1024},
		"blk.0.ffn_down.weight":    {1024, 512},
		"output.weight":            {512, 1000},
	}, 1)
	code, stdout, stderr := runCLI(context.Background(), nil, "ceiling", "--gguf", path, "--hardware", "h100-sxm", "--format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var out struct {
		BytesPerToken    float64 `json:"bytes_per_token"`
		KVBytesPerToken  float64 `json:"kv_bytes_per_token"`
		DecodeTPSCeiling float64 `json:"decode_tps_ceiling"`
		Quant            string  `json:"quant"`
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	// All but the embedding table, 2 bytes each:
	// (512·512·2 + 512·128·2 + 512·1024·3 + 512·1000) · 2.
	want := float64(512*512*2+512*128*2+512*1024*3+512*1000) * 2
	if math.Abs(out.BytesPerToken-want) > 1e-6*want || out.Quant != "gguf" {
		t.Errorf("bytes_per_token %v, want %v (quant %q)", out.BytesPerToken, want, out.Quant)
	}
	// KV: 2 · 1 layer · 2 KV heads · 64 head dim · 2 bytes (bf16 KV).
	if out.KVBytesPerToken != 512 {
		t.Errorf("kv_bytes_per_token %v, want 512", out.KVBytesPerToken)
	}
	if math.Abs(out.DecodeTPSCeiling*out.BytesPerToken-3.35e12) > 1e9 {
		t.Errorf("decode ceiling %v × %v is not the H100's bandwidth", out.DecodeTPSCeiling, out.BytesPerToken)
	}

	// The note gives whole bytes, and names set beside the file are refused.
	_, text, _ := runCLI(context.Background(), nil, "ceiling", "--gguf", path, "--hardware", "h100-sxm")
	if !strings.Contains(text, "a token reads 5,480,448 bytes of weights") {
		t.Errorf("note without whole bytes:\n%s", text)
	}
	for _, flag := range []string{"--quant=int4", "--model=llama-3.1-8b", "--params=8"} {
		code, _, stderr := runCLI(context.Background(), nil, "ceiling", "--gguf", path, flag)
		if name := strings.SplitN(flag, "=", 2)[0]; code != ExitUsage || !strings.HasPrefix(stderr, "tokbench: "+name+": --gguf gives") {
			t.Errorf("%s with --gguf: exit %d, %s", flag, code, stderr)
		}
	}

	bad := filepath.Join(t.TempDir(), "x.gguf")
	os.WriteFile(bad, []byte("not gguf"), 0o644)
	if code, _, stderr := runCLI(context.Background(), nil, "ceiling", "--gguf", bad); code != ExitUsage || !bytes.Contains([]byte(stderr), []byte("--gguf")) {
		t.Errorf("bad file: exit %d, %s", code, stderr)
	}
}
