// Package fakellama is a scripted llama.cpp server (llama-server) for
// tests, whose timing is known exactly because it is made of a few
// numbers: Slots sequences at once, one loop that runs a step at a time,
// each step a fixed Step plus PrefillPerToken for every prompt token it
// takes in. As llama.cpp does, a request that finds every slot busy waits
// for one; one that finds a slot free still waits for the step under way
// to end; the prompts of every request admitted at a step are prefilled
// together in that step, so a request's first token waits for the others'
// prefill too (its own prompt_ms counts the whole step, as llama.cpp's
// t_prompt_processing does).
//
// It answers what llama-server answers with --metrics --slots, shaped as
// the captures in /work/shared/captures: /v1/chat/completions and
// /v1/completions streamed with usage and timings in the finish chunk,
// /v1/models listing the GGUF path, /props (total_slots, model_path,
// n_ctx), /slots, /metrics (llamacpp:* counters), /health. It echoes any
// model name a request gives, as llama-server does.
//
// A Server is safe for concurrent use; Close stops its loop.
package fakellama

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// Config is the server's script. The zero value is 4 slots, 10 ms steps,
// no prefill cost, 16 output tokens and the capture's model path.
type Config struct {
	Slots           int
	Step            time.Duration // one step of the loop: a token for every busy slot
	PrefillPerToken time.Duration // added to a step per prompt token it takes in
	Tokens          int           // output tokens of an answer (0: the request's max_tokens, else 16)
	ModelPath       string        // the GGUF file /props and /v1/models name
	NCtx            int           // n_ctx per slot (default 4096)
	// TemplateTokens are the chat template's tokens, the same opening of
	// every prompt (counted in prompt_tokens).
	TemplateTokens int
	// PromptCache serves the longest prefix a prompt shares with an
	// earlier one from the cache, as llama.cpp's slots keep their last
	// prompt: those tokens are not prefilled, and timings say so
	// (prompt_n the tokens evaluated, cache_n those reused).
	PromptCache bool
}

// Server is a running fake on loopback.
type Server struct {
	*httptest.Server
	cfg Config

	mu       sync.Mutex
	wake     chan struct{}
	stop     chan struct{}
	loopDone chan struct{}
	queue    []*seq // waiting for a slot
	active   []*seq // in a slot
	// the /metrics counters
	promptTokens, predicted int
	promptSec, predictedSec float64
	decodes, busySum        int
	requests                int
	models                  []string   // the model each generation request named
	prompts                 [][]string // earlier prompts, for the prompt cache
}

// seq is one request in the server.
type seq struct {
	prompt, want, done int         // prompt: the tokens to prefill (less those cached)
	total, cached      int         // the prompt's tokens, and those from the cache
	tokens             chan string // closed after the last token
	started            time.Time   // its prefill step's start
	first              time.Time
	promptMs           float64
	predictedMs        float64
	prefilled          bool
}

// New starts a fake llama-server on loopback.
func New(cfg Config) *Server {
	if cfg.Slots <= 0 {
		cfg.Slots = 4
	}
	if cfg.Step <= 0 {
		cfg.Step = 10 * time.Millisecond
	}
	if cfg.ModelPath == "" {
		cfg.ModelPath = "model/rand-1024x8.gguf"
	}
	if cfg.NCtx <= 0 {
		cfg.NCtx = 4096
	}
	s := &Server{cfg: cfg, wake: make(chan struct{}, 1), stop: make(chan struct{}), loopDone: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) { s.complete(w, r, protoChat) })
	mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) { s.complete(w, r, protoCompletions) })
	mux.HandleFunc("POST /completion", func(w http.ResponseWriter, r *http.Request) { s.complete(w, r, protoNative) })
	mux.HandleFunc("GET /v1/models", s.listModels)
	mux.HandleFunc("GET /models", s.listModels)
	mux.HandleFunc("GET /props", s.props)
	mux.HandleFunc("GET /slots", s.slots)
	mux.HandleFunc("GET /metrics", s.metrics)
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, `{"status":"ok"}`) })
	s.Server = httptest.NewServer(mux)
	go s.loop()
	return s
}

// Close stops the loop and the HTTP server.
func (s *Server) Close() {
	s.mu.Lock()
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	s.mu.Unlock()
	<-s.loopDone
	s.Server.Close()
}

// Models returns the model named by each generation request so far.
func (s *Server) Models() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.models...)
}

// Steps returns how many steps the loop ran and the mean busy slots per
// step (llamacpp:n_decode_total and n_busy_slots_per_decode).
func (s *Server) Steps() (n int, busy float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.decodes == 0 {
		return 0, 0
	}
	return s.decodes, float64(s.busySum) / float64(s.decodes)
}

