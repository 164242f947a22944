// Package fakellm is an OpenAI-compatible streaming server for tests whose
// timing and token counts are known exactly: it sends the first token at
// TTFT after the request arrived and each later chunk at a fixed gap,
// scheduled against the arrival instant so that sleeps never accumulate
// drift. Every emitted token is one word that is a single token under
// cl100k_base and o200k_base, so a local count of the text is exact too.
//
// Faults (malformed JSON, an error object, a dropped connection, an HTTP
// status) are scripted per request.
package fakellm

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tokbench/tokbench/wire"
)

// Words are emitted in turn; each is one token (with its leading space)
// under cl100k_base and o200k_base.
var Words = []string{" the", " time", " water", " people", " world", " house", " light", " music"}

// Script is how the server answers.
type Script struct {
	TTFT        time.Duration // request arrival → first token chunk
	Gap         time.Duration // between token chunks
	Tokens      int           // output tokens of a full answer (0: the request's max_tokens)
	PerChunk    int           // tokens per chunk (default 1)
	Reasoning   int           // the first Reasoning tokens go out as reasoning_content
	Usage       bool          // send usage (only when the client asks for it)
	UsageInline bool          // put usage in the finish chunk (llama.cpp) instead of a separate chunk
	RoleChunk   bool          // a role-only first chunk, as vLLM sends
	CRLF        bool          // end lines with \r\n
	KeepAlive   bool          // ": keep-alive" comments between chunks
	EmptyDeltas bool          // an empty-content chunk between token chunks
	Completions bool          // answer in /v1/completions format ("text")
	// GapPerInflight slows a stream by this much per other request in
	// flight when it arrived: a server whose per-user speed falls with load
	// in a known way (gap = Gap + GapPerInflight·(in flight − 1)).
	GapPerInflight time.Duration

	// ChunkSizes, when set, are the tokens of the chunks in turn, repeating
	// (3, 1, 2: speculative decoding accepting a varying number of drafts);
	// it overrides PerChunk.
	ChunkSizes []int
	// ContinuousUsage puts the running usage (completion_tokens so far) in
	// every chunk as well, the role chunk's at 0, as vLLM does with
	// stream_options.continuous_usage_stats. Only with Usage, when asked.
	ContinuousUsage bool
	// ContinuousUsageOnRequest is ContinuousUsage as vLLM does it: only for
	// a request whose stream_options also has continuous_usage_stats true.
	ContinuousUsageOnRequest bool
	// OwnedBy is the owned_by of the model /v1/models lists ("vllm" for a
	// fake vLLM); empty leaves the field out.
	OwnedBy string
	// MaxModelLen is the max_model_len /v1/models lists (0 leaves it out).
	MaxModelLen int

	// Fault, when set, is chosen per request number (0-based, in arrival order).
	Fault func(n int) Fault
}

// Fault is a scripted failure.
type Fault struct {
	Status int // answer with this HTTP status and an error body
	// RetryAfter is sent with Status; empty means "2".
	RetryAfter string
	Malformed  int // after this many token chunks, send invalid JSON (0: never)
	ErrorAt    int // after this many token chunks, send an error object
	DropAt     int // after this many token chunks, cut the connection
}

// Server is a running fake.
type Server struct {
	*httptest.Server
	script   Script
	requests atomic.Int64
	inflight atomic.Int64

	mu      sync.Mutex
	header  http.Header
	bodies  []map[string]any
	streams []*Stream
}

// Stream is what the server actually did for one request: when it arrived
// and when each token-carrying chunk was flushed to the connection. These
// instants, not the script, are the truth a client is measured against.
type Stream struct {
	ID string // the response id sent in every chunk
	// Arrived is when the request reached the server: the kernel's receive
	// stamp of its bytes where the connection keeps one (the fake's own
	// listener does), else the handler's start.
	Arrived time.Time
	// Flushes are the instants just before each token chunk was written,
	// Sent those just after its flush returned: on loopback a receiver's
	// kernel stamp of the chunk lies between the two (see Off).
	Flushes []time.Time
	Sent    []time.Time
	Tokens  []int
}

// Off is how far at lies outside the span chunk i was on its way, from
// just before its write to the return of its flush: 0 within it. A
// stall of the server's own between its clock and its write (a host's
// pause of a few ms) moves the chunk's arrival, not its measurement's
// error: judged by Off, it is no error.
func (s Stream) Off(i int, at time.Time) time.Duration {
	switch {
	case at.Before(s.Flushes[i]):
		return s.Flushes[i].Sub(at)
	case at.After(s.Sent[i]):
		return at.Sub(s.Sent[i])
	}
	return 0
}

// OffMs is Off for a stamp given as a record gives it, ms after start,
// in ms.
func (s Stream) OffMs(i int, start time.Time, ms float64) float64 {
	return float64(s.Off(i, start.Add(time.Duration(ms*float64(time.Millisecond))))) / 1e6
}

