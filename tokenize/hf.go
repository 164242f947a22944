package tokenize

import (
	"container/heap"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// LoadFile reads a Hugging Face tokenizer.json with a BPE model: byte-level
// BPE (GPT-2, Llama 3, Qwen, Mistral Nemo …) with its pre-tokenizer, and
// SentencePiece-style BPE (Llama 2, Mistral 7B: Metaspace or a
// Prepend/Replace normalizer, byte fallback). Added and special tokens in
// the text map to their own ids. Nothing is fetched; the post-processor
// (BOS/EOS insertion) is not applied, so counts are of the text alone, as
// with add_special_tokens=False.
//
// Parts of the file tokbench does not implement (a WordPiece or Unigram
// model, an unknown normalizer or pre-tokenizer) are an error naming the
// part, never a silently wrong count.
func LoadFile(path string) (Tokenizer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read tokenizer %s: %w", path, err)
	}
	t, err := parseHF(data)
	if err != nil {
		return nil, fmt.Errorf("tokenizer %s: %w", path, err)
	}
	t.name = filepath.Base(filepath.Dir(path)) + "/" + filepath.Base(path)
	return t, nil
}

type pairKey struct{ a, b string }

type hfTokenizer struct {
	name   string
	vocab  map[string]int
	tokens map[int]string // id → token string (vocab and added)
	ranks  map[pairKey]int
	unk    int // -1 without an unknown token
	fuse   bool
	bytes  bool // byte_fallback
	ignore bool // ignore_merges

	added    *regexp.Regexp // alternation of added tokens, longest first; nil without
	addedIDs map[string]int

	norms   []func(string) string
	pre     []preStep
	byteLvl bool // a ByteLevel pre-tokenizer maps bytes to printable runes

	decodeSP   bool // SentencePiece-style decode: ▁ → space
	stripStart int  // leading spaces the decoder strips

	mu    sync.RWMutex
	cache map[string][]int
}

// byteRunes maps every byte to a printable rune, as GPT-2's byte-level BPE does.
var byteRunes, runeBytes = func() ([256]rune, map[rune]byte) {
	var enc [256]rune
	dec := map[rune]byte{}
	n := 0
	for b := 0; b < 256; b++ {
		if b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE && b <= 0xFF {
			enc[b] = rune(b)
		} else {
			enc[b] = rune(256 + n)
			n++
		}
		dec[enc[b]] = byte(b)
	}
	return enc, dec
}()

func (t *hfTokenizer) Name() string { return t.name }

func (t *hfTokenizer) Count(s string) int { return len(t.Encode(s)) }

// Encode splits off added tokens, then normalizes, pre-tokenizes and runs
// BPE on each remaining segment.
func (t *hfTokenizer) Encode(s string) []uint {
	var ids []uint
	first := true
	emit := func(seg string) {
		for _, n := range t.norms {
			seg = n(seg)
		}
		pieces := []string{seg}
		for _, step := range t.pre {
			var next []string
			for i, p := range pieces {
				next = append(next, step(p, first && i == 0)...)
			}
			pieces = next
		}
		for _, p := range pieces {
			if p == "" {
				continue
			}
			if t.byteLvl {
				var b strings.Builder
				for i := 0; i < len(p); i++ {
					b.WriteRune(byteRunes[p[i]])
				}
				p = b.String()
			}
			for _, id := range t.bpe(p) {
				ids = append(ids, uint(id))
			}
		}
		first = false
	}
	if t.added == nil {
		emit(s)
		return ids
	}
	last := 0
	for _, m := range t.added.FindAllStringIndex(s, -1) {
		if m[0] > last {
			emit(s[last:m[0]])
		}
		ids = append(ids, uint(t.addedIDs[s[m[0]:m[1]]]))
		first = false
		last = m[1]
	}
	if last < len(s) {
		emit(s[last:])
	}
	return ids
}

// bpe encodes one pre-token piece, with a memo of recent pieces.
func (t *hfTokenizer) bpe(p string) []int {
	if t.ignore {
		if id, ok := t.vocab[p]; ok {
			return []int{id}
		}
	}
	cacheable := len(p) <= 64
	if cacheable {
		t.mu.RLock()
		ids, ok := t.cache[p]
		t.mu.RUnlock()
		if ok {
			return ids
		}
	}
	ids := t.merge(p)
	if cacheable {
		t.mu.Lock()
		if len(t.cache) > 1<<16 {
			clear(t.cache)
		}
		t.cache[p] = ids
		t.mu.Unlock()
	}
	return ids
}