// loop is llama-server's one loop: admit waiting requests to free slots,
// run a step (their prefill and a token for every other busy slot), hand
// out the step's tokens at its end.
func (s *Server) loop() {
	defer close(s.loopDone)
	for {
		s.mu.Lock()
		for len(s.queue) > 0 && len(s.active) < s.cfg.Slots {
			s.active = append(s.active, s.queue[0])
			s.queue = s.queue[1:]
		}
		if len(s.active) == 0 {
			s.mu.Unlock()
			select {
			case <-s.stop:
				s.drain()
				return
			case <-s.wake:
			}
			continue
		}
		start := time.Now()
		d, prompt := s.cfg.Step, 0
		for _, q := range s.active {
			if !q.prefilled {
				prompt += q.prompt
				q.started = start
			}
		}
		d += time.Duration(prompt) * s.cfg.PrefillPerToken
		busy := len(s.active)
		s.mu.Unlock()

		select {
		case <-s.stop:
			s.drain()
			return
		case <-time.After(time.Until(start.Add(d))):
		}

		now := time.Now()
		s.mu.Lock()
		s.decodes++
		s.busySum += busy
		kept := s.active[:0]
		for _, q := range s.active {
			if !q.prefilled {
				q.prefilled, q.first = true, now
				q.promptMs = ms(now.Sub(q.started))
				s.promptTokens += q.prompt
				s.promptSec += now.Sub(q.started).Seconds()
			}
			q.done++
			q.tokens <- word(q.done)
			if q.done < q.want {
				kept = append(kept, q)
				continue
			}
			q.predictedMs = ms(now.Sub(q.first))
			s.predicted += q.want
			s.predictedSec += now.Sub(q.first).Seconds()
			close(q.tokens)
		}
		s.active = kept
		s.mu.Unlock()
	}
}

// drain ends every request in the server, once the loop stopped.
func (s *Server) drain() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, q := range append(s.active, s.queue...) {
		close(q.tokens)
	}
	s.active, s.queue = nil, nil
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

// word is output token i: each is one token under cl100k_base.
func word(i int) string {
	words := []string{" the", " time", " water", " people", " world", " house", " light", " music"}
	return words[(i-1)%len(words)]
}

// PromptTokens is the fake's count of a prompt: one token per
// whitespace-separated word (the chat template's few tokens left out).
func PromptTokens(text string) int { return len(strings.Fields(text)) }

// The protocols a generation request comes in.
const (
	protoChat        = iota // /v1/chat/completions
	protoCompletions        // /v1/completions
	protoNative             // llama.cpp's /completion
)

type request struct {
	Model     string `json:"model"`
	MaxTokens int    `json:"max_tokens"`
	NPredict  int    `json:"n_predict"`
	Prompt    string `json:"prompt"`
	Messages  []struct {
		Content any `json:"content"`
	} `json:"messages"`
}