// Streams returns the completed and in-progress streams so far.
func (f *Server) Streams() []Stream {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Stream, len(f.streams))
	for i, s := range f.streams {
		out[i] = Stream{ID: s.ID, Arrived: s.Arrived, Flushes: slices.Clone(s.Flushes), Sent: slices.Clone(s.Sent), Tokens: slices.Clone(s.Tokens)}
	}
	return out
}

// New starts a fake on loopback.
func New(s Script) *Server {
	f := NewUnstarted(s)
	f.Start()
	return f
}

// NewTLS starts a fake on loopback behind HTTPS with a self-signed
// certificate (f.Certificate()).
func NewTLS(s Script) *Server {
	f := NewUnstarted(s)
	f.StartTLS()
	return f
}

// NewUnstarted is a fake not yet started, so a test can set up its
// listener or protocols (HTTP/2, a slow handshake) before Start or StartTLS.
func NewUnstarted(s Script) *Server {
	if s.PerChunk <= 0 {
		s.PerChunk = 1
	}
	f := &Server{script: s}
	f.Server = httptest.NewUnstartedServer(http.HandlerFunc(f.handle))
	// The kernel's receive stamp of each request is its arrival: a
	// handler's start comes later, by however long the process took to
	// get to it.
	f.Listener = wire.StampListener(f.Listener)
	f.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context { return context.WithValue(ctx, connKey{}, c) }
	return f
}

type connKey struct{}

// Bodies returns the JSON bodies received so far.
func (f *Server) Bodies() []map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]map[string]any(nil), f.bodies...)
}

// CountTokens is the fake's own tokenizer, deliberately unlike cl100k: one
// token per word, two for a word longer than five letters. Its /tokenize
// endpoint answers with it.
func CountTokens(text string) int {
	n := 0
	for _, w := range strings.Fields(text) {
		n++
		if len(w) > 5 {
			n++
		}
	}
	return n
}

// LastHeader returns a header of the last generation request.
func (f *Server) LastHeader(name string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.header.Get(name)
}

// Text is the full answer text of the script (reasoning and answer).
func (s Script) Text() string {
	var b strings.Builder
	for i := 0; i < s.Tokens; i++ {
		b.WriteString(Words[i%len(Words)])
	}
	return b.String()
}

