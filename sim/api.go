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
	"sync"
	"time"
)

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) { s.complete(w, r, true) })
	mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) { s.complete(w, r, false) })
	mux.HandleFunc("GET /v1/models", s.models)
	s.nativeRoutes(mux)
	s.embedRoutes(mux)
	mux.Handle("GET /metrics", s.met.handler())
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found_error", fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path))
	})
	return mux
}

// completionRequest holds the fields of both OpenAI request shapes that the
// simulator honours; the rest are accepted and ignored.
type completionRequest struct {
	Model               string          `json:"model"`
	Messages            []chatMessage   `json:"messages"`
	Prompt              json.RawMessage `json:"prompt"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	MinTokens           int             `json:"min_tokens"`
	IgnoreEOS           bool            `json:"ignore_eos"`
	Stream              bool            `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
		// ContinuousUsageStats puts the running usage in every token
		// chunk, as vLLM does when asked.
		ContinuousUsageStats bool `json:"continuous_usage_stats"`
	} `json:"stream_options"`
	N *int `json:"n"`
	// Options carries Ollama's num_predict (its max_tokens).
	Options *struct {
		NumPredict *int `json:"num_predict"`
	} `json:"options"`
	// NPredict is llama.cpp's max_tokens (-1: the server's default).
	NPredict *int `json:"n_predict"`
	// Inputs and Parameters.MaxNewTokens are TGI's prompt and max_tokens.
	Inputs     json.RawMessage `json:"inputs"`
	Parameters *struct {
		MaxNewTokens *int `json:"max_new_tokens"`
	} `json:"parameters"`
	// Tools are the chat APIs' tool definitions (tools.go); toolNames
	// their names.
	Tools     json.RawMessage `json:"tools"`
	toolNames []string
	// Images are Ollama's /api/generate images (base64).
	Images []string `json:"images"`

	media Media // what the request's images and sounds cost
}

type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	// Images are Ollama's /api/chat images (base64).
	Images []string `json:"images"`
}

// apiError is an OpenAI-style error answer.
type apiError struct {
	status int
	typ    string
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func badRequest(format string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", msg: fmt.Sprintf(format, args...)}
}

func writeError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"error": map[string]any{"message": msg, "type": typ, "code": status},
	})
}

// countText counts the tokens of a text field that is a string or an array
// of content parts ({"type": "text", "text": …}).
func countText(raw json.RawMessage, field string, m *Media) (int, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return 0, nil
	}
	var str string
	if err := json.Unmarshal(raw, &str); err == nil {
		return PromptTokens(str), nil
	}
	return countParts(raw, field, m)
}

// promptTokens applies the counting rule: words of the text, plus for chat
// 3 tokens per message and 3 for the reply.
func (req *completionRequest) promptTokens(chat bool) (int, error) {
	if chat {
		if len(req.Messages) == 0 {
			return 0, badRequest("messages: must not be empty")
		}
		n := chatTokensPerReply
		for i, m := range req.Messages {
			field := fmt.Sprintf("messages[%d]", i)
			k, err := countText(m.Content, field+".content", &req.media)
			if err != nil {
				return 0, err
			}
			if err := req.media.addAll(m.Images, field+".images"); err != nil {
				return 0, err
			}
			n += k + chatTokensPerMessage
		}
		return n, nil
	}
	raw := bytes.TrimSpace(req.Prompt)
	if len(raw) == 0 || string(raw) == "null" {
		return 0, badRequest("prompt: required")
	}
	if err := req.media.addAll(req.Images, "images"); err != nil {
		return 0, err
	}
	if raw[0] == '{' {
		return req.media.llamaPrompt(raw)
	}
	var str string
	if err := json.Unmarshal(raw, &str); err == nil {
		return max(PromptTokens(str), 1), nil
	}
	var strs []string
	if err := json.Unmarshal(raw, &strs); err == nil {
		if len(strs) != 1 {
			return 0, badRequest("prompt: the simulator serves one prompt per request, got %d", len(strs))
		}
		return max(PromptTokens(strs[0]), 1), nil
	}
	var ids []int
	if err := json.Unmarshal(raw, &ids); err == nil && len(ids) > 0 {
		return len(ids), nil
	}
	return 0, badRequest("prompt: want a string, one string in an array, or token ids")
}