func (s *Server) complete(w http.ResponseWriter, r *http.Request, proto int) {
	chat := proto == protoChat
	var req request
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"error":{"code":400,"message":"bad json","type":"invalid_request_error"}}`, http.StatusBadRequest)
		return
	}
	text := req.Prompt
	for _, m := range req.Messages {
		if c, ok := m.Content.(string); ok {
			text += " " + c
		}
	}
	want := s.cfg.Tokens
	if want <= 0 {
		want = max(req.MaxTokens, req.NPredict)
	}
	if want <= 0 {
		want = 16
	}
	words := strings.Fields(text)
	for i := range s.cfg.TemplateTokens {
		words = append([]string{fmt.Sprintf("<t%d>", s.cfg.TemplateTokens-1-i)}, words...)
	}
	q := &seq{total: max(len(words), 1), want: want, tokens: make(chan string, want)}
	s.mu.Lock()
	if s.cfg.PromptCache {
		for _, p := range s.prompts {
			n := 0
			for n < len(p) && n < len(words)-1 && p[n] == words[n] {
				n++
			}
			q.cached = max(q.cached, n)
		}
		s.prompts = append(s.prompts, words)
	}
	q.prompt = q.total - q.cached
	s.requests++
	s.models = append(s.models, req.Model)
	n := s.requests
	select {
	case <-s.stop:
		s.mu.Unlock()
		http.Error(w, "stopping", http.StatusServiceUnavailable)
		return
	default:
	}
	s.queue = append(s.queue, q)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}

	w.Header().Set("Content-Type", "text/event-stream")
	fl, _ := w.(http.Flusher)
	id := fmt.Sprintf("chatcmpl-fake%d", n)
	object := "chat.completion.chunk"
	if !chat {
		object = "text_completion"
	}
	if proto == protoNative {
		req.Model = cmp.Or(req.Model, "gpt-3.5-turbo") // what llama-server names when the request does not
	}
	chunk := func(delta, finish string, tail string, got int) {
		if proto == protoNative {
			if finish == "" {
				fmt.Fprintf(w, `data: {"index":0,"content":%q,"tokens":[1],"stop":false,"id_slot":-1,"tokens_predicted":%d,"tokens_evaluated":%d}`+"\n\n", delta, got, q.total)
			} else {
				fmt.Fprintf(w, `data: {"index":0,"content":"","tokens":[],"id_slot":0,"stop":true,"model":%q,"tokens_predicted":%d,"tokens_evaluated":%d,"stop_type":"limit","stopping_word":"","tokens_cached":%d%s}`+"\n\n",
					req.Model, want, q.total, want+q.total, tail)
			}
			if fl != nil {
				fl.Flush()
			}
			return
		}
		fin := "null"
		if finish != "" {
			fin = fmt.Sprintf("%q", finish)
		}
		var choice string
		switch {
		case chat && finish != "":
			choice = fmt.Sprintf(`{"finish_reason":%s,"index":0,"delta":{}}`, fin)
		case chat:
			choice = fmt.Sprintf(`{"finish_reason":null,"index":0,"delta":{"content":%q}}`, delta)
		default:
			choice = fmt.Sprintf(`{"text":%q,"index":0,"logprobs":null,"finish_reason":%s}`, delta, fin)
		}
		fmt.Fprintf(w, `data: {"choices":[%s],"created":1795976133,"id":%q,"model":%q,"system_fingerprint":"b0-fake","object":%q%s}`+"\n\n",
			choice, id, req.Model, object, tail)
		if fl != nil {
			fl.Flush()
		}
	}
	got := 0
	for t := range q.tokens {
		got++
		chunk(t, "", "", got)
	}
	if got < want {
		return // stopped
	}
	s.mu.Lock()
	promptMs, predictedMs := q.promptMs, q.predictedMs
	s.mu.Unlock()
	perSec := 0.0
	if predictedMs > 0 {
		perSec = float64(want) / predictedMs * 1000
	}
	usage := fmt.Sprintf(`,"usage":{"completion_tokens":%d,"prompt_tokens":%d,"total_tokens":%d}`, want, q.total, want+q.total)
	if proto == protoNative {
		usage = ""
	}
	tail := usage + fmt.Sprintf(`,"timings":{"cache_n":%d,"prompt_n":%d,"prompt_ms":%.3f,"prompt_per_token_ms":%.4f,"prompt_per_second":%.3f,"predicted_n":%d,"predicted_ms":%.3f,"predicted_per_token_ms":%.4f,"predicted_per_second":%.3f}`,
		q.cached, q.prompt, promptMs, promptMs/float64(q.prompt), float64(q.prompt)/promptMs*1000,
		want, predictedMs, predictedMs/float64(want), perSec)
	chunk("", "length", tail, got)
	if proto != protoNative {
		fmt.Fprint(w, "data: [DONE]\n\n")
	}
	if fl != nil {
		fl.Flush()
	}
}

func (s *Server) listModels(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"object":"list","data":[{"id":%q,"object":"model","created":1795975890,"owned_by":"llamacpp","meta":{"vocab_type":1,"n_vocab":32000,"n_ctx_train":4096,"n_embd":1024,"n_params":155730944,"size":311496704}}]}`, s.cfg.ModelPath)
}

func (s *Server) props(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"default_generation_settings":{"id":0,"id_task":-1,"n_ctx":%d,"speculative":false,"is_processing":false,"params":{"n_predict":-1}},"total_slots":%d,"model_path":%q,"build_info":"b4759-fake"}`,
		s.cfg.NCtx, s.cfg.Slots, s.cfg.ModelPath)
}

func (s *Server) slots(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	busy := len(s.active)
	s.mu.Unlock()
	parts := make([]string, s.cfg.Slots)
	for i := range parts {
		parts[i] = fmt.Sprintf(`{"id":%d,"n_ctx":%d,"is_processing":%t}`, i, s.cfg.NCtx, i < busy)
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprint(w, "["+strings.Join(parts, ",")+"]")
}

func (s *Server) metrics(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	busyPer := 0.0
	if s.decodes > 0 {
		busyPer = float64(s.busySum) / float64(s.decodes)
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	for _, m := range []struct {
		name, kind string
		v          float64
	}{
		{"prompt_tokens_total", "counter", float64(s.promptTokens)},
		{"prompt_seconds_total", "counter", s.promptSec},
		{"tokens_predicted_total", "counter", float64(s.predicted)},
		{"tokens_predicted_seconds_total", "counter", s.predictedSec},
		{"n_decode_total", "counter", float64(s.decodes)},
		{"n_busy_slots_per_decode", "counter", busyPer},
		{"requests_processing", "gauge", float64(len(s.active))},
		{"requests_deferred", "gauge", float64(len(s.queue))},
	} {
		fmt.Fprintf(w, "# HELP llamacpp:%s %s\n# TYPE llamacpp:%s %s\nllamacpp:%s %g\n", m.name, m.name, m.name, m.kind, m.name, m.v)
	}
}
