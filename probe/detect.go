// Package probe asks a server what it is and what it measured: which
// protocol it speaks, its engine, version, models and their facts
// (Detect, ListModels), and its own latency histograms from /metrics
// (ScrapeMetrics, ParseMetrics for vLLM, SGLang, TGI and llama.cpp). It
// sits above package api, whose requests carry the measurement.
package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tokbench/tokbench/api"
)

// Detection is what probing a server found: the protocol to speak (an
// --api spelling), the engine and its version when it says, the models it
// serves, the context limit, and facts about the model (size, quantization,
// path) where the engine exposes them.
type Detection struct {
	API        string   `json:"api"`
	Engine     string   `json:"engine,omitempty"`
	Version    string   `json:"version,omitempty"`
	Models     []string `json:"models,omitempty"`
	MaxContext int      `json:"max_context,omitempty"`
	// Facts are model facts keyed like run.json meta: model_parameter_size,
	// model_quantization, model_context_length, model_path, model_params,
	// model_size_bytes, model_family, speculative (llama.cpp decoding with a
	// draft model), server_slots (llama.cpp's sequences at once).
	Facts map[string]string `json:"facts,omitempty"`
	// Tried lists every probe and its outcome, e.g. "GET /props: HTTP 404".
	Tried []string `json:"tried"`
}

// simEngine is how tokbench's simulator names itself (owned_by, build_info,
// version). It answers llama.cpp's /props and TGI's /info too, but is an
// OpenAI-compatible server first: probing goes on to /v1/models.
const simEngine = "tokbench-sim"

// ErrNotDetected is returned (wrapped) when no known API answered.
var ErrNotDetected = errors.New("no known API answered")

// Detect probes base (the user's URL, with or without /v1) and picks the
// protocol: Ollama (/api/version and /api/tags, then /api/show for the first
// model), llama.cpp (/props), TGI (/info), then any OpenAI-compatible server
// (/v1/models; vLLM's max_model_len, /version). header goes with every probe
// (API keys). A server that answers /health alone, or nothing, is an error
// wrapping ErrNotDetected whose message lists what was tried.
//
// The model facts are model's, when the server lists it (the one to be
// benchmarked); else the first listed model's.
func Detect(ctx context.Context, c *http.Client, base string, header http.Header, model string) (Detection, error) {
	u, err := url.Parse(strings.TrimSpace(base))
	if err != nil || u.Scheme == "" || u.Host == "" {
		return Detection{}, fmt.Errorf("invalid URL %q: want http(s)://host[:port][/v1]", api.RedactURL(base))
	}
	// The query (Azure's ?api-version=) goes after every probe's path.
	query := u.RawQuery
	u.RawQuery, u.Fragment = "", ""
	u.Path = strings.TrimSuffix(strings.TrimRight(u.Path, "/"), "/v1")
	p := &prober{c: c, root: u.String(), query: query, header: header, model: model}
	d := Detection{Facts: map[string]string{}}

	var ver struct {
		Version string `json:"version"`
	}
	var tags struct {
		Models []struct {
			Name string `json:"name"`
		} `json:"models"`
	}
	if p.get(ctx, "/api/version", &ver) && ver.Version != "" && p.get(ctx, "/api/tags", &tags) {
		d.API, d.Engine, d.Version = "ollama-chat", "ollama", ver.Version
		for _, m := range tags.Models {
			d.Models = append(d.Models, m.Name)
		}
		if len(d.Models) > 0 {
			p.ollamaShow(ctx, d.Models[pick(d.Models, model)], &d)
		}
		return p.done(d), nil
	}

	var props struct {
		DefaultGenerationSettings *struct {
			NCtx        int  `json:"n_ctx"`
			Speculative bool `json:"speculative"`
		} `json:"default_generation_settings"`
		ModelPath  string `json:"model_path"`
		BuildInfo  string `json:"build_info"`
		TotalSlots int    `json:"total_slots"`
		// MediaMarker stands for each image or sound in a multimodal
		// prompt (random per instance in newer builds).
		MediaMarker string `json:"media_marker"`
		// Modalities are what the model reads besides text (libmtmd
		// servers: {"vision": …, "audio": …}).
		Modalities json.RawMessage `json:"modalities"`
	}
	if p.get(ctx, "/props", &props) && props.DefaultGenerationSettings != nil && props.BuildInfo != simEngine {
		d.API, d.Engine, d.Version = "llamacpp", "llama.cpp", props.BuildInfo
		d.MaxContext = props.DefaultGenerationSettings.NCtx
		setFact(d.Facts, "model_path", props.ModelPath)
		setFact(d.Facts, "model_context_length", itoa(d.MaxContext))
		setFact(d.Facts, "server_slots", itoa(props.TotalSlots))
		setFact(d.Facts, "media_marker", props.MediaMarker)
		setFact(d.Facts, "media_form", llamaCppMediaForm(props.MediaMarker, props.Modalities))
		if props.DefaultGenerationSettings.Speculative {
			setFact(d.Facts, "speculative", "true")
		}
		p.openaiModels(ctx, &d)
		return p.done(d), nil
	}

	var info struct {
		ModelID        string `json:"model_id"`
		Version        string `json:"version"`
		MaxTotalTokens int    `json:"max_total_tokens"`
		ModelDtype     string `json:"model_dtype"`
		Router         string `json:"router"`
	}
	if p.get(ctx, "/info", &info) && info.ModelID != "" && info.Version != simEngine {
		d.API, d.Engine, d.Version = "tgi", "tgi", info.Version
		d.Models = []string{info.ModelID}
		d.MaxContext = info.MaxTotalTokens
		setFact(d.Facts, "model_context_length", itoa(info.MaxTotalTokens))
		setFact(d.Facts, "model_dtype", info.ModelDtype)
		return p.done(d), nil
	}

	if p.openaiModels(ctx, &d) {
		d.API = "openai-chat"
		if d.Engine == "vllm" {
			var v struct {
				Version string `json:"version"`
			}
			if p.get(ctx, "/version", &v) {
				d.Version = v.Version
			}
		}
		return p.done(d), nil
	}

	p.get(ctx, "/health", nil)
	if !p.answered {
		return Detection{Tried: p.tried}, &UnreachableError{URL: api.RedactURL(base), Class: p.class, Err: p.lastErr}
	}
	return Detection{Tried: p.tried}, fmt.Errorf("%w at %s (tried %s)", ErrNotDetected, api.RedactURL(p.root), strings.Join(p.tried, "; "))
}

