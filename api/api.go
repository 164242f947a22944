// Package api speaks the streaming protocols of LLM servers. An Adapter
// turns a Request into an HTTP request and decodes the streamed answer into
// timed chunks; Do runs one request end to end and returns a Response that
// records what happened, including a failure, as data.
//
// Timestamps are taken from the monotonic clock when the bytes arrive (see
// package sse), before any JSON is decoded.
package api

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tokbench/tokbench/sse"
	"github.com/tokbench/tokbench/wire"
)

// Message is one chat message.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Request is one generation request, independent of the protocol.
type Request struct {
	Model string
	// Messages for chat APIs; completion APIs join their contents.
	Messages []Message
	// MaxTokens is the output budget (max_tokens); 0 leaves it to the server.
	MaxTokens int
	// IgnoreEOS asks engines that support it (vLLM, SGLang, llama.cpp) to
	// generate until MaxTokens.
	IgnoreEOS bool
	// Extra fields merged into the JSON body, overriding the defaults.
	Extra map[string]any
	// Inputs are the texts of an embeddings request (see Embeddings),
	// which has no messages.
	Inputs []string
	// Tools are function definitions the model may call (chat APIs that
	// take them: OpenAI chat, Anthropic).
	Tools []Tool
	// Media go with the last user message, as the protocol takes them
	// (see CarriesMedia).
	Media []Media
}

// Prompt is the request's text as one string (messages, or an embeddings
// request's inputs, joined by newlines).
func (r *Request) Prompt() string {
	if len(r.Messages) == 0 && len(r.Inputs) > 0 {
		return strings.Join(r.Inputs, "\n") // an embeddings request's
	}
	if len(r.Messages) == 1 {
		return r.Messages[0].Content
	}
	var b strings.Builder
	for i, m := range r.Messages {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(m.Content)
	}
	return b.String()
}

// Chunk is one streamed event that carried output text.
type Chunk struct {
	At        time.Time
	Text      string // answer text
	Reasoning string // reasoning ("thinking") text
	// Cumulative is the server's completion_tokens so far when the chunk
	// itself carried usage (vLLM's continuous_usage_stats, some SGLang
	// versions and proxies); 0 if it did not.
	Cumulative int
}

// Usage is the server's token accounting. CachedTokens are the prompt
// tokens it served from its prefix cache, when it says (CachedKnown).
type Usage struct {
	PromptTokens     int
	CompletionTokens int
	ReasoningTokens  int
	CachedTokens     int
	CachedKnown      bool
}

// Response is the outcome of one request.
type Response struct {
	// Start is t0: the instant the request's bytes were handed to the
	// kernel on an open connection (see Phases.sent), or with
	// Client.CountSetup the instant it was handed to the client.
	Start time.Time
	Done  time.Time // the response ended (or failed)
	// Phases are the request's way there: connection, write, first byte.
	Phases Phases
	Status int
	// ID is the server's id for the response, where it sends one.
	ID     string
	Chunks []Chunk
	// KernelStamps is true when chunk arrivals are the kernel's receive
	// stamps (see ReceiveTimestampDialer), false when they are the instants
	// the client read them.
	KernelStamps bool
	Usage        *Usage
	Finish       string
	// SawDone is true when the stream ended with the protocol's end marker.
	SawDone bool
	// Server is the server's own account of the request's timing, where
	// its stream carries one (llama.cpp's timings, Ollama's durations).
	Server *ServerTiming
	// Embedding is an embeddings answer's account (nil for a stream).
	Embedding *Embedding
	// ToolCallAt is the arrival of the first tool-call delta (zero when
	// the model called none); ToolArgs the tool calls' argument text, as
	// streamed (it is in the chunks' Text too: output tokens).
	ToolCallAt time.Time
	ToolArgs   []byte

	// ErrorClass is empty on success; otherwise why the request failed.
	ErrorClass Class
	Error      string
	RetryAfter string

	chunks *atomic.Int64 // Client.Chunks
	inputs int           // an embeddings request's inputs, which its answer must match
	// imageData is a llama.cpp request whose images went as image_data,
	// which its answer's events must say the server took.
	imageData bool
	// formRight says the server took the media's form and refused them
	// for another reason (no note about the other form).
	formRight bool
}

// addChunk appends c, counting it live.
func (r *Response) addChunk(c Chunk) {
	r.Chunks = append(r.Chunks, c)
	if r.chunks != nil {
		r.chunks.Add(1)
	}
}

