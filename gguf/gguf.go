// Package gguf reads the header of a GGUF model file (llama.cpp, Ollama):
// its metadata key/values and tensor infos (name, shape, ggml type), and
// computes from them exactly how many bytes of weights a decoded token
// reads. Only the header is read, never the tensor data.
package gguf

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
)

// Magic is the first four bytes of a GGUF file.
const Magic = "GGUF"

// Metadata value types.
const (
	TypeUint8 uint32 = iota
	TypeInt8
	TypeUint16
	TypeInt16
	TypeUint32
	TypeInt32
	TypeFloat32
	TypeBool
	TypeString
	TypeArray
	TypeUint64
	TypeInt64
	TypeFloat64
)

// Tensor is one tensor info: its name, dimensions (innermost first, as
// ggml stores them) and ggml type.
type Tensor struct {
	Name   string
	Dims   []uint64
	Type   uint32
	Offset uint64
}

// Elements is the product of the dimensions.
func (t Tensor) Elements() uint64 {
	n := uint64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// Bytes is the tensor's size in its ggml type, or an error for a type this
// package does not know.
func (t Tensor) Bytes() (uint64, error) {
	bt, ok := blockTypes[t.Type]
	if !ok {
		return 0, fmt.Errorf("tensor %s: unknown ggml type %d", t.Name, t.Type)
	}
	n := t.Elements()
	if n%bt.elems != 0 {
		return 0, fmt.Errorf("tensor %s: %d elements is not a whole number of %s blocks of %d", t.Name, n, bt.name, bt.elems)
	}
	return n / bt.elems * bt.bytes, nil
}

// TypeName is the ggml type's name ("Q4_K"), or "type N".
func TypeName(typ uint32) string {
	if bt, ok := blockTypes[typ]; ok {
		return bt.name
	}
	return fmt.Sprintf("type %d", typ)
}

type blockType struct {
	name         string
	elems, bytes uint64
}

// blockTypes: elements per block and bytes per block of each ggml type
// (ggml.h's enum ggml_type; sizes of the block structs in ggml-common.h).
var blockTypes = map[uint32]blockType{
	0: {"F32", 1, 4}, 1: {"F16", 1, 2}, 2: {"Q4_0", 32, 18}, 3: {"Q4_1", 32, 20},
	6: {"Q5_0", 32, 22}, 7: {"Q5_1", 32, 24}, 8: {"Q8_0", 32, 34}, 9: {"Q8_1", 32, 36},
	10: {"Q2_K", 256, 84}, 11: {"Q3_K", 256, 110}, 12: {"Q4_K", 256, 144}, 13: {"Q5_K", 256, 176},
	14: {"Q6_K", 256, 210}, 15: {"Q8_K", 256, 292}, 16: {"IQ2_XXS", 256, 66}, 17: {"IQ2_XS", 256, 74},
	18: {"IQ3_XXS", 256, 98}, 19: {"IQ1_S", 256, 50}, 20: {"IQ4_NL", 32, 18}, 21: {"IQ3_S", 256, 110},
	22: {"IQ2_S", 256, 82}, 23: {"IQ4_XS", 256, 136}, 24: {"I8", 1, 1}, 25: {"I16", 1, 2},
	26: {"I32", 1, 4}, 27: {"I64", 1, 8}, 28: {"F64", 1, 8}, 29: {"IQ1_M", 256, 56},
	30: {"BF16", 1, 2}, 34: {"TQ1_0", 256, 54}, 35: {"TQ2_0", 256, 66}, 39: {"MXFP4", 32, 17},
}

// File is a GGUF header.
type File struct {
	Version uint32
	// Metadata values are uint64, int64, float64, bool, string or []any.
	Metadata map[string]any
	Tensors  []Tensor
}

// Limits against a corrupt header exhausting memory.
const (
	maxString = 1 << 24
	maxCount  = 1 << 28
)

// Open reads the header of the GGUF file at path.
func Open(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	g, err := Read(bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return g, nil
}

// Read reads a GGUF header (versions 2 and 3, little-endian) from r.
func Read(r io.Reader) (*File, error) {
	d := &decoder{r: r}
	var magic [4]byte
	if _, err := io.ReadFull(r, magic[:]); err != nil {
		return nil, fmt.Errorf("read magic: %w", err)
	}
	if string(magic[:]) != Magic {
		return nil, fmt.Errorf("not a GGUF file (magic %q)", magic[:])
	}
	g := &File{Version: d.u32(), Metadata: map[string]any{}}
	if d.err == nil && (g.Version < 2 || g.Version > 3) {
		return nil, fmt.Errorf("GGUF version %d not supported (2 or 3)", g.Version)
	}
	nTensors, nKV := d.u64(), d.u64()
	if d.err == nil && (nTensors > maxCount || nKV > maxCount) {
		return nil, fmt.Errorf("implausible header: %d tensors, %d metadata keys", nTensors, nKV)
	}
	for i := uint64(0); i < nKV && d.err == nil; i++ {
		key := d.str()
		g.Metadata[key] = d.value(d.u32(), 0)
	}
	for i := uint64(0); i < nTensors && d.err == nil; i++ {
		t := Tensor{Name: d.str()}
		n := d.u32()
		if n > 8 {
			d.fail("tensor %s: %d dimensions", t.Name, n)
			break
		}
		for j := uint32(0); j < n; j++ {
			t.Dims = append(t.Dims, d.u64())
		}
		t.Type = d.u32()
		t.Offset = d.u64()
		g.Tensors = append(g.Tensors, t)
	}
	if d.err != nil {
		return nil, d.err
	}
	return g, nil
}

type decoder struct {
	r   io.Reader
	buf [8]byte
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf(format, args...)
	}
}

func (d *decoder) read(n int) []byte {
	if d.err != nil {
		return d.buf[:n]
	}
	if _, err := io.ReadFull(d.r, d.buf[:n]); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		d.err = fmt.Errorf("truncated header: %w", err)
	}
	return d.buf[:n]
}