// parse reads and validates a completion request.
func (s *Server) parse(w http.ResponseWriter, r *http.Request, chat bool) (*completionRequest, Request, error) {
	var req completionRequest
	// The body has BodyTimeout to arrive; the deadline is lifted after it,
	// as a stream's answer may take far longer.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(s.cfg.BodyTimeout))
	body := http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
	err := json.NewDecoder(body).Decode(&req)
	if err == nil {
		// The rest of the declared body (white space, or nothing sent)
		// under the same deadline: net/http would read it after the
		// answer's head with none.
		_, err = io.Copy(io.Discard, body)
	}
	_ = rc.SetReadDeadline(time.Time{})
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return nil, Request{}, &apiError{status: http.StatusRequestEntityTooLarge, typ: "invalid_request_error",
				msg: fmt.Sprintf("request body larger than %d bytes", s.cfg.MaxBodyBytes)}
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			// Closing the connection after the answer: net/http would
			// otherwise wait for the rest of the body, with no deadline.
			w.Header().Set("Connection", "close")
			return nil, Request{}, &apiError{status: http.StatusRequestTimeout, typ: "invalid_request_error",
				msg: fmt.Sprintf("request body not received within %v", s.cfg.BodyTimeout)}
		}
		return nil, Request{}, badRequest("request body is not valid JSON: %v", err)
	}
	if len(req.Prompt) == 0 {
		req.Prompt = req.Inputs
	}
	if req.N != nil && *req.N != 1 {
		return nil, Request{}, badRequest("n: the simulator serves n=1 only")
	}
	prompt, err := req.promptTokens(chat)
	if err != nil {
		return nil, Request{}, err
	}
	if chat {
		names, tokens, err := toolDefs(req.Tools)
		if err != nil {
			return nil, Request{}, err
		}
		req.toolNames, prompt = names, prompt+tokens
	}
	prompt += req.media.Tokens // the images' and sounds' tokens join the text's
	maxTokens := s.cfg.DefaultMaxTokens
	switch {
	case req.MaxCompletionTokens != nil:
		maxTokens = *req.MaxCompletionTokens
	case req.MaxTokens != nil:
		maxTokens = *req.MaxTokens
	case req.Options != nil && req.Options.NumPredict != nil:
		maxTokens = *req.Options.NumPredict
	case req.NPredict != nil && *req.NPredict != -1:
		maxTokens = *req.NPredict
	case req.Parameters != nil && req.Parameters.MaxNewTokens != nil:
		maxTokens = *req.Parameters.MaxNewTokens
	}
	if maxTokens < 1 {
		return nil, Request{}, badRequest("max_tokens: must be at least 1, got %d", maxTokens)
	}
	if req.MinTokens < 0 || req.MinTokens > maxTokens {
		return nil, Request{}, badRequest("min_tokens: must be between 0 and max_tokens (%d), got %d", maxTokens, req.MinTokens)
	}
	// Compared without adding: prompt + a max_tokens near the top of int
	// overflows and would pass, generating for ever.
	if limit := min(s.cfg.MaxModelLen, s.kvCap); prompt > limit || maxTokens > limit-prompt {
		return nil, Request{}, badRequest("this model's maximum context length is %d tokens; the request asks for %d prompt + %d output tokens",
			limit, prompt, maxTokens)
	}
	return &req, Request{
		ID: s.nextID.Add(1), PromptTokens: prompt, MaxTokens: maxTokens,
		MinTokens: req.MinTokens, IgnoreEOS: req.IgnoreEOS,
	}, nil
}

func (s *Server) models(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"object": "list",
		"data": []map[string]any{{
			"id": s.cfg.ServedModel, "object": "model", "created": s.created,
			"owned_by": EngineName, "max_model_len": min(s.cfg.MaxModelLen, s.kvCap),
		}},
	})
}

// complete serves /v1/chat/completions (chat) and /v1/completions.
func (s *Server) complete(w http.ResponseWriter, r *http.Request, chat bool) {
	s.serve(w, r, chat, protoOpenAI)
}

