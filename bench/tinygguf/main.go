// Command tinygguf writes a tiny Llama-architecture GGUF model with random
// weights: two layers of width 64, a SentencePiece vocabulary of the three
// control tokens, the 256 byte tokens and a few hundred words. A real
// inference server (llama.cpp, Ollama) loads and serves it in moments on
// a CPU, so tests can run against one with no model download.
//
//	go run ./bench/tinygguf -out tiny.gguf
package main

import (
	"bufio"
	"encoding/binary"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
)

// GGUF value and tensor types (ggml's gguf.h).
const (
	tUint32  = 4
	tInt32   = 5
	tFloat32 = 6
	tString  = 8
	tArray   = 9
	f32      = 0
	align    = 32
)

// eosToken is the id of "</s>".
const eosToken = 2

const (
	embd   = 64
	layers = 2
	heads  = 4
	ff     = 128
	ctx    = 2048
)

var words = strings.Fields(`the of and to in is that it for on was with as be at by this are from or
have an they which one you were all we can her has there been if more when will would who so no
time water people world house light music year day way man thing woman life child school state family
student group country problem hand part place case week company system program question work government
number night point home room mother area money story fact month lot right study book eye job word business
issue side kind head service friend father power hour game line end member law car city community name
president team minute idea kid body information back parent face others level office door health person
art war history party result change morning reason research girl guy moment air teacher force education
sea sun tree road field heart color land market data model form food table voice paper`)

type kv struct {
	key string
	typ uint32
	val any
}

type tensor struct {
	name string
	dims []uint64
}

func main() {
	out := flag.String("out", "tiny.gguf", "file to write")
	seed := flag.Uint64("seed", 1, "seed of the random weights")
	flag.Parse()
	if err := write(*out, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "tinygguf:", err)
		os.Exit(1)
	}
}

