package tokenize

import (
	"container/heap"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/dlclark/regexp2/v2"
	"golang.org/x/text/unicode/norm"
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

type hfFile struct {
	AddedTokens []struct {
		ID      int    `json:"id"`
		Content string `json:"content"`
		Special bool   `json:"special"`
	} `json:"added_tokens"`
	Normalizer   json.RawMessage `json:"normalizer"`
	PreTokenizer json.RawMessage `json:"pre_tokenizer"`
	Decoder      json.RawMessage `json:"decoder"`
	Model        struct {
		Type                    string          `json:"type"`
		Vocab                   map[string]int  `json:"vocab"`
		Merges                  json.RawMessage `json:"merges"`
		UnkToken                *string         `json:"unk_token"`
		ByteFallback            bool            `json:"byte_fallback"`
		IgnoreMerges            bool            `json:"ignore_merges"`
		ContinuingSubwordPrefix *string         `json:"continuing_subword_prefix"`
		EndOfWordSuffix         *string         `json:"end_of_word_suffix"`
		FuseUnk                 bool            `json:"fuse_unk"`
	} `json:"model"`
}

// component is one normalizer, pre-tokenizer or decoder entry.
type component struct {
	Type          string            `json:"type"`
	Normalizers   []json.RawMessage `json:"normalizers"`
	Pretokenizers []json.RawMessage `json:"pretokenizers"`
	Decoders      []json.RawMessage `json:"decoders"`
	Prepend       string            `json:"prepend"`
	Pattern       *struct {
		String *string `json:"String"`
		Regex  *string `json:"Regex"`
	} `json:"pattern"`
	Content        string `json:"content"`
	Behavior       string `json:"behavior"`
	Invert         bool   `json:"invert"`
	AddPrefixSpace *bool  `json:"add_prefix_space"`
	UseRegex       *bool  `json:"use_regex"`
	Replacement    string `json:"replacement"`
	PrependScheme  string `json:"prepend_scheme"`
	Split          *bool  `json:"split"`
	Individual     bool   `json:"individual_digits"`
	Start          int    `json:"start"`
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

// preStep splits every piece into smaller pieces; first tells whether the
// piece starts the text (Metaspace's prepend_scheme "first").
type preStep func(piece string, first bool) []string

// gpt2Pattern is the ByteLevel pre-tokenizer's own split (use_regex).
const gpt2Pattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

func parseHF(data []byte) (*hfTokenizer, error) {
	var f hfFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("not a tokenizer.json: %w", err)
	}
	if f.Model.Type != "BPE" && !(f.Model.Type == "" && f.Model.Vocab != nil && f.Model.Merges != nil) {
		return nil, fmt.Errorf("model type %q is not supported (BPE only)", f.Model.Type)
	}
	if p := f.Model.ContinuingSubwordPrefix; p != nil && *p != "" {
		return nil, fmt.Errorf("model: continuing_subword_prefix is not supported")
	}
	if p := f.Model.EndOfWordSuffix; p != nil && *p != "" {
		return nil, fmt.Errorf("model: end_of_word_suffix is not supported")
	}
	t := &hfTokenizer{
		vocab: f.Model.Vocab, tokens: make(map[int]string, len(f.Model.Vocab)+len(f.AddedTokens)),
		ranks: map[pairKey]int{}, unk: -1, fuse: f.Model.FuseUnk, bytes: f.Model.ByteFallback,
		ignore: f.Model.IgnoreMerges, addedIDs: map[string]int{},
		cache: map[string][]int{},
	}
	if t.vocab == nil {
		return nil, fmt.Errorf("model: no vocab")
	}
	for s, id := range t.vocab {
		t.tokens[id] = s
	}
	if u := f.Model.UnkToken; u != nil {
		id, ok := t.vocab[*u]
		if !ok {
			return nil, fmt.Errorf("model: unk_token %q is not in the vocab", *u)
		}
		t.unk = id
	}
	if err := t.parseMerges(f.Model.Merges); err != nil {
		return nil, err
	}
	var alts []string
	for _, a := range f.AddedTokens {
		if a.Content == "" {
			continue
		}
		t.addedIDs[a.Content] = a.ID
		t.tokens[a.ID] = a.Content
		alts = append(alts, a.Content)
	}
	if len(alts) > 0 {
		sort.Slice(alts, func(i, j int) bool { return len(alts[i]) > len(alts[j]) })
		for i, a := range alts {
			alts[i] = regexp.QuoteMeta(a)
		}
		t.added = regexp.MustCompile(strings.Join(alts, "|"))
	}
	if err := t.parseNormalizer(f.Normalizer); err != nil {
		return nil, fmt.Errorf("normalizer: %w", err)
	}
	if err := t.parsePre(f.PreTokenizer); err != nil {
		return nil, fmt.Errorf("pre_tokenizer: %w", err)
	}
	if err := t.parseDecoder(f.Decoder); err != nil {
		return nil, fmt.Errorf("decoder: %w", err)
	}
	return t, nil
}

func (t *hfTokenizer) parseMerges(raw json.RawMessage) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	// Merges are "a b" strings (older files) or ["a", "b"] pairs (newer
	// files, which allow spaces inside tokens).
	var strs []string
	var pairs [][2]string
	if err := json.Unmarshal(raw, &strs); err != nil {
		if err := json.Unmarshal(raw, &pairs); err != nil {
			return fmt.Errorf("model.merges: want [\"a b\", …] or [[\"a\", \"b\"], …]")
		}
	} else {
		pairs = make([][2]string, len(strs))
		for i, s := range strs {
			a, b, ok := strings.Cut(s, " ")
			if !ok {
				return fmt.Errorf("model.merges[%d]: %q is not two tokens", i, s)
			}
			pairs[i] = [2]string{a, b}
		}
	}
	for i, p := range pairs {
		if _, ok := t.vocab[p[0]+p[1]]; !ok {
			return fmt.Errorf("model.merges[%d]: %q + %q is not in the vocab", i, p[0], p[1])
		}
		k := pairKey{p[0], p[1]}
		if _, dup := t.ranks[k]; !dup {
			t.ranks[k] = i
		}
	}
	return nil
}

