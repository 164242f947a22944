package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"
)

// This file serves embeddings: OpenAI's POST /v1/embeddings, Ollama's
// POST /api/embed and TEI's POST /embed. An embeddings request is one
// forward pass over its inputs' tokens and no decode, so the engine runs
// it as a sequence of their summed tokens that stops at its first token:
// prefill compute, chunked and batched with every other request in the
// engine's steps, as a serving engine batches an embedding model's
// inputs. The answer comes when that pass ends: one vector of EmbedDims
// per input (seeded values), the tokens counted in OpenAI's usage and
// Ollama's prompt_eval_count.

// defaultEmbedDims is the vectors' dimension: all-MiniLM-L6-v2's and
// bge-small's.
const defaultEmbedDims = 384

// embedProto is the embeddings API a request came in.
type embedProto int

const (
	embedOpenAI embedProto = iota
	embedOllama
	embedTEI
)

func (s *Server) embedRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/embeddings", func(w http.ResponseWriter, r *http.Request) { s.embed(w, r, embedOpenAI) })
	mux.HandleFunc("POST /api/embed", func(w http.ResponseWriter, r *http.Request) { s.embed(w, r, embedOllama) })
	mux.HandleFunc("POST /embed", func(w http.ResponseWriter, r *http.Request) { s.embed(w, r, embedTEI) })
}

// EmbedRequest is the engine's request for an embeddings request whose
// inputs have these token counts: one sequence of their summed tokens
// that ends with its prefill (the first token it samples is its end).
func EmbedRequest(id uint64, inputs []int) Request {
	total := 0
	for _, n := range inputs {
		total += n
	}
	return Request{ID: id, PromptTokens: total, MaxTokens: 1, IgnoreEOS: true}
}

// embedRequest holds the fields of the three request shapes.
type embedRequest struct {
	Model  string          `json:"model"`
	Input  json.RawMessage `json:"input"`  // OpenAI, Ollama
	Inputs json.RawMessage `json:"inputs"` // TEI
}

// embedInputs reads a request's inputs: a string or an array of strings
// (OpenAI's arrays of token ids too), counting each input's tokens.
func embedInputs(raw json.RawMessage, field string) ([]int, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, badRequest("%s: required", field)
	}
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		return []int{max(PromptTokens(one), 1)}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err == nil && len(many) > 0 {
		out := make([]int, len(many))
		for i, t := range many {
			out[i] = max(PromptTokens(t), 1)
		}
		return out, nil
	}
	var ids [][]int
	if err := json.Unmarshal(raw, &ids); err == nil && len(ids) > 0 {
		out := make([]int, len(ids))
		for i, t := range ids {
			out[i] = max(len(t), 1)
		}
		return out, nil
	}
	return nil, badRequest("%s: want a string, or a non-empty array of strings or of token-id arrays", field)
}

// parseEmbed reads and validates an embeddings request: each input's
// tokens.
func (s *Server) parseEmbed(w http.ResponseWriter, r *http.Request, p embedProto) ([]int, error) {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(s.cfg.BodyTimeout))
	body := http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
	var req embedRequest
	err := json.NewDecoder(body).Decode(&req)
	if err == nil {
		_, err = io.Copy(io.Discard, body)
	}
	_ = rc.SetReadDeadline(time.Time{})
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return nil, &apiError{status: http.StatusRequestEntityTooLarge, typ: "invalid_request_error",
				msg: fmt.Sprintf("request body larger than %d bytes", s.cfg.MaxBodyBytes)}
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			w.Header().Set("Connection", "close")
			return nil, &apiError{status: http.StatusRequestTimeout, typ: "invalid_request_error",
				msg: fmt.Sprintf("request body not received within %v", s.cfg.BodyTimeout)}
		}
		return nil, badRequest("request body is not valid JSON: %v", err)
	}
	raw, field := req.Input, "input"
	if p == embedTEI {
		raw, field = req.Inputs, "inputs"
	}
	inputs, err := embedInputs(raw, field)
	if err != nil {
		return nil, err
	}
	total := 0
	for i, n := range inputs {
		if n > s.cfg.MaxModelLen {
			return nil, badRequest("%s[%d]: %d tokens, the model's maximum is %d", field, i, n, s.cfg.MaxModelLen)
		}
		total += n
	}
	if total+1 > s.kvCap {
		return nil, badRequest("%s: %d tokens in all, more than the %d one batch holds", field, total, s.kvCap-1)
	}
	return inputs, nil
}