// serve answers a completion request in protocol p (see native.go).
func (s *Server) serve(w http.ResponseWriter, r *http.Request, chat bool, p proto) {
	// A request counts against MaxInflight once its body is in: a client
	// slow to send one holds its connection, not a place in the engine.
	req, er, err := s.parse(w, r, chat)
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
	if !s.encode(r, &req.media) {
		return // the client went away while its media were encoded
	}
	st := newStream(er)
	out := newEncoder(s, chat, er.ID, req)
	out.proto, out.prompt, out.start = p, er.PromptTokens, time.Now()
	if (p == protoOpenAI || p == protoAnthropic) && req.Stream {
		out.tool = s.toolCall(req.toolNames, er.ID)
	}
	if req.Stream || p.alwaysStreams() {
		s.stream(w, r, st, out)
	} else {
		s.submit(st)
		s.collect(w, r, st, out)
	}
}

// wait blocks until the stream has news, the client goes away or the
// engine stops. It reports false when the handler should give up.
func (s *Server) wait(r *http.Request, st *stream) bool {
	select {
	case <-st.notify:
		return true
	case <-r.Context().Done():
		s.cancel(st.req.ID)
		return false
	case <-s.loopDone:
		return true // take() reports closed
	}
}

// take returns the chunks queued for st and whether no more will come. The
// engine goroutine closes every stream it knows before it ends, so checking
// for its end first means no chunk is lost; a stream submitted after the end
// is never drained and counts as closed.
func (s *Server) take(st *stream, buf []chunk) ([]chunk, bool) {
	stopped := false
	select {
	case <-s.loopDone:
		stopped = true
	default:
	}
	buf, closed := st.take(buf)
	return buf, closed || stopped
}

// stream writes an SSE response: for chat a role-only first chunk (as vLLM
// sends), then one event per engine step carrying that step's tokens, the
// finish_reason on the last of them, a usage chunk with empty choices when
// stream_options.include_usage is set, and [DONE]. Each step's event is
// written and flushed once, by a writer goroutine (see [Server.write]); the
// handler writes the role chunk, hands the response over and waits.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, st *stream, enc *encoder) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	if enc.proto == protoOllamaChat || enc.proto == protoOllamaGenerate {
		h.Set("Content-Type", "application/x-ndjson")
	}
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	k := &sink{w: w, rc: http.NewResponseController(w), enc: enc, buf: make([]byte, 0, 1024), done: make(chan struct{})}
	if enc.proto != protoOpenAI {
		k.buf = enc.nativeStart(k.buf)
	} else if enc.chat {
		k.buf = enc.roleChunk(k.buf)
	}
	if _, err := w.Write(k.buf); err != nil {
		return
	}
	if err := k.rc.Flush(); err != nil {
		return
	}
	st.sink = k
	s.submit(st)
	select {
	case <-k.done:
	case <-r.Context().Done():
		// The client went away. Once gone is set under the lock no writer
		// touches w again, so the handler may return.
		k.mu.Lock()
		k.stop()
		k.mu.Unlock()
		s.cancel(st.req.ID)
	case <-s.loopDone:
		// The engine ended and its writers with it; a stream it never
		// drained still needs its ending.
		k.mu.Lock()
		if !k.gone {
			k.buf = append(k.buf[:0], shutdownEvent...)
			if _, err := w.Write(k.buf); err == nil {
				_ = k.rc.Flush()
			}
			k.stop()
		}
		k.mu.Unlock()
	}
}

const shutdownEvent = `data: {"error":{"message":"server shutting down","type":"server_error","code":503}}` + "\n\n"

// sink is a streaming response that writer goroutines write to. mu is held
// for every write, so the handler can stop writes before it returns.
type sink struct {
	mu        sync.Mutex
	w         http.ResponseWriter
	rc        *http.ResponseController
	enc       *encoder
	buf       []byte
	generated int
	lat       latencyTrack
	deadline  time.Time     // the connection's write deadline
	gone      bool          // finished, failed or abandoned: write nothing more
	done      chan struct{} // closed when gone is set
}