func parseComponent(raw json.RawMessage) (*component, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	return &c, nil
}

func (t *hfTokenizer) parseNormalizer(raw json.RawMessage) error {
	c, err := parseComponent(raw)
	if err != nil || c == nil {
		return err
	}
	switch c.Type {
	case "Sequence":
		for _, n := range c.Normalizers {
			if err := t.parseNormalizer(n); err != nil {
				return err
			}
		}
	case "Prepend":
		p := c.Prepend
		t.norms = append(t.norms, func(s string) string {
			if s == "" {
				return s
			}
			return p + s
		})
	case "Replace":
		if c.Pattern == nil {
			return fmt.Errorf("normalizer Replace without a pattern")
		}
		content := c.Content
		switch {
		case c.Pattern.String != nil:
			old := *c.Pattern.String
			t.norms = append(t.norms, func(s string) string { return strings.ReplaceAll(s, old, content) })
		case c.Pattern.Regex != nil:
			re, err := regexp2.Compile(*c.Pattern.Regex, regexp2.Unicode)
			if err != nil {
				return fmt.Errorf("normalizer Replace pattern %q: %w", *c.Pattern.Regex, err)
			}
			t.norms = append(t.norms, func(s string) string {
				out, err := re.Replace(s, content, -1, -1)
				if err != nil {
					return s
				}
				return out
			})
		}
	case "NFC":
		t.norms = append(t.norms, norm.NFC.String)
	case "NFD":
		t.norms = append(t.norms, norm.NFD.String)
	case "NFKC":
		t.norms = append(t.norms, norm.NFKC.String)
	case "NFKD":
		t.norms = append(t.norms, norm.NFKD.String)
	case "Lowercase":
		t.norms = append(t.norms, strings.ToLower)
	default:
		return fmt.Errorf("type %q is not supported", c.Type)
	}
	return nil
}