// embed answers an embeddings request once the engine has run its
// forward pass.
func (s *Server) embed(w http.ResponseWriter, r *http.Request, p embedProto) {
	inputs, err := s.parseEmbed(w, r, p)
	if err != nil {
		ae, ok := errors.AsType[*apiError](err)
		if !ok {
			ae = &apiError{status: http.StatusInternalServerError, typ: "server_error", msg: err.Error()}
		}
		writeError(w, ae.status, ae.typ, ae.msg)
		return
	}
	if n := s.inflight.Add(1); n > int64(s.cfg.MaxInflight) {
		s.inflight.Add(-1)
		writeError(w, http.StatusTooManyRequests, "rate_limit_error",
			fmt.Sprintf("more than %d requests in flight", s.cfg.MaxInflight))
		return
	}
	defer s.inflight.Add(-1)
	total := 0
	for _, n := range inputs {
		total += n
	}
	start := time.Now()
	st := newStream(EmbedRequest(s.nextID.Add(1), inputs))
	s.submit(st)
	var chunks []chunk
	for {
		if !s.wait(r, st) {
			return
		}
		var closed bool
		chunks, closed = s.take(st, chunks)
		for _, c := range chunks {
			if c.finish != FinishNone {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write(s.embedAnswer(p, st.req.ID, inputs, total, time.Since(start)))
				return
			}
		}
		if closed {
			writeError(w, http.StatusServiceUnavailable, "server_error", "server shutting down")
			return
		}
	}
}

// embedAnswer is the answer's body in protocol p.
func (s *Server) embedAnswer(p embedProto, id uint64, inputs []int, total int, took time.Duration) []byte {
	dims := s.cfg.EmbedDims
	buf := make([]byte, 0, 64+len(inputs)*(dims*8+64))
	model, _ := json.Marshal(s.cfg.ServedModel)
	switch p {
	case embedOpenAI:
		buf = append(buf, `{"object":"list","data":[`...)
	case embedOllama:
		buf = append(buf, `{"model":`...)
		buf = append(buf, model...)
		buf = append(buf, `,"embeddings":[`...)
	case embedTEI:
		buf = append(buf, '[')
	}
	for i := range inputs {
		if i > 0 {
			buf = append(buf, ',')
		}
		if p == embedOpenAI {
			buf = fmt.Appendf(buf, `{"object":"embedding","index":%d,"embedding":`, i)
		}
		buf = append(buf, '[')
		for d := range dims {
			if d > 0 {
				buf = append(buf, ',')
			}
			// A seeded value in (−1, 1), five decimals.
			h := splitmix(s.cfg.Engine.Seed ^ splitmix(id<<20^uint64(i)<<10^uint64(d)))
			buf = strconv.AppendFloat(buf, float64(int64(h%200000)-100000)/100000, 'f', -1, 64)
		}
		buf = append(buf, ']')
		if p == embedOpenAI {
			buf = append(buf, '}')
		}
	}
	switch p {
	case embedOpenAI:
		buf = append(buf, `],"model":`...)
		buf = append(buf, model...)
		buf = fmt.Appendf(buf, `,"usage":{"prompt_tokens":%d,"total_tokens":%d}}`, total, total)
	case embedOllama:
		buf = fmt.Appendf(buf, `],"total_duration":%d,"load_duration":0,"prompt_eval_count":%d}`, took.Nanoseconds(), total)
	case embedTEI:
		buf = append(buf, ']')
	}
	return append(buf, '\n')
}