// Failed reports whether the request did not complete.
func (r *Response) Failed() bool { return r.ErrorClass != "" }

func (r *Response) fail(class Class, format string, args ...any) {
	if r.ErrorClass != "" {
		return // the first failure is the cause
	}
	r.ErrorClass = class
	r.Error = fmt.Sprintf(format, args...)
}

// Adapter is one streaming protocol.
type Adapter interface {
	// Name is the --api spelling, e.g. "openai-chat".
	Name() string
	// NewHTTPRequest builds the streaming HTTP request against base, the
	// URL the user gave.
	NewHTTPRequest(ctx context.Context, base string, req *Request) (*http.Request, error)
	// Decode reads a 2xx streamed body into resp, appending chunks with
	// their arrival instants. It records protocol failures in resp.
	Decode(body io.Reader, resp *Response)
}

// Client sends requests through one adapter with fixed headers.
type Client struct {
	HTTP    *http.Client
	Adapter Adapter
	BaseURL string
	// Header is added to every request (API keys included).
	Header http.Header
	// Secrets are values scrubbed from every error message.
	Secrets []string
	// StallTimeout fails a request whose stream goes silent this long; 0 means never.
	StallTimeout time.Duration
	// Direct sends each request through HTTP.Transport itself rather than
	// HTTP.Do, for a client whose redirects are refused (CheckRedirect
	// RefuseRedirects) and that has no Jar and no Timeout: the outcome is
	// the same (a 3xx is the answer, errors read as http.Client's), less
	// http.Client's copy of every request's headers for redirects it would
	// not follow (a fifth of the client's CPU for a short answer).
	Direct bool
	// CountSetup starts a request's clock when it is handed to the client,
	// before any connection set-up (DNS, connect, TLS), instead of when its
	// bytes go out on an open connection: first contact, measured on purpose.
	CountSetup bool
	// Chunks, when set, counts token chunks as they arrive, over every
	// request (live progress: what streams now, not what has completed).
	Chunks *atomic.Int64
}

// Prepared is a request built ahead of its send: its JSON encoded and its
// headers set, so that building it never sits between a level's start and
// its write. It may be sent any number of times, one send at a time.
type Prepared struct {
	http      *http.Request
	err       error
	used      bool
	maxTokens int // the request's output budget (0: the server's)
	inputs    int // an embeddings request's inputs
	// note is added to the message of a refusal: the form its media
	// went in, where the protocol has more than one.
	note      string
	imageData bool
	// Build is how long building it took (encoding its body).
	Build time.Duration
}

// Prepare builds req for sending.
func (cl *Client) Prepare(req *Request) *Prepared {
	start := time.Now()
	req, err := withMedia(cl.Adapter, req)
	if err != nil {
		return &Prepared{err: err}
	}
	hreq, err := cl.Adapter.NewHTTPRequest(context.Background(), cl.BaseURL, req)
	if err != nil {
		return &Prepared{err: err}
	}
	for k, vs := range cl.Header {
		for _, v := range vs {
			hreq.Header.Add(k, v)
		}
	}
	p := &Prepared{http: hreq, maxTokens: req.MaxTokens, inputs: len(req.Inputs), Build: time.Since(start)}
	if lc, ok := cl.Adapter.(LlamaCpp); ok && len(req.Media) > 0 {
		p.note, p.imageData = lc.refusalNote(), lc.ImageData
	}
	return p
}

// BodyBytes is the size of the request's body (0 when it could not be
// built or its size is unknown).
func (p *Prepared) BodyBytes() int64 {
	if p.http == nil {
		return 0
	}
	return max(p.http.ContentLength, 0)
}

// request is the prepared request for one send on ctx, with a fresh body
// when an earlier send consumed it.
func (p *Prepared) request(ctx context.Context) (*http.Request, error) {
	hreq := p.http.WithContext(ctx)
	if p.used && hreq.Body != nil && hreq.Body != http.NoBody {
		if hreq.GetBody == nil {
			return nil, errors.New("the request's body cannot be sent again")
		}
		body, err := hreq.GetBody()
		if err != nil {
			return nil, err
		}
		hreq.Body = body
	}
	p.used = true
	return hreq, nil
}

