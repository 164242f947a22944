package gguf

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writer builds a GGUF header the way llama.cpp lays it out.
type writer struct{ b bytes.Buffer }

func (w *writer) u32(v uint32) { binary.Write(&w.b, binary.LittleEndian, v) }
func (w *writer) u64(v uint64) { binary.Write(&w.b, binary.LittleEndian, v) }
func (w *writer) str(s string) { w.u64(uint64(len(s))); w.b.WriteString(s) }

type kv struct {
	key string
	typ uint32
	val any
}

func (w *writer) value(typ uint32, v any) {
	switch typ {
	case TypeUint32:
		w.u32(v.(uint32))
	case TypeFloat32:
		w.u32(math.Float32bits(v.(float32)))
	case TypeString:
		w.str(v.(string))
	case TypeBool:
		if v.(bool) {
			w.b.WriteByte(1)
		} else {
			w.b.WriteByte(0)
		}
	case TypeArray:
		ss := v.([]string)
		w.u32(TypeString)
		w.u64(uint64(len(ss)))
		for _, s := range ss {
			w.str(s)
		}
	}
}

func header(kvs []kv, tensors []Tensor) []byte {
	w := &writer{}
	w.b.WriteString(Magic)
	w.u32(3)
	w.u64(uint64(len(tensors)))
	w.u64(uint64(len(kvs)))
	for _, e := range kvs {
		w.str(e.key)
		w.u32(e.typ)
		w.value(e.typ, e.val)
	}
	for _, t := range tensors {
		w.str(t.Name)
		w.u32(uint32(len(t.Dims)))
		for _, d := range t.Dims {
			w.u64(d)
		}
		w.u32(t.Type)
		w.u64(t.Offset)
	}
	return w.b.Bytes()
}

const (
	f32, f16, q8_0, q4_k, q6_k = 0, 1, 8, 12, 14
)

// tinyLlama: 2 layers, hidden 256, 4 heads, 2 KV heads, FFN 512, vocab 1000.
func tinyLlama(tied bool) ([]kv, []Tensor) {
	kvs := []kv{
		{"general.architecture", TypeString, "llama"},
		{"general.name", TypeString, "tiny"},
		{"llama.block_count", TypeUint32, uint32(2)},
		{"llama.embedding_length", TypeUint32, uint32(256)},
		{"llama.feed_forward_length", TypeUint32, uint32(512)},
		{"llama.attention.head_count", TypeUint32, uint32(4)},
		{"llama.attention.head_count_kv", TypeUint32, uint32(2)},
		{"llama.context_length", TypeUint32, uint32(4096)},
		{"llama.rope.freq_base", TypeFloat32, float32(10000)},
		{"tokenizer.ggml.tokens", TypeArray, []string{"<s>", "</s>", "a"}},
		{"general.quantized", TypeBool, true},
	}
	ts := []Tensor{{Name: "token_embd.weight", Dims: []uint64{256, 1000}, Type: q8_0}}
	for i := range 2 {
		p := "blk." + string(rune('0'+i)) + "."
		ts = append(ts,
			Tensor{Name: p + "attn_norm.weight", Dims: []uint64{256}, Type: f32},
			Tensor{Name: p + "attn_q.weight", Dims: []uint64{256, 256}, Type: q4_k},
			Tensor{Name: p + "attn_k.weight", Dims: []uint64{256, 128}, Type: q4_k},
			Tensor{Name: p + "attn_v.weight", Dims: []uint64{256, 128}, Type: q6_k},
			Tensor{Name: p + "attn_output.weight", Dims: []uint64{256, 256}, Type: q4_k},
			Tensor{Name: p + "ffn_norm.weight", Dims: []uint64{256}, Type: f32},
			Tensor{Name: p + "ffn_gate.weight", Dims: []uint64{256, 512}, Type: q4_k},
			Tensor{Name: p + "ffn_up.weight", Dims: []uint64{256, 512}, Type: q4_k},
			Tensor{Name: p + "ffn_down.weight", Dims: []uint64{512, 256}, Type: q6_k},
		)
	}
	ts = append(ts, Tensor{Name: "output_norm.weight", Dims: []uint64{256}, Type: f32})
	if !tied {
		ts = append(ts, Tensor{Name: "output.weight", Dims: []uint64{256, 1000}, Type: q6_k})
	}
	return kvs, ts
}