func (t *hfTokenizer) parsePre(raw json.RawMessage) error {
	c, err := parseComponent(raw)
	if err != nil || c == nil {
		return err
	}
	switch c.Type {
	case "Sequence":
		for _, p := range c.Pretokenizers {
			if err := t.parsePre(p); err != nil {
				return err
			}
		}
	case "ByteLevel":
		t.byteLvl = true
		if c.AddPrefixSpace != nil && *c.AddPrefixSpace {
			t.pre = append(t.pre, func(p string, _ bool) []string {
				if p != "" && p[0] != ' ' {
					p = " " + p
				}
				return []string{p}
			})
		}
		if c.UseRegex == nil || *c.UseRegex {
			re := regexp2.MustCompile(gpt2Pattern, regexp2.Unicode)
			t.pre = append(t.pre, splitStep(re, "Isolated", false))
		}
	case "Split":
		if c.Pattern == nil {
			return fmt.Errorf("pre-tokenizer Split without a pattern")
		}
		var expr string
		switch {
		case c.Pattern.Regex != nil:
			expr = *c.Pattern.Regex
		case c.Pattern.String != nil:
			expr = regexp2.Escape(*c.Pattern.String)
		default:
			return fmt.Errorf("pre-tokenizer Split pattern: want String or Regex")
		}
		re, err := regexp2.Compile(expr, regexp2.Unicode)
		if err != nil {
			return fmt.Errorf("pre-tokenizer Split pattern %q: %w", expr, err)
		}
		switch c.Behavior {
		case "Isolated", "Removed", "MergedWithPrevious", "MergedWithNext", "Contiguous":
		default:
			return fmt.Errorf("pre-tokenizer Split behavior %q is not supported", c.Behavior)
		}
		t.pre = append(t.pre, splitStep(re, c.Behavior, c.Invert))
	case "Digits":
		expr := `\p{Nd}+`
		if c.Individual {
			expr = `\p{Nd}`
		}
		t.pre = append(t.pre, splitStep(regexp2.MustCompile(expr, regexp2.Unicode), "Isolated", false))
	case "WhitespaceSplit":
		t.pre = append(t.pre, func(p string, _ bool) []string { return strings.Fields(p) })
	case "Whitespace":
		t.pre = append(t.pre, splitStep(regexp2.MustCompile(`\w+|[^\w\s]+`, regexp2.Unicode), "Isolated", true))
		t.pre = append(t.pre, func(p string, _ bool) []string {
			if strings.TrimSpace(p) == "" {
				return nil
			}
			return []string{p}
		})
	case "Metaspace":
		rep := c.Replacement
		if rep == "" {
			rep = "▁"
		}
		scheme := c.PrependScheme
		if scheme == "" {
			scheme = "always"
			if c.AddPrefixSpace != nil && !*c.AddPrefixSpace {
				scheme = "never"
			}
		}
		split := c.Split == nil || *c.Split
		t.decodeSP = true
		t.pre = append(t.pre, func(p string, first bool) []string {
			p = strings.ReplaceAll(p, " ", rep)
			if p != "" && !strings.HasPrefix(p, rep) && (scheme == "always" || scheme == "first" && first) {
				p = rep + p
			}
			if !split {
				return []string{p}
			}
			var out []string
			for len(p) > 0 {
				i := strings.Index(p[len(rep):], rep)
				if i < 0 {
					out = append(out, p)
					break
				}
				out = append(out, p[:i+len(rep)])
				p = p[i+len(rep):]
			}
			return out
		})
	default:
		return fmt.Errorf("type %q is not supported", c.Type)
	}
	return nil
}

func (t *hfTokenizer) parseDecoder(raw json.RawMessage) error {
	c, err := parseComponent(raw)
	if err != nil || c == nil {
		return err
	}
	switch c.Type {
	case "Sequence":
		for _, d := range c.Decoders {
			if err := t.parseDecoder(d); err != nil {
				return err
			}
		}
	case "Replace":
		if c.Pattern != nil && c.Pattern.String != nil && *c.Pattern.String == "▁" {
			t.decodeSP = true
		}
	case "Metaspace":
		t.decodeSP = true
		if c.PrependScheme != "never" && (c.AddPrefixSpace == nil || *c.AddPrefixSpace) {
			t.stripStart = 1
		}
	case "Strip":
		t.stripStart = c.Start
	}
	// ByteLevel, ByteFallback and Fuse need nothing: bytes are restored
	// either way.
	return nil
}

// splitStep splits a piece on re's matches with the given HF behavior.
func splitStep(re *regexp2.Regexp, behavior string, invert bool) preStep {
	return func(p string, _ bool) []string {
		idx, err := re.FindAllStringIndex(p, -1)
		if err != nil {
			return []string{p}
		}
		type seg struct {
			s     string
			delim bool
		}
		var segs []seg
		last := 0
		for _, m := range idx {
			if m[0] > last {
				segs = append(segs, seg{p[last:m[0]], invert})
			}
			if m[1] > m[0] {
				segs = append(segs, seg{p[m[0]:m[1]], !invert})
			}
			last = m[1]
		}
		if last < len(p) {
			segs = append(segs, seg{p[last:], invert})
		}
		var out []string
		pendingNext := ""
		for i, sg := range segs {
			switch {
			case !sg.delim || behavior == "Isolated":
				out = append(out, pendingNext+sg.s)
				pendingNext = ""
			case behavior == "Removed":
			case behavior == "MergedWithPrevious":
				if len(out) > 0 && !segs[i-1].delim {
					out[len(out)-1] += sg.s
				} else {
					out = append(out, sg.s)
				}
			case behavior == "MergedWithNext":
				pendingNext += sg.s
			case behavior == "Contiguous":
				if i > 0 && segs[i-1].delim {
					out[len(out)-1] += sg.s
				} else {
					out = append(out, sg.s)
				}
			}
		}
		if pendingNext != "" {
			out = append(out, pendingNext)
		}
		return out
	}
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