// refused reports whether the server turned the request down rather than
// the transport losing it: an HTTP error answer, or a stream that ended
// in an error, or with nothing, before any token.
func refused(resp *Response) bool {
	if _, ok := resp.ErrorClass.HTTPStatus(); ok {
		return true
	}
	switch resp.ErrorClass {
	case ClassStreamError, ClassIncompleteStream, ClassEmptyResponse, ClassMalformedStream:
		return len(resp.Chunks) == 0
	}
	return false
}

// ServerTiming is a server's own timing of one request: prompt and decode
// milliseconds and rates, model load time, the token counts they cover,
// and the prompt tokens it took from its cache. EvaluatedOnly says
// PromptTokens counts only the prompt tokens the server evaluated (the rest
// came from its cache).
type ServerTiming struct {
	PromptMs, PredictedMs         float64
	DecodeTPS, PrefillTPS         float64
	LoadMs                        float64
	PromptTokens, PredictedTokens int
	CachedTokens                  *int
	EvaluatedOnly                 bool
	// FirstTokenAt and LastTokenAt are the server's own instants of its
	// first and last token-carrying lines, on its clock (Ollama's
	// created_at); zero where it gave none.
	FirstTokenAt, LastTokenAt time.Time
}

type sendAtKey struct{}

type sendAt struct {
	at   time.Time
	wait func(time.Time)
}

// SendAt returns ctx telling DoPrepared to hand its request to the
// transport at at: it prepares what it can (the exchange's trace, the
// request), then calls wait(at), which returns at that instant, and sends.
// A paced load starts each send a little ahead of its instant this way, so
// that neither a goroutine's start nor the preparation comes between the
// instant and the write. A retry of the request is sent at once.
func SendAt(ctx context.Context, at time.Time, wait func(time.Time)) context.Context {
	return context.WithValue(ctx, sendAtKey{}, sendAt{at: at, wait: wait})
}

// Do runs one request and returns its outcome. It never returns a Go error:
// failures are classified in the Response.
func (cl *Client) Do(ctx context.Context, req *Request) *Response {
	return cl.DoPrepared(ctx, cl.Prepare(req))
}

// DoPrepared is Do for a request built by Prepare. It is a request's whole
// life in order — head timer, send, phases, status, redirect, errors,
// stream decoding, clock clamps — kept in one function because each step
// reads what the steps before it left in the Response and the trace.
func (cl *Client) DoPrepared(ctx context.Context, prep *Prepared) *Response {
	resp := &Response{chunks: cl.Chunks, inputs: prep.inputs, imageData: prep.imageData}
	// Every message, whichever step wrote it, leaves without the secrets.
	defer func() { resp.Error, resp.RetryAfter = cl.scrub(resp.Error), cl.scrub(resp.RetryAfter) }()
	defer func() {
		if prep.note != "" && !resp.formRight && refused(resp) {
			resp.Error += " (" + prep.note + ")"
		}
	}()
	// --stall-timeout covers the wait for the answer's head too: a server
	// that never answers is cut, not held until the request's timeout.
	reqCtx, cancel := ctx, context.CancelFunc(nil)
	if cl.StallTimeout > 0 {
		reqCtx, cancel = context.WithCancel(ctx)
		defer cancel()
	}
	x, traced := NewExchange(reqCtx, resp)
	err := prep.err
	var hreq *http.Request
	if err == nil {
		hreq, err = prep.request(traced)
	}
	if err != nil {
		resp.Start = time.Now()
		resp.Done = resp.Start
		resp.fail(ClassBadRequest, "%s", err)
		return resp
	}
	if at, ok := ctx.Value(sendAtKey{}).(sendAt); ok {
		at.wait(at.at) // everything above is done ahead of the instant
	}
	var headTimer *time.Timer
	var headStalled atomic.Bool
	if cancel != nil {
		headTimer = time.AfterFunc(cl.StallTimeout, func() { headStalled.Store(true); cancel() })
		defer headTimer.Stop()
	}
	handed := time.Now()
	hresp, err := cl.send(hreq)
	if headTimer != nil {
		headTimer.Stop()
	}
	x.Answered(handed, cl.CountSetup, hresp, err)
	if err != nil {
		if headStalled.Load() && ctx.Err() == nil {
			resp.Done = time.Now()
			resp.fail(ClassStallTimeout, "no answer for %s (--stall-timeout)", cl.StallTimeout)
			return resp
		}
		x.FailTransport(ctx, err)
		return resp
	}
	defer hresp.Body.Close()
	if hresp.StatusCode < 200 || hresp.StatusCode > 299 {
		// Redirects are not followed (an http.Client whose CheckRedirect
		// returns http.ErrUseLastResponse, as tokbench bench's does).
		var body []byte
		if hresp.StatusCode/100 != 3 {
			body, _ = io.ReadAll(io.LimitReader(hresp.Body, 64<<10))
		}
		x.FailHTTP(hresp, prep.http.Method, prep.http.URL.Path, body)
		return resp
	}
	sr := newStallReader(hresp.Body, cl.StallTimeout)
	if limit := overlongChunks(prep.maxTokens); limit > 0 {
		// A stream that goes on past its max_tokens by far (no finish, no
		// [DONE], tokens for ever) is cut: every chunk carries at least a
		// token, so this many chunks are tokens the server should not send.
		sr.over = func() bool { return len(resp.Chunks) > limit }
	}
	sr.clock = x.Clock()
	defer sr.stop()
	if !x.Plain(hresp) {
		return resp
	}
	cl.Adapter.Decode(sr, resp)
	cut, why := CtxCut(ctx)
	if cut == "" && (sr.stalled() || headStalled.Load()) {
		cut, why = ClassStallTimeout, fmt.Sprintf("no data for %s", cl.StallTimeout)
	}
	x.Ended(cut, why, hresp.Header.Get("Content-Type"))
	return resp
}