func TestReadAndBytesPerToken(t *testing.T) {
	// Per layer, by hand: norms 2×256×4 = 2048; Q4_K (144 B per 256):
	// q 256·256/256·144 = 36864, k 18432, o 36864, gate 73728, up 73728;
	// Q6_K (210 B per 256): v 128·210 = 26880, down 512·210 = 107520.
	const layer = 2048 + 36864 + 18432 + 36864 + 73728 + 73728 + 26880 + 107520 // 376064
	const outNorm = 1024
	const embd = 256 * 1000 / 32 * 34 // Q8_0: 272000
	const output = 256 * 1000 / 256 * 210
	cases := []struct {
		tied bool
		want float64
	}{
		{false, 2*layer + outNorm + output}, // the embedding table is not read
		{true, 2*layer + outNorm + embd},    // tied: it is the output head
	}
	for _, c := range cases {
		kvs, ts := tinyLlama(c.tied)
		path := filepath.Join(t.TempDir(), "tiny.gguf")
		if err := os.WriteFile(path, header(kvs, ts), 0o644); err != nil {
			t.Fatal(err)
		}
		g, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		if g.Version != 3 || g.Architecture() != "llama" || g.Arch("block_count") != 2 || g.Arch("attention.head_count_kv") != 2 ||
			g.Arch("embedding_length") != 256 || g.String("general.name") != "tiny" || len(g.Tensors) != len(ts) {
			t.Fatalf("header: version %d arch %q metadata %v, %d tensors", g.Version, g.Architecture(), g.Metadata, len(g.Tensors))
		}
		if v, _ := g.Metadata["llama.rope.freq_base"].(float64); v != 10000 {
			t.Errorf("rope.freq_base = %v", g.Metadata["llama.rope.freq_base"])
		}
		if toks, _ := g.Metadata["tokenizer.ggml.tokens"].([]any); len(toks) != 3 || toks[1] != "</s>" {
			t.Errorf("tokens = %v", g.Metadata["tokenizer.ggml.tokens"])
		}
		w, err := g.Weights()
		if err != nil {
			t.Fatal(err)
		}
		if w.BytesPerToken != c.want || w.Tied != c.tied || w.EmbeddingParams != 256000 {
			t.Errorf("tied=%v: bytes per token %v, want %v (tied %v)", c.tied, w.BytesPerToken, c.want, w.Tied)
		}
		total := 2*layer + outNorm + embd
		if !c.tied {
			total += output
		}
		if w.TotalBytes != uint64(total) || w.Types["Q4_K"] != 10 {
			t.Errorf("total bytes %d, want %d; types %v", w.TotalBytes, total, w.Types)
		}
	}
}

func TestMoEShare(t *testing.T) {
	kvs := []kv{
		{"general.architecture", TypeString, "qwen3moe"},
		{"qwen3moe.expert_count", TypeUint32, uint32(8)},
		{"qwen3moe.expert_used_count", TypeUint32, uint32(2)},
	}
	ts := []Tensor{
		{Name: "blk.0.ffn_up_exps.weight", Dims: []uint64{256, 64, 8}, Type: f16}, // 262144 B
		{Name: "blk.0.attn_q.weight", Dims: []uint64{256, 256}, Type: f16},        // 131072 B
		{Name: "token_embd.weight", Dims: []uint64{256, 100}, Type: f16},          // not read
		{Name: "output.weight", Dims: []uint64{256, 100}, Type: f16},              // 51200 B
	}
	g, err := Read(bytes.NewReader(header(kvs, ts)))
	if err != nil {
		t.Fatal(err)
	}
	w, err := g.Weights()
	if err != nil {
		t.Fatal(err)
	}
	if want := 262144.0/4 + 131072 + 51200; w.BytesPerToken != want {
		t.Errorf("bytes per token %v, want %v", w.BytesPerToken, want)
	}
}

func TestReadErrors(t *testing.T) {
	kvs, ts := tinyLlama(false)
	good := header(kvs, ts)
	cases := map[string][]byte{
		"not a GGUF file": []byte("GGML\x03\x00\x00\x00"),
		"version 1":       append([]byte("GGUF\x01\x00\x00\x00"), make([]byte, 16)...),
		"truncated":       good[:len(good)-5],
	}
	for want, b := range cases {
		if _, err := Read(bytes.NewReader(b)); err == nil || !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(strings.Fields(want)[0])) {
			t.Errorf("%s: err = %v", want, err)
		}
	}
	bad := header(nil, []Tensor{{Name: "x", Dims: []uint64{100}, Type: q4_k}})
	g, err := Read(bytes.NewReader(bad))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Weights(); err == nil || !strings.Contains(err.Error(), "Q4_K blocks") {
		t.Errorf("partial block: err = %v", err)
	}
}

func FuzzRead(f *testing.F) {
	kvs, ts := tinyLlama(true)
	f.Add(header(kvs, ts))
	f.Add([]byte("GGUF"))
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := Read(bytes.NewReader(b))
		if err == nil {
			g.Weights()
		}
	})
}
