package probe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/tokbench/tokbench/api"
)

// Model is one entry of an OpenAI-style model list.
type Model struct {
	ID      string
	OwnedBy string // "vllm" for vLLM
	// MaxModelLen is vLLM's max_model_len: 0 where the server does not say.
	MaxModelLen int
}

// UnreachableError is a server that gave no HTTP answer at all: the
// connection was refused, the name did not resolve, the TLS handshake or
// the connection failed. Class is the failure class ("connection_refused",
// "dns", "tls", "timeout", …).
type UnreachableError struct {
	URL   string // redacted
	Class api.Class
	Err   error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cannot reach %s: %v", e.URL, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// ListModels reads the model list of the OpenAI-style API at base (the URL
// as the SDK takes it: /v1 or not, a query string such as Azure's
// api-version kept after the path). header goes with the request. A server
// that does not answer is an *UnreachableError; an answer other than 200
// says its status and the start of its message.
func ListModels(ctx context.Context, c *http.Client, base string, header http.Header) ([]Model, error) {
	endpoint, err := (api.OpenAI{Chat: true}).Endpoint(base)
	if err != nil {
		return nil, err
	}
	if u, err := url.Parse(endpoint); err == nil {
		u.Path = strings.TrimSuffix(u.Path, "/chat/completions") + "/models"
		endpoint = u.String()
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := get(ctx, c, endpoint, header)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL is said once, redacted
		}
		return nil, &UnreachableError{URL: api.RedactURL(base), Class: api.ClassifyTransport(ctx, err), Err: err}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: HTTP %d: %s", api.RedactURL(endpoint), resp.StatusCode, api.ErrorMessage(body))
	}
	var list struct {
		Data []struct {
			ID          string `json:"id"`
			MaxModelLen int    `json:"max_model_len"`
			OwnedBy     string `json:"owned_by"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &list); err != nil || len(list.Data) == 0 || list.Data[0].ID == "" {
		return nil, fmt.Errorf("GET %s: no model listed", api.RedactURL(endpoint))
	}
	out := make([]Model, len(list.Data))
	for i, m := range list.Data {
		out[i] = Model{ID: m.ID, OwnedBy: m.OwnedBy, MaxModelLen: m.MaxModelLen}
	}
	return out, nil
}

// get GETs endpoint with header.
func get(ctx context.Context, c *http.Client, endpoint string, header http.Header) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint, nil)
	if err != nil {
		return nil, err
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	return c.Do(req)
}
