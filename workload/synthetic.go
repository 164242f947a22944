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
	"errors"
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
	words, _, _ := wordsOf(tok)
	return words
}

// ErrTokenizer is the condition (wrapped) of a tokenizer that cannot make
// synthetic prompts of an exact length.
var ErrTokenizer = errors.New("no exact synthetic prompts")

// minWords is the fewest words synthetic prompts are drawn from.
const minWords = 50

// wordsOf returns the candidates that are one token each with their
// leading space after other such words, and lead, the tokens a text of
// them costs beyond one a word. A byte-level BPE (GPT, Llama 3) makes
// " word" one piece and one token anywhere: lead 0. A SentencePiece
// tokenizer whose normalizer puts "▁" in front of the whole text (Llama 2)
// makes a text " w1 w2" into "▁▁w1▁w2": no " word" is one token at the
// start, yet each "▁w" is after the first, and the first costs one more
// (lead 1). Only words whose own count, and count after another word,
// show the same lead are kept.
// tried is the number of distinct candidates.
func wordsOf(tok tokenize.Tokenizer) (words []string, lead, tried int) {
	seen := map[string]bool{}
	byLead := map[int][]string{}
	for _, w := range candidates {
		if seen[w] {
			continue
		}
		seen[w] = true
		alone := tok.Count(" " + w)
		if alone < 1 || alone > 2 {
			continue
		}
		if l := alone - 1; l == 0 || tok.Count(" "+w+" "+w) == 2+l {
			byLead[l] = append(byLead[l], w)
		}
	}
	if len(byLead[0]) >= minWords || len(byLead[0]) >= len(byLead[1]) {
		return byLead[0], 0, len(seen)
	}
	return byLead[1], 1, len(seen)
}

// Synthetic makes prompts of an exact token count.
type Synthetic struct {
	tok      tokenize.Tokenizer
	words    []string
	lead     int // tokens a text of words costs beyond one a word (wordsOf)
	rng      *rand.Rand
	verified map[int]bool
	short    []string // the shortest words, for closing in on a count
}

// NewSynthetic returns a generator for tok seeded with seed. A tokenizer
// under which too few words have a known count gives ErrTokenizer.
func NewSynthetic(tok tokenize.Tokenizer, seed uint64) (*Synthetic, error) {
	words, lead, tried := wordsOf(tok)
	if len(words) < minWords {
		return nil, fmt.Errorf("tokenizer %s: %w: %d of %d common English words have a known token count, %d needed",
			tok.Name(), ErrTokenizer, len(words), tried, minWords)
	}
	return &Synthetic{tok: tok, words: words, lead: lead, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), verified: map[int]bool{}}, nil
}

// Prompt returns a random text of exactly n tokens under the generator's
// tokenizer: " w1 w2 … wk", k = n less the tokenizer's lead (wordsOf), a
// single word with no space when n is the lead. Each word after the first
// is one token, so the count is exact by construction; the first prompt of
// each length is also checked by re-encoding, and an error means the
// tokenizer merged words unexpectedly.
func (s *Synthetic) Prompt(n int) (string, error) {
	if n <= 0 {
		return "", nil
	}
	var text string
	if k := n - s.lead; k > 0 {
		text = s.Continue(k)
	} else {
		text = s.words[s.rng.IntN(len(s.words))] // "w" is "▁w", one token
	}
	if !s.verified[n] {
		if got := s.tok.Count(text); got != n {
			return "", fmt.Errorf("synthetic prompt of %d tokens encodes to %d under %s", n, got, s.tok.Name())
		}
		s.verified[n] = true
	}
	return text, nil
}

// Continue returns n random words, space-led as Prompt's: n tokens more
// when they follow a Prompt's text (or Continue's).
func (s *Synthetic) Continue(n int) string {
	var b strings.Builder
	b.Grow(n * 7)
	for range n {
		b.WriteByte(' ')
		b.WriteString(s.words[s.rng.IntN(len(s.words))])
	}
	return b.String()
}

// Lead is what a text of the generator's words costs beyond one token a
// word: 0 for byte-level BPE, 1 where a "▁" is put in front of the text.
func (s *Synthetic) Lead() int { return s.lead }

// Short returns n of the generator's shortest words (" a"-like, one token
// under any tokenizer's merges of common English), space-led as Continue's.
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