// send hands hreq to the HTTP client, or with Direct to its transport,
// failing and refusing redirects as http.Client with RefuseRedirects does.
func (cl *Client) send(hreq *http.Request) (*http.Response, error) {
	if !cl.Direct {
		return cl.HTTP.Do(hreq)
	}
	rt := cl.HTTP.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	hresp, err := rt.RoundTrip(hreq)
	if err == nil && hresp == nil {
		err = errors.New("http: RoundTripper returned a nil *Response with a nil error")
	}
	if err != nil {
		op := "Get"
		if m := hreq.Method; m != "" {
			op = m[:1] + strings.ToLower(m[1:])
		}
		u := hreq.URL.String()
		if _, ok := hreq.URL.User.Password(); ok { // as http.Client hides it
			u = strings.Replace(u, hreq.URL.User.String()+"@", hreq.URL.User.Username()+":***@", 1)
		}
		return nil, &url.Error{Op: op, URL: u, Err: err}
	}
	if hresp.Body == nil {
		hresp.Body = http.NoBody
	}
	switch hresp.StatusCode {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		if hresp.Header.Get("Location") != "" {
			RefuseRedirects(hreq, nil)
		}
	}
	return hresp, nil
}

// notAStream says what an answer that carried no tokens was, by its
// Content-Type, when that is no stream's: an HTML page (a login page, a
// proxy's error), one JSON document (a server that does not stream).
func notAStream(contentType string) string {
	mt := strings.ToLower(strings.TrimSpace(strings.SplitN(contentType, ";", 2)[0]))
	switch {
	case mt == "", mt == "text/event-stream", mt == "application/x-ndjson", mt == "application/jsonl":
		return ""
	case mt == "text/html":
		return " (the server answered an HTML page, Content-Type text/html: a login page or a proxy's?)"
	case mt == "application/json":
		return " (the server answered one JSON document, not a stream: does it stream this endpoint?)"
	}
	return fmt.Sprintf(" (Content-Type %s: not a stream)", mt)
}

// cachedFromTimings fills the usage's cached prompt tokens from the
// server's own timing where the usage did not say: llama.cpp's cache_n, or
// its prompt tokens less those it evaluated (prompt_n).
func cachedFromTimings(resp *Response) {
	u, st := resp.Usage, resp.Server
	if u == nil || u.CachedKnown || st == nil {
		return
	}
	switch {
	case st.CachedTokens != nil:
		u.CachedTokens, u.CachedKnown = *st.CachedTokens, true
	case st.EvaluatedOnly && u.PromptTokens > 0:
		u.CachedTokens, u.CachedKnown = max(0, u.PromptTokens-st.PromptTokens), true
	}
}

func (c *Client) scrub(s string) string { return Scrub(s, c.Secrets) }

// Scrub replaces every secret (of four bytes or more) in s with
// "[REDACTED]", for messages that may reach a file or a terminal.
//
// Each secret is scrubbed in the forms a server or a library may give it
// back: as it is, URL-encoded (query escaping and path escaping) and in
// Base64 (standard and URL alphabets, with and without padding: a Basic
// authorization's user:password).
func Scrub(s string, secrets []string) string {
	for _, sec := range secrets {
		if len(sec) < 4 {
			continue
		}
		for _, form := range secretForms(sec) {
			s = strings.ReplaceAll(s, form, "[REDACTED]")
			s = scrubCut(s, form)
		}
	}
	return s
}