// stop marks the sink gone; k.mu must be held.
func (k *sink) stop() {
	if !k.gone {
		k.gone = true
		close(k.done)
	}
}

// writeTimeout bounds one flush to a client that does not read: it fails
// the stream instead of holding up the other streams of its writer. A
// loopback socket buffers thousands of steps, so only a stuck client hits it.
const writeTimeout = time.Second

// write writes one job to its stream's response (writer goroutines only).
func (s *Server) write(j job) {
	k := j.st.sink
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.gone {
		return
	}
	buf := k.buf[:0]
	last := j.end
	if !j.end {
		k.lat.add(s.met.lat, s.arrival(k.enc, j.st), j.c)
	}
	if j.end && k.enc.proto == protoTGI {
		buf = append(buf, tgiShutdownEvent...)
	} else if j.end {
		buf = append(buf, shutdownEvent...)
	} else if k.enc.proto != protoOpenAI {
		k.enc.arrival = j.st.req.Arrival
		buf = k.enc.nativeChunk(buf, j.c, &k.generated)
		last = j.c.finish != FinishNone
	} else {
		k.generated += j.c.tokens
		buf = k.enc.tokenChunk(buf, j.c, j.st.req.PromptTokens, k.generated)
		if j.c.finish != FinishNone {
			last = true
			if k.enc.includeUsage {
				buf = k.enc.usageChunk(buf, j.st.req.PromptTokens, k.generated)
			}
			buf = append(buf, "data: [DONE]\n\n"...)
		}
	}
	k.buf = buf
	// Moving the deadline costs a timer update: do it once per half timeout.
	if now := time.Now(); k.deadline.Sub(now) < writeTimeout/2 {
		k.deadline = now.Add(writeTimeout)
		_ = k.rc.SetWriteDeadline(k.deadline)
	}
	_, err := k.w.Write(buf)
	if err == nil {
		err = k.rc.Flush()
	}
	if err != nil {
		k.stop()
		s.cancel(j.st.req.ID)
		return
	}
	if s.cfg.onFlush != nil && !j.end {
		s.cfg.onFlush(time.Since(s.base.Add(j.c.at)), j.c.first)
	}
	if last {
		// The connection may serve another request: clear the deadline.
		_ = k.rc.SetWriteDeadline(time.Time{})
		k.stop()
	}
}

// collect answers a non-streaming request with one JSON body.
func (s *Server) collect(w http.ResponseWriter, r *http.Request, st *stream, enc *encoder) {
	var chunks []chunk
	text := make([]byte, 0, 8*st.req.MaxTokens)
	generated := 0
	var lat latencyTrack
	for {
		if !s.wait(r, st) {
			return
		}
		chunks, closed := s.take(st, chunks)
		for _, c := range chunks {
			lat.add(s.met.lat, s.arrival(enc, st), c)
			text = appendWords(text, s.cfg.Engine.Seed, st.req.ID, c.first, c.tokens)
			generated += c.tokens
			if c.finish != FinishNone {
				w.Header().Set("Content-Type", "application/json")
				_ = json.NewEncoder(w).Encode(enc.final(string(text), c.finish, st.req.PromptTokens, generated))
				return
			}
		}
		if closed {
			writeError(w, http.StatusServiceUnavailable, "server_error", "server shutting down")
			return
		}
	}
}

// encoder writes the JSON of one response. Stream chunks are assembled from
// fixed pieces computed once per request: the words are plain ASCII, so no
// escaping is needed per token.
type encoder struct {
	chat         bool
	seed, id     uint64
	includeUsage bool
	// continuousUsage: every token chunk carries the running usage.
	continuousUsage bool
	// proto, prompt and start serve the native protocols (native.go);
	// firstAt is when the first token was written.
	proto   proto
	prompt  int
	start   time.Time
	firstAt time.Time
	// arrival and firstEng are engine times (since the server's base) of
	// the request's arrival and first token; text is what a TGI stream
	// wrote so far, for its generated_text.
	arrival, firstEng time.Duration
	text              []byte
	// tool is the function the answer calls, "" for a text answer.
	tool         string
	head         []byte // `data: {"id":…,"object":…,"created":…,"model":…,"choices":[`
	idStr, model string
	created      int64
}