func write(path string, seed uint64) error {
	tokens := []string{"<unk>", "<s>", "</s>"}
	types := []int32{2, 3, 3}
	scores := []float32{0, 0, 0}
	for b := range 256 {
		tokens = append(tokens, fmt.Sprintf("<0x%02X>", b))
		types = append(types, 6)
		scores = append(scores, 0)
	}
	for i, w := range words {
		tokens = append(tokens, "\u2581"+w)
		types = append(types, 1)
		scores = append(scores, -float32(i))
	}
	vocab := uint64(len(tokens))
	kvs := []kv{
		{"general.architecture", tString, "llama"},
		{"general.name", tString, "tiny random llama"},
		{"general.file_type", tUint32, uint32(0)},
		{"llama.context_length", tUint32, uint32(ctx)},
		{"llama.embedding_length", tUint32, uint32(embd)},
		{"llama.block_count", tUint32, uint32(layers)},
		{"llama.feed_forward_length", tUint32, uint32(ff)},
		{"llama.attention.head_count", tUint32, uint32(heads)},
		{"llama.attention.head_count_kv", tUint32, uint32(heads)},
		{"llama.rope.dimension_count", tUint32, uint32(embd / heads)},
		{"llama.attention.layer_norm_rms_epsilon", tFloat32, float32(1e-5)},
		{"llama.vocab_size", tUint32, uint32(vocab)},
		{"tokenizer.ggml.model", tString, "llama"},
		{"tokenizer.ggml.tokens", tArray, tokens},
		{"tokenizer.ggml.scores", tArray, scores},
		{"tokenizer.ggml.token_type", tArray, types},
		{"tokenizer.ggml.bos_token_id", tUint32, uint32(1)},
		{"tokenizer.ggml.eos_token_id", tUint32, uint32(eosToken)},
		{"tokenizer.ggml.unknown_token_id", tUint32, uint32(0)},
		{"general.alignment", tUint32, uint32(align)},
	}
	ts := []tensor{{"token_embd.weight", []uint64{embd, vocab}}}
	for l := range layers {
		p := fmt.Sprintf("blk.%d.", l)
		ts = append(ts,
			tensor{p + "attn_norm.weight", []uint64{embd}},
			tensor{p + "attn_q.weight", []uint64{embd, embd}},
			tensor{p + "attn_k.weight", []uint64{embd, embd}},
			tensor{p + "attn_v.weight", []uint64{embd, embd}},
			tensor{p + "attn_output.weight", []uint64{embd, embd}},
			tensor{p + "ffn_norm.weight", []uint64{embd}},
			tensor{p + "ffn_gate.weight", []uint64{embd, ff}},
			tensor{p + "ffn_up.weight", []uint64{embd, ff}},
			tensor{p + "ffn_down.weight", []uint64{ff, embd}},
		)
	}
	ts = append(ts, tensor{"output_norm.weight", []uint64{embd}}, tensor{"output.weight", []uint64{embd, vocab}})

	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := &enc{w: bufio.NewWriter(f)}
	w.raw([]byte("GGUF"))
	w.u32(3)
	w.u64(uint64(len(ts)))
	w.u64(uint64(len(kvs)))
	for _, e := range kvs {
		w.str(e.key)
		w.u32(e.typ)
		w.value(e.typ, e.val)
	}
	off := uint64(0)
	for _, t := range ts {
		w.str(t.name)
		w.u32(uint32(len(t.dims)))
		for _, d := range t.dims {
			w.u64(d)
		}
		w.u32(f32)
		w.u64(off)
		off += pad(elems(t) * 4)
	}
	w.pad()
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	for _, t := range ts {
		n := elems(t)
		norm := strings.HasSuffix(t.name, "norm.weight")
		// The end-of-sequence token's output row is zero, so its logit is
		// 0 where about half the others' lie above: outside the 40 a
		// server's default top-k keeps, never sampled, every answer runs
		// to its max_tokens (num_predict).
		out := t.name == "output.weight"
		for i := range n {
			v := float32(1)
			switch {
			case out && i/embd == eosToken:
				v = 0
			case !norm:
				v = float32(rng.NormFloat64() * 0.05)
			}
			w.u32(math.Float32bits(v))
		}
		for range pad(n*4) - n*4 {
			w.raw([]byte{0})
		}
	}
	if w.err == nil {
		w.err = w.w.Flush()
	}
	if err := f.Close(); w.err == nil {
		w.err = err
	}
	return w.err
}

func elems(t tensor) uint64 {
	n := uint64(1)
	for _, d := range t.dims {
		n *= d
	}
	return n
}

func pad(n uint64) uint64 { return (n + align - 1) / align * align }

type enc struct {
	w   *bufio.Writer
	n   uint64
	err error
}

func (e *enc) raw(b []byte) {
	if e.err == nil {
		_, e.err = e.w.Write(b)
		e.n += uint64(len(b))
	}
}
func (e *enc) u32(v uint32) { e.raw(binary.LittleEndian.AppendUint32(nil, v)) }
func (e *enc) u64(v uint64) { e.raw(binary.LittleEndian.AppendUint64(nil, v)) }
func (e *enc) str(s string) { e.u64(uint64(len(s))); e.raw([]byte(s)) }
func (e *enc) pad() {
	for e.n%align != 0 {
		e.raw([]byte{0})
	}
}

func (e *enc) value(typ uint32, v any) {
	switch typ {
	case tUint32:
		e.u32(v.(uint32))
	case tFloat32:
		e.u32(math.Float32bits(v.(float32)))
	case tString:
		e.str(v.(string))
	case tArray:
		switch a := v.(type) {
		case []string:
			e.u32(tString)
			e.u64(uint64(len(a)))
			for _, s := range a {
				e.str(s)
			}
		case []float32:
			e.u32(tFloat32)
			e.u64(uint64(len(a)))
			for _, x := range a {
				e.u32(math.Float32bits(x))
			}
		case []int32:
			e.u32(tInt32)
			e.u64(uint64(len(a)))
			for _, x := range a {
				e.u32(uint32(x))
			}
		}
	}
}