// scrubCut replaces the start of form where a message was shortened in
// the middle of it (a "…" right after four or more of its first bytes).
func scrubCut(s, form string) string {
	const cut = "…"
	for from := 0; ; {
		i := strings.Index(s[from:], cut)
		if i < 0 {
			return s
		}
		i += from
		for k := min(len(form)-1, i); k >= 4; k-- {
			if s[i-k:i] == form[:k] {
				s = s[:i-k] + "[REDACTED]" + s[i:]
				i += len("[REDACTED]") - k
				break
			}
		}
		from = i + len(cut)
	}
}

// secretForms are the encodings of sec Scrub looks for, longest first so
// that no form is cut in two by a shorter one.
func secretForms(sec string) []string {
	forms := []string{sec, url.QueryEscape(sec), url.PathEscape(sec),
		base64.StdEncoding.EncodeToString([]byte(sec)), base64.RawStdEncoding.EncodeToString([]byte(sec)),
		base64.URLEncoding.EncodeToString([]byte(sec)), base64.RawURLEncoding.EncodeToString([]byte(sec))}
	slices.SortFunc(forms, func(a, b string) int { return len(b) - len(a) })
	return slices.Compact(forms)
}

// URLSecrets are the secrets a URL carries: its password, the Basic
// authorization's user:password built from it, and every query value of
// four bytes or more (?api_key=…; an api-version too: better hidden in a
// message than a key leaked).
func URLSecrets(raw string) []string {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return nil
	}
	var out []string
	if u.User != nil {
		if pw, ok := u.User.Password(); ok {
			out = append(out, pw, u.User.Username()+":"+pw)
		}
	}
	for _, vs := range u.Query() {
		for _, v := range vs {
			if len(v) >= 4 {
				out = append(out, v)
			}
		}
	}
	return out
}

// ClassifyTransport names the failure class of a request that got no
// HTTP answer: "timeout", "connection_refused", "dns", "tls",
// "connection_reset", "head_too_large", "too_many_interim", or
// "connection"; the context's own ending ("interrupted", "timeout") wins.
// Every class comes from what the error is (errors.Is, errors.As), never
// from its words, which differ by operating system and Go version.
func ClassifyTransport(ctx context.Context, err error) Class {
	if c := ctxClass(ctx); c != "" {
		return c
	}
	var te interface{ Timeout() bool }
	switch tc := transportClass(err); {
	case errors.Is(err, wire.ErrHeadTooLarge):
		return ClassHeadTooLarge
	case errors.Is(err, wire.ErrTooManyInterim):
		return ClassTooManyInterim
	case errors.As(err, &te) && te.Timeout():
		return ClassTimeout
	case tc != "":
		return tc
	}
	return ClassConnection
}

// overlongChunks is how many token chunks a stream of maxTokens may send
// before it is cut as overlong: twice the budget and 64 more, room for
// servers that count differently; 0 (no limit) without a budget.
func overlongChunks(maxTokens int) int {
	if maxTokens <= 0 {
		return 0
	}
	return 2*maxTokens + 64
}

// errOverlong: the stream went on far past its max_tokens.
var errOverlong = &ClassError{ClassOverlongStream, "the stream went on far past max_tokens: cut"}

// classifyRead names a failure while the body streamed.
func classifyRead(err error) Class {
	var te interface{ Timeout() bool }
	switch {
	case classOf(err) != "":
		return classOf(err)
	case errors.Is(err, wire.ErrHeadTooLarge):
		return ClassHeadTooLarge
	case errors.Is(err, wire.ErrTooManyInterim):
		return ClassTooManyInterim
	case errors.As(err, &te) && te.Timeout():
		return ClassTimeout
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return ClassInterrupted
	case errors.Is(err, sse.ErrLineTooLong):
		return ClassLineTooLong
	case errors.Is(err, sse.ErrEventTooLarge):
		return ClassEventTooLarge
	}
	return ClassConnectionDropped
}

// ctxClass names a context that ended: the request's own deadline is a
// timeout; a cancellation (Ctrl-C) is an interruption.
func ctxClass(ctx context.Context) Class {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return ClassTimeout
	case ctx.Err() != nil:
		return ClassInterrupted
	}
	return ""
}