type prober struct {
	c      *http.Client
	root   string
	query  string // the URL's raw query, kept on every probe
	header http.Header
	model  string // the model whose facts are wanted ("": the first listed)
	tried  []string
	// answered is set once any probe got an HTTP answer; until then class
	// and lastErr are the last probe's transport failure.
	answered bool
	class    api.Class
	lastErr  error
}

func (p *prober) done(d Detection) Detection {
	d.Tried = p.tried
	if len(d.Facts) == 0 {
		d.Facts = nil
	}
	return d
}

// get fetches root+path (GET, or POST with a JSON body via post) into v and
// reports whether it answered 200 with JSON that fits v.
func (p *prober) get(ctx context.Context, path string, v any) bool {
	return p.do(ctx, http.MethodGet, path, nil, v)
}

func (p *prober) do(ctx context.Context, method, path string, body any, v any) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	target := p.root + path
	if p.query != "" {
		target += "?" + p.query
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		p.tried = append(p.tried, fmt.Sprintf("%s %s: %v", method, path, err))
		return false
	}
	for k, vs := range p.header {
		req.Header[k] = vs
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := p.c.Do(req)
	if err != nil {
		p.class = api.ClassifyTransport(ctx, err)
		p.lastErr = err
		if ue, ok := errors.AsType[*url.Error](err); ok {
			p.lastErr = ue.Err
		}
		p.tried = append(p.tried, fmt.Sprintf("%s %s: %s", method, path, p.class))
		return false
	}
	p.answered = true
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if resp.StatusCode != http.StatusOK {
		p.tried = append(p.tried, fmt.Sprintf("%s %s: HTTP %d", method, path, resp.StatusCode))
		return false
	}
	if v != nil {
		if err := json.Unmarshal(raw, v); err != nil {
			p.tried = append(p.tried, fmt.Sprintf("%s %s: not JSON", method, path))
			return false
		}
	}
	p.tried = append(p.tried, fmt.Sprintf("%s %s: ok", method, path))
	return true
}