// symbol is one node of the doubly linked list BPE merges over.
type symbol struct {
	s          string
	prev, next int // -1 at the ends
	gone       bool
}

type candidate struct {
	rank, left int
	a, b       string // the pair when queued, to skip stale entries
}

type candidates []candidate

func (c candidates) Len() int { return len(c) }
func (c candidates) Less(i, j int) bool {
	if c[i].rank != c[j].rank {
		return c[i].rank < c[j].rank
	}
	return c[i].left < c[j].left
}
func (c candidates) Swap(i, j int) { c[i], c[j] = c[j], c[i] }
func (c *candidates) Push(x any)   { *c = append(*c, x.(candidate)) }
func (c *candidates) Pop() any {
	old := *c
	x := old[len(old)-1]
	*c = old[:len(old)-1]
	return x
}

// merge applies merges lowest rank first (leftmost on ties), as the HF BPE
// model does, in O(n log n) with a heap over adjacent pairs.
func (t *hfTokenizer) merge(p string) []int {
	syms := make([]symbol, 0, utf8.RuneCountInString(p))
	for i := 0; i < len(p); {
		_, size := utf8.DecodeRuneInString(p[i:])
		syms = append(syms, symbol{s: p[i : i+size], prev: len(syms) - 1, next: len(syms) + 1})
		i += size
	}
	if len(syms) == 0 {
		return nil
	}
	syms[len(syms)-1].next = -1
	h := &candidates{}
	push := func(left int) {
		right := syms[left].next
		if right < 0 {
			return
		}
		if r, ok := t.ranks[pairKey{syms[left].s, syms[right].s}]; ok {
			heap.Push(h, candidate{rank: r, left: left, a: syms[left].s, b: syms[right].s})
		}
	}
	for i := range syms {
		push(i)
	}
	for h.Len() > 0 {
		c := heap.Pop(h).(candidate)
		l := &syms[c.left]
		if l.gone || l.s != c.a || l.next < 0 || syms[l.next].s != c.b {
			continue
		}
		r := &syms[l.next]
		l.s += r.s
		r.gone = true
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = c.left
		}
		if l.prev >= 0 {
			push(l.prev)
		}
		push(c.left)
	}
	var ids []int
	unkRun := false
	for i := 0; i >= 0; i = syms[i].next {
		s := syms[i].s
		if id, ok := t.vocab[s]; ok {
			ids = append(ids, id)
			unkRun = false
			continue
		}
		if t.bytes {
			for j := 0; j < len(s); j++ {
				if id, ok := t.vocab[fmt.Sprintf("<0x%02X>", s[j])]; ok {
					ids = append(ids, id)
				} else if t.unk >= 0 {
					ids = append(ids, t.unk)
				}
			}
			unkRun = false
			continue
		}
		if t.unk >= 0 && !(t.fuse && unkRun) {
			ids = append(ids, t.unk)
		}
		unkRun = true
	}
	return ids
}

// Decode joins the tokens' text: byte-level tokens map back to bytes,
// <0xNN> byte-fallback tokens to their byte, and ▁ to a space for
// SentencePiece-style files.
func (t *hfTokenizer) Decode(ids []uint) string {
	var b []byte
	for _, id := range ids {
		s, ok := t.tokens[int(id)]
		if !ok {
			continue
		}
		if _, added := t.addedIDs[s]; added && t.addedIDs[s] == int(id) {
			b = append(b, s...)
			continue
		}
		if len(s) == 6 && strings.HasPrefix(s, "<0x") && s[5] == '>' {
			if v, err := strconv.ParseUint(s[3:5], 16, 8); err == nil {
				b = append(b, byte(v))
				continue
			}
		}
		if t.byteLvl {
			for _, r := range s {
				if c, ok := runeBytes[r]; ok {
					b = append(b, c)
				} else {
					b = utf8.AppendRune(b, r)
				}
			}
			continue
		}
		b = append(b, s...)
	}
	out := string(b)
	if t.decodeSP {
		out = strings.ReplaceAll(out, "▁", " ")
		for i := 0; i < t.stripStart && strings.HasPrefix(out, " "); i++ {
			out = out[1:]
		}
	}
	return out
}
