package physics

import (
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/tokbench/tokbench/gguf"
)

// FromGGUF reads a GGUF file's header into a model and a precision whose
// bytes per weight make the bytes read per token exactly what the tensor
// types and shapes say (the ceiling reads ReadParams × bytes per weight),
// and a note saying what it found.
func FromGGUF(path string) (Model, Precision, string, error) {
	g, err := gguf.Open(path)
	if err != nil {
		return Model{}, Precision{}, "", err
	}
	w, err := g.Weights()
	if err != nil {
		return Model{}, Precision{}, "", err
	}
	arch := g.Architecture()
	m := Model{
		Name:       strings.TrimSuffix(filepath.Base(path), ".gguf"),
		Layers:     g.Arch("block_count"),
		Hidden:     g.Arch("embedding_length"),
		Heads:      g.Arch("attention.head_count"),
		KVHeads:    g.Arch("attention.head_count_kv"),
		HeadDim:    g.Arch("attention.key_length"),
		MaxContext: g.Arch("context_length"),
		FFN:        g.Arch("feed_forward_length"),
		Source:     fmt.Sprintf("GGUF v%d header of %s (%s)", g.Version, filepath.Base(path), arch),
	}
	if m.Layers == 0 || m.Hidden == 0 || w.ParamsPerToken == 0 {
		return Model{}, Precision{}, "", fmt.Errorf("%s: no %s.block_count/embedding_length or no weights", path, arch)
	}
	if m.KVHeads == 0 {
		m.KVHeads = m.Heads
	}
	m.TiedEmbeddings = w.Tied
	m.Vocab = int(w.EmbeddingParams) / m.Hidden
	m.ActiveParams = w.ParamsPerToken
	m.TotalParams = w.ParamsPerToken
	if !w.Tied {
		m.TotalParams += m.EmbeddingParams()
	}
	var types []string
	for t, n := range w.Types {
		types = append(types, fmt.Sprintf("%s×%d", t, n))
	}
	sort.Strings(types)
	p := Precision{
		Name:          "gguf",
		BitsPerWeight: 8 * w.BytesPerToken / w.ParamsPerToken,
		Source:        "GGUF tensor types: " + strings.Join(types, " "),
	}
	note := fmt.Sprintf("--gguf: %s, %d layers; %.4g GB in the file; a token reads %s bytes of weights (%.3g bits per weight over %.4g B parameters, token embedding %s)",
		arch, m.Layers, float64(w.TotalBytes)/1e9, GroupDigits(w.BytesPerToken), p.BitsPerWeight, w.ParamsPerToken/1e9, map[bool]string{true: "tied to the output head, read", false: "table not read"}[w.Tied])
	return m, p, note, nil
}

// GroupDigits writes v rounded to a whole number with commas between
// thousands: 149,868,544.
func GroupDigits(v float64) string {
	s := strconv.FormatFloat(math.Round(v), 'f', 0, 64)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
