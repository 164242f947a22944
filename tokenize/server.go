package tokenize

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// Server counts tokens with an inference engine's own /tokenize endpoint,
// so prompt lengths are exact for the model being served whatever its
// tokenizer. One request body serves every engine: vLLM and SGLang read
// "model" and "prompt" and answer {"count": n, "tokens": […]}; llama.cpp
// reads "content" and answers {"tokens": […]}. Special tokens (BOS) are not
// added, so the count is of the text alone.
//
// A Server is safe for concurrent use.
type Server struct {
	// BaseURL is the URL the benchmark targets; a trailing /v1 is dropped,
	// since the engines serve /tokenize at the root.
	BaseURL string
	Model   string
	HTTP    *http.Client
	Header  http.Header
}

// ErrNoEndpoint is the error (wrapped) of a server that has no /tokenize:
// it answered 404, 405 or 501.
var ErrNoEndpoint = errors.New("the server has no tokenize endpoint")

// Endpoint is the /tokenize URL for BaseURL; a query string (Azure's
// api-version) stays a query string.
func (s *Server) Endpoint() string {
	u, err := url.Parse(s.BaseURL)
	if err != nil {
		return strings.TrimSuffix(strings.TrimRight(s.BaseURL, "/"), "/v1") + "/tokenize"
	}
	u.Path = strings.TrimSuffix(strings.TrimRight(u.Path, "/"), "/v1") + "/tokenize"
	u.RawPath = ""
	return u.String()
}

// CountContext returns the number of tokens the server makes of text.
func (s *Server) CountContext(ctx context.Context, text string) (int, error) {
	body, _ := json.Marshal(map[string]any{
		"model": s.Model, "prompt": text, "add_special_tokens": false,
		"content": text, "add_special": false,
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.Endpoint(), bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	for k, vs := range s.Header {
		req.Header[k] = vs
	}
	req.Header.Set("Content-Type", "application/json")
	c := s.HTTP
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, fmt.Errorf("POST /tokenize: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return 0, fmt.Errorf("POST /tokenize: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		msg := strings.TrimSpace(string(data))
		if len(msg) > 200 {
			msg = msg[:200] + "…"
		}
		switch resp.StatusCode {
		case http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusNotImplemented:
			return 0, fmt.Errorf("POST /tokenize: HTTP %d: %s: %w; use a local --tokenizer", resp.StatusCode, msg, ErrNoEndpoint)
		}
		return 0, fmt.Errorf("POST /tokenize: HTTP %d: %s", resp.StatusCode, msg)
	}
	var out struct {
		Count  *int              `json:"count"`
		Tokens []json.RawMessage `json:"tokens"`
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return 0, fmt.Errorf("POST /tokenize: answer is not JSON: %w", err)
	}
	switch {
	case out.Count != nil:
		return *out.Count, nil
	case out.Tokens != nil:
		return len(out.Tokens), nil
	}
	return 0, fmt.Errorf(`POST /tokenize: answer has neither "count" nor "tokens"`)
}