// openaiModels reads /v1/models into d: ids, the engine (owned_by), vLLM's
// max_model_len and llama.cpp's meta.
func (p *prober) openaiModels(ctx context.Context, d *Detection) bool {
	var list struct {
		Data []struct {
			ID          string `json:"id"`
			OwnedBy     string `json:"owned_by"`
			MaxModelLen int    `json:"max_model_len"`
			Meta        *struct {
				NCtxTrain int   `json:"n_ctx_train"`
				NParams   int64 `json:"n_params"`
				Size      int64 `json:"size"`
			} `json:"meta"`
		} `json:"data"`
	}
	if !p.get(ctx, "/v1/models", &list) || len(list.Data) == 0 {
		return false
	}
	for _, m := range list.Data {
		d.Models = append(d.Models, m.ID)
	}
	m := list.Data[pick(d.Models, p.model)]
	if d.Engine == "" {
		d.Engine = m.OwnedBy
	}
	if m.MaxModelLen > 0 {
		if d.MaxContext == 0 {
			d.MaxContext = m.MaxModelLen
		}
		setFact(d.Facts, "model_context_length", itoa(m.MaxModelLen))
	}
	if mt := m.Meta; mt != nil {
		setFact(d.Facts, "model_params", strconv.FormatInt(mt.NParams, 10))
		setFact(d.Facts, "model_size_bytes", strconv.FormatInt(mt.Size, 10))
		setFact(d.Facts, "model_context_train", itoa(mt.NCtxTrain))
	}
	return true
}

// ollamaShow reads /api/show for model into d's facts.
func (p *prober) ollamaShow(ctx context.Context, model string, d *Detection) {
	var show struct {
		Details struct {
			Family            string `json:"family"`
			ParameterSize     string `json:"parameter_size"`
			QuantizationLevel string `json:"quantization_level"`
			Format            string `json:"format"`
		} `json:"details"`
		ModelInfo map[string]any `json:"model_info"`
	}
	if !p.do(ctx, http.MethodPost, "/api/show", map[string]any{"model": model}, &show) {
		return
	}
	setFact(d.Facts, "model_family", show.Details.Family)
	setFact(d.Facts, "model_parameter_size", show.Details.ParameterSize)
	setFact(d.Facts, "model_quantization", show.Details.QuantizationLevel)
	setFact(d.Facts, "model_format", show.Details.Format)
	keys := make([]string, 0, len(show.ModelInfo))
	for k := range show.ModelInfo {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if strings.HasSuffix(k, ".context_length") {
			if n, ok := show.ModelInfo[k].(float64); ok && n > 0 {
				d.MaxContext = int(n)
				setFact(d.Facts, "model_context_length", itoa(int(n)))
			}
		}
	}
	if n, ok := show.ModelInfo["general.parameter_count"].(float64); ok && n > 0 {
		setFact(d.Facts, "model_params", strconv.FormatInt(int64(n), 10))
	}
}

func setFact(m map[string]string, k, v string) {
	if v != "" && v != "0" {
		m[k] = v
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// pick is the index of model among listed names (Ollama's "name:latest"
// matching a bare "name"), or 0: the first listed.
func pick(listed []string, model string) int {
	if model == "" {
		return 0
	}
	for i, m := range listed {
		if m == model || strings.TrimSuffix(m, ":latest") == strings.TrimSuffix(model, ":latest") {
			return i
		}
	}
	return 0
}

// llamaCppMediaForm is the form in which a llama.cpp server's /completion
// takes media, from its GET /props: a server built on libmtmd names its
// media_marker or modalities and takes multimodal_data; one without
// either is from before (a LLaVA-era server, llamafile's) and takes
// image_data, or no media at all.
func llamaCppMediaForm(marker string, modalities json.RawMessage) string {
	if m := bytes.TrimSpace(modalities); marker != "" || (len(m) > 0 && string(m) != "null") {
		return api.LlamaCppMultimodalData
	}
	return api.LlamaCppImageData
}
