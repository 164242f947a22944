package workload

import "github.com/tokbench/tokbench/api"

// Requester is what EmbedSource and ToolSource draw on: a level's
// requests by index (load.Source, which this package cannot name).
type Requester interface {
	Request(i int) (req *api.Request, inputTokens int)
}

type warmupRequester interface {
	WarmupRequest(i int) (req *api.Request, inputTokens int)
}

// EmbedSource makes embeddings requests of Inputs texts each from a
// source of prompts: request i embeds the prompts of base's requests
// i·Inputs to i·Inputs+Inputs−1, so each input has the exact length base
// gives its prompts (--input-tokens, a dataset's rows), and its input
// tokens are their sum. Make base with Inputs times the requests a level
// needs. It is safe for concurrent use when base is.
type EmbedSource struct {
	base   Requester
	inputs int
}

// NewEmbedSource returns the source of embeddings requests of inputs
// texts (at least 1) drawn from base.
func NewEmbedSource(base Requester, inputs int) *EmbedSource {
	return &EmbedSource{base: base, inputs: max(inputs, 1)}
}

// Request implements load.Source.
func (s *EmbedSource) Request(i int) (*api.Request, int) {
	return s.make(i, s.base.Request)
}

// WarmupRequest implements load.WarmupSource: base's warm-up prompts,
// when it has them, else its requests far past any a level sends.
func (s *EmbedSource) WarmupRequest(i int) (*api.Request, int) {
	if w, ok := s.base.(warmupRequester); ok {
		return s.make(i, w.WarmupRequest)
	}
	return s.make(i+1<<30/s.inputs, s.base.Request)
}

func (s *EmbedSource) make(i int, get func(int) (*api.Request, int)) (*api.Request, int) {
	out := &api.Request{Inputs: make([]string, s.inputs)}
	tokens := 0
	for k := range s.inputs {
		req, n := get(i*s.inputs + k)
		if k == 0 {
			out.Model, out.Extra = req.Model, req.Extra
		}
		out.Inputs[k] = req.Prompt()
		tokens += n
	}
	return out, tokens
}
