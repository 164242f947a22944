// Package workload makes the prompts a benchmark sends. Synthetic prompts
// are built from common English words that are one token each under the
// chosen tokenizer, so their length is exact, and verified by re-encoding.
// Prompts also come from datasets (JSONL, ShareGPT, streamed and
// reservoir-sampled) or are cut from a text corpus at an exact length.
// Lengths follow a Dist (fixed, normal, uniform); a shared prefix in groups
// exercises prefix caching. A Source holds a level's requests, made before
// the level starts, and implements load.Source.
//
// Everything is deterministic for a seed. A Synthetic generator and a
// Corpus are not safe for concurrent use; a finished Source is.
package workload

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/tokbench/tokbench/tokenize"
)

// candidates are common words; those that are not a single token (with a
// leading space) under the chosen tokenizer are dropped at construction.
var candidates = strings.Fields(`the of and to in is was for that on with as by at from
his her they have had are not but this which were all their one been has more when there
who will would into only other new some could time these two may first then do any like
my now over such our man me even most made after also did many before must through back
years where much your way well down should because each just those people how too little
state good very make world still own see men work long get here between both life being under
never day same another know while last might us great old year off come since against go
came right used take three states himself few house use during without again place around
however home small found thought went say part once general high upon school every does
group number fact later always water city next hand left end system program public given
company real change form often order set want side power point young hands light open door
room food music river market paper money story early table question field window morning
green color voice heart night sound river line table mountain garden summer winter simple`)

// Words returns the single-token words under tok, in a fixed order.
func Words(tok tokenize.Tokenizer) []string {
	seen := map[string]bool{}
	var words []string
	for _, w := range candidates {
		if seen[w] {
			continue
		}
		seen[w] = true
		if tok.Count(" "+w) == 1 {
			words = append(words, w)
		}
	}
	return words
}

// Synthetic makes prompts of an exact token count.
type Synthetic struct {
	tok      tokenize.Tokenizer
	words    []string
	rng      *rand.Rand
	verified map[int]bool
	short    []string // the shortest words, for closing in on a count
}

// NewSynthetic returns a generator for tok seeded with seed.
func NewSynthetic(tok tokenize.Tokenizer, seed uint64) (*Synthetic, error) {
	words := Words(tok)
	if len(words) < 50 {
		return nil, fmt.Errorf("tokenizer %s: too few single-token words (%d) for synthetic prompts", tok.Name(), len(words))
	}
	return &Synthetic{tok: tok, words: words, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), verified: map[int]bool{}}, nil
}

// Prompt returns a random text of exactly n tokens under the generator's
// tokenizer: " w1 w2 … wn" with every word one token. Each word with its
// leading space is one pre-tokenizer piece and one token, so the count is
// exact by construction; the first prompt of each length is also checked by
// re-encoding, and an error means the tokenizer merged words unexpectedly.
func (s *Synthetic) Prompt(n int) (string, error) {
	if n <= 0 {
		return "", nil
	}
	var b strings.Builder
	b.Grow(n * 7)
	for i := 0; i < n; i++ {
		b.WriteByte(' ')
		b.WriteString(s.words[s.rng.IntN(len(s.words))])
	}
	text := b.String()
	if !s.verified[n] {
		if got := s.tok.Count(text); got != n {
			return "", fmt.Errorf("synthetic prompt of %d tokens encodes to %d under %s", n, got, s.tok.Name())
		}
		s.verified[n] = true
	}
	return text, nil
}

// Short returns n of the generator's shortest words (" a"-like, one token
// under any tokenizer's merges of common English), space-led as Prompt's.
func (s *Synthetic) Short(n int) string {
	if s.short == nil {
		s.short = slices.Clone(s.words)
		slices.SortStableFunc(s.short, func(a, b string) int { return len(a) - len(b) })
		s.short = s.short[:min(8, len(s.short))]
	}
	var b strings.Builder
	for range n {
		b.WriteByte(' ')
		b.WriteString(s.short[s.rng.IntN(len(s.short))])
	}
	return b.String()
}