// handle serves one scripted answer, from the request to its last byte.
// It is one function on purpose: its steps follow the Script's fields in
// the order a real server meets them (reject, delay, headers, chunks,
// faults, usage, end), and a reader checks a test's script against it top
// to bottom.
func (f *Server) handle(w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	if c, ok := r.Context().Value(connKey{}).(net.Conn); ok {
		arrived = wire.Arrival(c, arrived)
	}
	if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/models") {
		owned := ""
		if f.script.OwnedBy != "" {
			owned = fmt.Sprintf(`,"owned_by":%q`, f.script.OwnedBy)
		}
		if f.script.MaxModelLen > 0 {
			owned += fmt.Sprintf(`,"max_model_len":%d`, f.script.MaxModelLen)
		}
		fmt.Fprintf(w, `{"object":"list","data":[{"id":"fake-model","object":"model"%s}]}`, owned)
		return
	}
	if strings.HasSuffix(r.URL.Path, "/tokenize") {
		var body struct {
			Prompt string `json:"prompt"`
		}
		json.NewDecoder(r.Body).Decode(&body)
		fmt.Fprintf(w, `{"count":%d}`, CountTokens(body.Prompt))
		return
	}
	n := int(f.requests.Add(1)) - 1
	others := f.inflight.Add(1) - 1
	defer f.inflight.Add(-1)
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, `{"error":{"message":"bad json"}}`, http.StatusBadRequest)
		return
	}
	id := fmt.Sprintf("fake-%d", n)
	st := &Stream{ID: id, Arrived: arrived}
	f.mu.Lock()
	f.header = r.Header.Clone()
	f.bodies = append(f.bodies, body)
	f.streams = append(f.streams, st)
	f.mu.Unlock()
	flushed := func(at time.Time, tokens int) {
		sent := time.Now()
		f.mu.Lock()
		st.Flushes = append(st.Flushes, at)
		st.Sent = append(st.Sent, sent)
		st.Tokens = append(st.Tokens, tokens)
		f.mu.Unlock()
	}
	s := f.script
	s.Gap += time.Duration(others) * s.GapPerInflight
	if mt, ok := body["max_tokens"].(float64); ok && s.Tokens == 0 {
		s.Tokens = int(mt)
	}
	var fault Fault
	if s.Fault != nil {
		fault = s.Fault(n)
	}
	if fault.Status != 0 {
		w.Header().Set("Content-Type", "application/json")
		ra := fault.RetryAfter
		if ra == "" {
			ra = "2"
		}
		w.Header().Set("Retry-After", ra)
		w.WriteHeader(fault.Status)
		fmt.Fprintf(w, `{"error":{"message":"scripted failure %d","type":"test"}}`, fault.Status)
		return
	}
	wantUsage, wantContinuous := false, false
	if so, ok := body["stream_options"].(map[string]any); ok {
		wantUsage, _ = so["include_usage"].(bool)
		wantContinuous, _ = so["continuous_usage_stats"].(bool)
	}
	wantUsage = wantUsage && s.Usage
	continuous := wantUsage && (s.ContinuousUsage || s.ContinuousUsageOnRequest && wantContinuous)
	eol := "\n"
	if s.CRLF {
		eol = "\r\n"
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fl := w.(http.Flusher)
	send := func(data string) {
		fmt.Fprintf(w, "data: %s%s%s", data, eol, eol)
		fl.Flush()
	}
	usageAt := func(n int) string {
		return fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}`, 7, n, 7+n)
	}
	usage := usageAt(s.Tokens)
	// running is the usage every chunk carries with ContinuousUsage: the
	// tokens sent so far, n.
	running := func(n int) string {
		if !continuous {
			return ""
		}
		return usageAt(n)
	}
	chunk := func(content, reasoning, finish, usageJSON string) string {
		fin := "null"
		if finish != "" {
			fin = `"` + finish + `"`
		}
		u := ""
		if usageJSON != "" {
			u = `,"usage":` + usageJSON
		}
		if s.Completions {
			return fmt.Sprintf(`{"id":"`+id+`","object":"text_completion","choices":[{"index":0,"text":%q,"finish_reason":%s}]%s}`, content, fin, u)
		}
		delta := `{}`
		switch {
		case reasoning != "":
			delta = fmt.Sprintf(`{"reasoning_content":%q}`, reasoning)
		case content != "" || finish == "":
			delta = fmt.Sprintf(`{"content":%q}`, content)
		}
		return fmt.Sprintf(`{"id":"`+id+`","object":"chat.completion.chunk","choices":[{"index":0,"delta":%s,"finish_reason":%s}]%s}`, delta, fin, u)
	}
	if s.RoleChunk && !s.Completions {
		u := ""
		if ru := running(0); ru != "" {
			u = `,"usage":` + ru
		}
		send(`{"id":"` + id + `","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]` + u + `}`)
	}
	tok := 0
	for c := 0; tok < s.Tokens; c++ {
		due := arrived.Add(s.TTFT + time.Duration(c)*s.Gap)
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		}
		if r.Context().Err() != nil {
			return
		}
		switch {
		case fault.Malformed > 0 && c == fault.Malformed:
			send(`{"choices":[{"delta":{"content":"oops"`)
			return
		case fault.ErrorAt > 0 && c == fault.ErrorAt:
			send(`{"error":{"message":"scripted mid-stream error","type":"server_error"}}`)
			return
		case fault.DropAt > 0 && c == fault.DropAt:
			hj, ok := w.(http.Hijacker)
			if ok {
				if conn, _, err := hj.Hijack(); err == nil {
					if tc, ok := conn.(interface{ SetLinger(int) error }); ok {
						tc.SetLinger(0) // a reset, not a clean close
					}
					conn.Close()
				}
			}
			return
		}
		var text, reasoning strings.Builder
		before := tok
		per := s.PerChunk
		if len(s.ChunkSizes) > 0 {
			per = max(s.ChunkSizes[c%len(s.ChunkSizes)], 1)
		}
		reasoningTok := 0 // of this chunk
		for k := 0; k < per && tok < s.Tokens; k++ {
			word := Words[tok%len(Words)]
			if tok < s.Reasoning {
				reasoning.WriteString(word)
				reasoningTok++
			} else {
				text.WriteString(word)
			}
			tok++
		}
		// A chunk never mixes reasoning and answer in this fake: a chunk
		// that straddles the boundary goes out as two events, one flush.
		var ev strings.Builder
		nr, nt := reasoning.Len(), text.Len()
		if nr > 0 {
			fmt.Fprintf(&ev, "data: %s%s%s", chunk("", reasoning.String(), "", running(before+reasoningTok)), eol, eol)
		}
		if nt > 0 || nr == 0 {
			fmt.Fprintf(&ev, "data: %s%s%s", chunk(text.String(), "", "", running(tok)), eol, eol)
		}
		at := time.Now() // the instant the bytes start on their way
		fmt.Fprint(w, ev.String())
		fl.Flush()
		flushed(at, tok-before)
		if s.KeepAlive {
			fmt.Fprintf(w, ": keep-alive%s%s", eol, eol)
			fl.Flush()
		}
		if s.EmptyDeltas {
			send(chunk("", "", "", running(tok)))
		}
	}
	if wantUsage && s.UsageInline {
		send(chunk("", "", "length", usage))
	} else {
		send(chunk("", "", "length", running(tok)))
		if wantUsage {
			send(`{"id":"` + id + `","object":"chat.completion.chunk","choices":[],"usage":` + usage + `}`)
		}
	}
	send("[DONE]")
}
