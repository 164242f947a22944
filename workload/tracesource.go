package workload

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strings"
	"sync"

	"github.com/tokbench/tokbench/api"
	"github.com/tokbench/tokbench/tokenize"
)

// TraceSource makes a trace's requests, implementing load.Source: request
// i is the trace's i-th, asking for its output length exactly (max_tokens
// with ignore_eos), its prompt the trace's own or synthetic words of its
// input length exactly. A Mooncake request's prompt is its hash ids'
// blocks of 512 words, the same words for the same id, so requests that
// share ids share those blocks as a prefix cache would see in production;
// a session's requests start with the same words. Safe for concurrent use.
type TraceSource struct {
	trace *Trace
	words []string
	lead  int // what a text of words costs beyond one token a word
	model string
	seed  uint64

	mu     sync.Mutex
	blocks map[int64]string // hash id → its block's text
}

// maxBlocks bounds the block texts a TraceSource keeps (some 40 MB); past
// it they are made again when needed.
const maxBlocks = 16 << 10

// NewTraceSource is the source of t's requests for model, its words
// single tokens under tok (so lengths are exact), seeded by seed.
func NewTraceSource(t *Trace, tok tokenize.Tokenizer, model string, seed uint64) (*TraceSource, error) {
	syn, err := NewSynthetic(tok, seed)
	if err != nil {
		return nil, err
	}
	s := &TraceSource{trace: t, words: syn.words, lead: syn.lead, model: model, seed: seed, blocks: map[int64]string{}}
	// The words are one token each with their leading space; check that a
	// prompt of them counts as its length.
	for i := range t.Requests {
		if r := &t.Requests[i]; r.Prompt == "" && r.Messages == nil {
			req, n := s.Request(i)
			if got := tok.Count(req.Messages[0].Content); got != n {
				return nil, fmt.Errorf("trace request %d: a prompt of %d words encodes to %d tokens under %s", i, n, got, tok.Name())
			}
			break
		}
	}
	return s, nil
}

// Len is the number of requests in the trace.
func (s *TraceSource) Len() int { return len(s.trace.Requests) }

// Request is the trace's i-th request (cycled past its end), with its
// prompt's token count (0 for the trace's own text).
func (s *TraceSource) Request(i int) (*api.Request, int) {
	tr := &s.trace.Requests[i%len(s.trace.Requests)]
	req := &api.Request{Model: s.model, MaxTokens: tr.OutputTokens, IgnoreEOS: true}
	switch {
	case tr.Messages != nil:
		req.Messages = tr.Messages
		return req, tr.InputTokens
	case tr.Prompt != "":
		req.Messages = []api.Message{{Role: "user", Content: tr.Prompt}}
		return req, tr.InputTokens
	}
	var b strings.Builder
	b.Grow(tr.InputTokens * 7)
	switch {
	case len(tr.HashIDs) > 0:
		left := tr.InputTokens - s.lead // the first block's words cost the lead
		for _, id := range tr.HashIDs {
			if left <= 0 {
				break
			}
			k := min(left, MooncakeBlock)
			b.WriteString(firstWords(s.block(id), k))
			left -= k
		}
	case tr.Session != "":
		h := fnv.New64a()
		h.Write([]byte(tr.Session))
		s.writeWords(&b, rand.New(rand.NewPCG(s.seed, h.Sum64())), tr.InputTokens-s.lead)
	default:
		s.writeWords(&b, rand.New(rand.NewPCG(s.seed, 1<<62|uint64(i))), tr.InputTokens-s.lead)
	}
	req.Messages = []api.Message{{Role: "user", Content: b.String()}}
	return req, tr.InputTokens
}

// WarmupRequest is a request like the trace's first, with words of its
// own, so a warm-up fills no cache a measured request then finds.
func (s *TraceSource) WarmupRequest(i int) (*api.Request, int) {
	tr := s.trace.Requests[0]
	n := max(tr.InputTokens, 16)
	var b strings.Builder
	s.writeWords(&b, rand.New(rand.NewPCG(s.seed, 1<<61|uint64(i))), n-s.lead)
	return &api.Request{Model: s.model, MaxTokens: tr.OutputTokens, IgnoreEOS: true,
		Messages: []api.Message{{Role: "user", Content: b.String()}}}, n
}

// block is hash id's block text, MooncakeBlock words.
func (s *TraceSource) block(id int64) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.blocks[id]; ok {
		return t
	}
	var b strings.Builder
	s.writeWords(&b, rand.New(rand.NewPCG(s.seed^0x6d6f6f6e63616b65, uint64(id))), MooncakeBlock)
	if len(s.blocks) >= maxBlocks {
		clear(s.blocks)
	}
	s.blocks[id] = b.String()
	return s.blocks[id]
}

func (s *TraceSource) writeWords(b *strings.Builder, rng *rand.Rand, n int) {
	for range n {
		b.WriteByte(' ')
		b.WriteString(s.words[rng.IntN(len(s.words))])
	}
}

// firstWords is text's first k space-led words.
func firstWords(text string, k int) string {
	seen := 0
	for i := 0; i < len(text); i++ {
		if text[i] == ' ' {
			if seen == k {
				return text[:i]
			}
			seen++
		}
	}
	return text
}