func newEncoder(s *Server, chat bool, id uint64, req *completionRequest) *encoder {
	e := &encoder{
		chat: chat, seed: s.cfg.Engine.Seed, id: id, created: s.created, model: s.cfg.ServedModel,
		includeUsage:    req.StreamOptions != nil && req.StreamOptions.IncludeUsage,
		continuousUsage: req.StreamOptions != nil && req.StreamOptions.IncludeUsage && req.StreamOptions.ContinuousUsageStats,
	}
	object := "text_completion"
	if chat {
		e.idStr = "chatcmpl-sim-" + strconv.FormatUint(id, 10)
		object = "chat.completion.chunk"
	} else {
		e.idStr = "cmpl-sim-" + strconv.FormatUint(id, 10)
	}
	model, _ := json.Marshal(s.cfg.ServedModel)
	e.head = fmt.Appendf(nil, `data: {"id":%q,"object":%q,"created":%d,"model":%s,"choices":[`, e.idStr, object, e.created, model)
	return e
}

func (e *encoder) roleChunk(buf []byte) []byte {
	buf = append(buf, e.head...)
	return append(buf, `{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`+"\n\n"...)
}

// tokenChunk writes one step's event; with continuous usage it carries
// the usage so far (prompt and completion tokens, the latter counting this
// chunk's).
func (e *encoder) tokenChunk(buf []byte, c chunk, prompt, completion int) []byte {
	if e.tool != "" {
		return e.toolChunk(buf, c, prompt, completion)
	}
	buf = append(buf, e.head...)
	if e.chat {
		buf = append(buf, `{"index":0,"delta":{"content":"`...)
	} else {
		buf = append(buf, `{"index":0,"text":"`...)
	}
	buf = appendWords(buf, e.seed, e.id, c.first, c.tokens)
	if e.chat {
		buf = append(buf, `"},"logprobs":null,"finish_reason":`...)
	} else {
		buf = append(buf, `","logprobs":null,"finish_reason":`...)
	}
	if c.finish == FinishNone {
		buf = append(buf, "null"...)
	} else {
		buf = strconv.AppendQuote(buf, c.finish.String())
	}
	if e.continuousUsage {
		return fmt.Appendf(buf, `}],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`+"\n\n",
			prompt, completion, prompt+completion)
	}
	return append(buf, "}]}\n\n"...)
}

func (e *encoder) usageChunk(buf []byte, prompt, completion int) []byte {
	buf = append(buf, e.head...)
	return fmt.Appendf(buf, `],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`+"\n\n",
		prompt, completion, prompt+completion)
}

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// final is the non-streaming response body.
func (e *encoder) final(text string, f Finish, prompt, completion int) any {
	u := usage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion}
	if e.chat {
		type msg struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		}
		type choice struct {
			Index        int     `json:"index"`
			Message      msg     `json:"message"`
			Logprobs     *string `json:"logprobs"`
			FinishReason string  `json:"finish_reason"`
		}
		return struct {
			ID      string   `json:"id"`
			Object  string   `json:"object"`
			Created int64    `json:"created"`
			Model   string   `json:"model"`
			Choices []choice `json:"choices"`
			Usage   usage    `json:"usage"`
		}{e.idStr, "chat.completion", e.created, e.model,
			[]choice{{Message: msg{Role: "assistant", Content: text}, FinishReason: f.String()}}, u}
	}
	type choice struct {
		Index        int     `json:"index"`
		Text         string  `json:"text"`
		Logprobs     *string `json:"logprobs"`
		FinishReason string  `json:"finish_reason"`
	}
	return struct {
		ID      string   `json:"id"`
		Object  string   `json:"object"`
		Created int64    `json:"created"`
		Model   string   `json:"model"`
		Choices []choice `json:"choices"`
		Usage   usage    `json:"usage"`
	}{e.idStr, "text_completion", e.created, e.model, []choice{{Text: text, FinishReason: f.String()}}, u}
}