func (d *decoder) u32() uint32 { return binary.LittleEndian.Uint32(d.read(4)) }
func (d *decoder) u64() uint64 { return binary.LittleEndian.Uint64(d.read(8)) }

func (d *decoder) str() string {
	n := d.u64()
	if d.err != nil {
		return ""
	}
	if n > maxString {
		d.fail("string of %d bytes", n)
		return ""
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(d.r, b); err != nil {
		d.fail("truncated header: %v", err)
	}
	return string(b)
}

func (d *decoder) value(typ uint32, depth int) any {
	switch typ {
	case TypeUint8:
		return uint64(d.read(1)[0])
	case TypeInt8:
		return int64(int8(d.read(1)[0]))
	case TypeUint16:
		return uint64(binary.LittleEndian.Uint16(d.read(2)))
	case TypeInt16:
		return int64(int16(binary.LittleEndian.Uint16(d.read(2))))
	case TypeUint32:
		return uint64(d.u32())
	case TypeInt32:
		return int64(int32(d.u32()))
	case TypeFloat32:
		return float64(math.Float32frombits(d.u32()))
	case TypeBool:
		return d.read(1)[0] != 0
	case TypeString:
		return d.str()
	case TypeUint64:
		return d.u64()
	case TypeInt64:
		return int64(d.u64())
	case TypeFloat64:
		return math.Float64frombits(d.u64())
	case TypeArray:
		et, n := d.u32(), d.u64()
		if d.err != nil {
			return nil
		}
		if n > maxCount || depth > 2 {
			d.fail("array of %d elements", n)
			return nil
		}
		out := make([]any, 0, min(n, 1<<16))
		for i := uint64(0); i < n && d.err == nil; i++ {
			out = append(out, d.value(et, depth+1))
		}
		return out
	}
	d.fail("unknown metadata value type %d", typ)
	return nil
}

// String returns a string metadata value ("" when absent).
func (g *File) String(key string) string {
	s, _ := g.Metadata[key].(string)
	return s
}

// Int returns an integer metadata value (0 when absent or not a number).
func (g *File) Int(key string) int {
	switch v := g.Metadata[key].(type) {
	case uint64:
		return int(v)
	case int64:
		return int(v)
	case float64:
		return int(v)
	}
	return 0
}

// Architecture is general.architecture, e.g. "llama".
func (g *File) Architecture() string { return g.String("general.architecture") }

// Arch returns the architecture-scoped integer key, e.g. Arch("block_count")
// reads "llama.block_count".
func (g *File) Arch(key string) int { return g.Int(g.Architecture() + "." + key) }

// Weights summarizes what a decoded token reads.
type Weights struct {
	// TotalBytes and TotalParams cover every tensor in the file.
	TotalBytes, TotalParams uint64
	// BytesPerToken is what one decoded token reads, single stream: every
	// tensor except the token embedding table (one row of it is looked up)
	// unless the output head is tied to it (no output.weight), and of
	// mixture-of-experts tensors (names with "_exps") only the share of the
	// experts a token uses (expert_used_count / expert_count).
	BytesPerToken float64
	// ParamsPerToken counts the parameters those bytes hold.
	ParamsPerToken float64
	// EmbeddingParams is the token embedding table; Tied says the output
	// head reuses it.
	EmbeddingParams uint64
	Tied            bool
	// Types counts tensors per ggml type name.
	Types map[string]int
}

// Weights computes the bytes per token from the tensor types and shapes.
func (g *File) Weights() (Weights, error) {
	w := Weights{Types: map[string]int{}, Tied: true}
	for _, t := range g.Tensors {
		if t.Name == "output.weight" {
			w.Tied = false
		}
	}
	share := 1.0
	if n, k := g.Arch("expert_count"), g.Arch("expert_used_count"); n > 0 && k > 0 {
		share = float64(k) / float64(n)
	}
	for _, t := range g.Tensors {
		b, err := t.Bytes()
		if err != nil {
			return Weights{}, err
		}
		n := t.Elements()
		w.TotalBytes += b
		w.TotalParams += n
		w.Types[TypeName(t.Type)]++
		f := 1.0
		switch {
		case t.Name == "token_embd.weight":
			w.EmbeddingParams = n
			if !w.Tied {
				f = 0
			}
		case strings.Contains(t.Name, "_exps"):
			f = share
		}
		w.BytesPerToken += f * float64(b)
		w.ParamsPerToken += f * float64(n)
	}
	return w, nil
}
