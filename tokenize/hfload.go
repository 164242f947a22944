package tokenize

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/dlclark/regexp2/v2"
	"golang.org/x/text/unicode/norm"
)

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
