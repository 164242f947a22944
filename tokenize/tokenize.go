// Package tokenize counts tokens exactly, offline. The tiktoken encodings
// cl100k_base and o200k_base are compiled into the binary; Hugging Face
// tokenizer.json files with a BPE model load from disk (LoadFile); nothing
// is fetched at run time. Server counts with an engine's own /tokenize
// endpoint when the model's tokenizer is not at hand.
//
// A Tokenizer is safe for concurrent use.
package tokenize

import (
	"fmt"
	"strings"
	"sync"

	"github.com/tiktoken-go/tokenizer"
)

// Tokenizer counts and encodes text.
type Tokenizer interface {
	Name() string
	// Count returns the number of tokens in s.
	Count(s string) int
	// Encode returns the token ids of s.
	Encode(s string) []uint
	// Decode returns the text of ids.
	Decode(ids []uint) string
}

// Names lists the built-in encodings.
var Names = []string{"cl100k_base", "o200k_base"}

// Default is the encoding used when none is chosen.
const Default = "cl100k_base"

// Get returns a built-in encoding by name.
func Get(name string) (Tokenizer, error) {
	var enc tokenizer.Encoding
	switch strings.ToLower(name) {
	case "cl100k_base", "cl100k":
		enc = tokenizer.Cl100kBase
	case "o200k_base", "o200k":
		enc = tokenizer.O200kBase
	default:
		return nil, fmt.Errorf("unknown tokenizer %q (known: %s)", name, strings.Join(Names, ", "))
	}
	c, err := tokenizer.Get(enc)
	if err != nil {
		return nil, fmt.Errorf("load tokenizer %s: %w", name, err)
	}
	return tiktoken{name: string(enc), c: c}, nil
}

type tiktoken struct {
	name string
	c    tokenizer.Codec
}

func (t tiktoken) Name() string { return t.name }

// Count counts s's tokens. The codec fails only when its split expression
// fails to match (it has no UTF-8 checks in its default mode, and no match
// timeout); then the text's tokens are estimated at four bytes each rather
// than counted as none.
func (t tiktoken) Count(s string) int {
	n, err := t.c.Count(s)
	if err != nil {
		return max(n, (len(s)+3)/4)
	}
	return n
}

func (t tiktoken) Encode(s string) []uint {
	ids, _, err := t.c.Encode(s)
	if err != nil {
		return nil
	}
	return ids
}

func (t tiktoken) Decode(ids []uint) string {
	s, err := t.c.Decode(ids)
	if err != nil {
		return ""
	}
	return s
}

// Cached wraps tok with a memo of the counts of short texts. Streamed chunks
// are mostly one short token that recurs ("the", " and"), so counting them
// one by one mostly hits the memo. It holds at most maxEntries texts of up
// to 32 bytes and is safe for concurrent use.
func Cached(tok Tokenizer, maxEntries int) Tokenizer {
	return &cached{Tokenizer: tok, max: maxEntries, m: make(map[string]int, 1024)}
}

type cached struct {
	Tokenizer
	max int
	mu  sync.RWMutex
	m   map[string]int
}

func (c *cached) Count(s string) int {
	if len(s) > 32 {
		return c.Tokenizer.Count(s)
	}
	c.mu.RLock()
	n, ok := c.m[s]
	c.mu.RUnlock()
	if ok {
		return n
	}
	n = c.Tokenizer.Count(s)
	c.mu.Lock()
	if len(c.m) < c.max {
		c.m[strings.Clone(s)] = n
	}
	c.mu.Unlock()
	return n
}

// Open returns a built-in encoding by name, or loads a Hugging Face
// tokenizer.json when spec is a path (it ends in .json or names a file).
func Open(spec string) (Tokenizer, error) {
	if strings.HasSuffix(strings.ToLower(spec), ".json") || strings.ContainsAny(spec, `/\`) {
		return LoadFile(spec)
	}
	return Get(spec)
}
