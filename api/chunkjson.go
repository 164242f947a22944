package api

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/valyala/fastjson"
)

// chunkFields is what Decode needs from one streamed OpenAI chunk. Byte
// slices alias the decoder's buffers and are valid until the next chunk.
type chunkFields struct {
	text      []byte // answer text of every choice: content, tool-call arguments, text
	reasoning []byte // reasoning_content (or reasoning) of every choice
	finish    []byte // the last non-empty finish_reason
	id        []byte
	errored   bool // an "error" member that is not null, or "object": "error"
	// tool says a choice's delta carried tool_calls (a call begun, or its
	// arguments); toolArgs are their arguments (also in text).
	tool     bool
	toolArgs []byte

	hasUsage                        bool
	promptTokens, completionTokens  int
	reasoningTokens                 int
	hasCached                       bool // usage.prompt_tokens_details.cached_tokens was given
	cachedTokens                    int
	hasTimings                      bool
	promptMs, promptPerSecond       float64
	predictedMs, predictedPerSecond float64
	// llama.cpp's counts: prompt tokens evaluated, tokens predicted, and
	// prompt tokens taken from its cache (hasCacheN: cache_n was given).
	promptN, predictedN, cacheN int
	hasCacheN                   bool
}

// chunkDecoder reads OpenAI chunks with a reused fastjson parser: after the
// first chunks it allocates nothing. A member Decode reads that has the
// wrong type is an error, as it is for encoding/json; members it does not
// read are not looked at. It is not safe for concurrent use.
type chunkDecoder struct {
	h hot
	p parser
	f chunkFields
}

// parsers are fastjson parsers shared by the streams' decoders: a stream
// takes one on its first chunk off the fast path and gives it back when it
// ends, so parsers' buffers are grown once, not once a stream.
var parsers fastjson.ParserPool

// parser is a decoder's pooled fastjson parser, taken when first needed.
type parser struct{ p *fastjson.Parser }

func (p *parser) parse(data []byte) (*fastjson.Value, error) {
	if p.p == nil {
		p.p = parsers.Get()
	}
	return p.p.ParseBytes(data)
}

// release gives the parser back; what it parsed is no longer valid.
func (p *parser) release() {
	if p.p != nil {
		parsers.Put(p.p)
		p.p = nil
	}
}

// decode reads data into d.f: a token chunk on the fast path (hot), any
// other with fastjson.
func (d *chunkDecoder) decode(data []byte) error {
	if d.h.openAI(data, &d.f) {
		return nil
	}
	return d.slow(data)
}

// slow reads data into d.f with fastjson.
func (d *chunkDecoder) slow(data []byte) error {
	v, err := d.p.parse(data)
	if err != nil {
		return err
	}
	if v.Type() != fastjson.TypeObject {
		return fmt.Errorf("a chunk is an object, not %s", v.Type())
	}
	f := &d.f
	*f = chunkFields{text: f.text[:0], reasoning: f.reasoning[:0], toolArgs: f.toolArgs[:0]}
	r := reader{}
	if e := v.Get("error"); e != nil && e.Type() != fastjson.TypeNull {
		f.errored = true
	}
	if obj, _ := r.str(v, "object"); string(obj) == "error" {
		f.errored = true
	}
	f.id, _ = r.str(v, "id")
	for _, ch := range r.array(v, "choices") {
		if ch.Type() == fastjson.TypeNull {
			continue
		}
		if ch.Type() != fastjson.TypeObject {
			return fmt.Errorf("choices: an element is %s, not an object", ch.Type())
		}
		delta := r.object(ch, "delta")
		if s, ok := r.str(delta, "content"); ok {
			f.text = append(f.text, s...)
		}
		for _, tc := range r.array(delta, "tool_calls") {
			f.tool = true
			if args, ok := r.str(r.object(tc, "function"), "arguments"); ok {
				f.text = append(f.text, args...)
				f.toolArgs = append(f.toolArgs, args...)
			}
		}
		if s, ok := r.str(ch, "text"); ok {
			f.text = append(f.text, s...)
		}
		if s, ok := r.str(delta, "reasoning_content"); ok {
			f.reasoning = append(f.reasoning, s...)
		} else if s, ok := r.str(delta, "reasoning"); ok {
			f.reasoning = append(f.reasoning, s...)
		}
		if s, _ := r.str(ch, "finish_reason"); len(s) > 0 {
			f.finish = s
		}
	}
	if u := r.object(v, "usage"); u != nil {
		f.hasUsage = true
		f.promptTokens, _ = r.int(u, "prompt_tokens")
		f.completionTokens, _ = r.int(u, "completion_tokens")
		f.reasoningTokens, _ = r.int(r.object(u, "completion_tokens_details"), "reasoning_tokens")
		f.cachedTokens, f.hasCached = r.int(r.object(u, "prompt_tokens_details"), "cached_tokens")
	}
	if t := r.object(v, "timings"); t != nil {
		f.hasTimings = true
		f.promptMs = r.float(t, "prompt_ms")
		f.promptPerSecond = r.float(t, "prompt_per_second")
		f.predictedMs = r.float(t, "predicted_ms")
		f.predictedPerSecond = r.float(t, "predicted_per_second")
		f.promptN, _ = r.int(t, "prompt_n")
		f.predictedN, _ = r.int(t, "predicted_n")
		f.cacheN, f.hasCacheN = r.int(t, "cache_n")
	}
	return r.err
}

// reader reads typed members of fastjson objects. A member that is absent
// or null reads as absent; one of another type is the first error, kept in
// err, and reads as absent too.
type reader struct{ err error }

func (r *reader) wrong(key string, v *fastjson.Value, want string) {
	if r.err == nil {
		r.err = fmt.Errorf("%s: %s, not %s", key, v.Type(), want)
	}
}

// get is o's member key; nil when o is nil, the member absent or null.
func get(o *fastjson.Value, key string) *fastjson.Value {
	if o == nil {
		return nil
	}
	v := o.Get(key)
	if v == nil || v.Type() == fastjson.TypeNull {
		return nil
	}
	return v
}

func (r *reader) str(o *fastjson.Value, key string) ([]byte, bool) {
	v := get(o, key)
	if v == nil {
		return nil, false
	}
	b, err := v.StringBytes()
	if err != nil {
		r.wrong(key, v, "a string")
		return nil, false
	}
	return b, true
}

func (r *reader) int(o *fastjson.Value, key string) (int, bool) {
	v := get(o, key)
	if v == nil {
		return 0, false
	}
	n, err := v.Int()
	if err != nil {
		r.wrong(key, v, "an integer")
		return 0, false
	}
	return n, true
}

func (r *reader) int64(o *fastjson.Value, key string) int64 {
	v := get(o, key)
	if v == nil {
		return 0
	}
	n, err := v.Int64()
	if err != nil {
		r.wrong(key, v, "an integer")
	}
	return n
}

func (r *reader) float(o *fastjson.Value, key string) float64 {
	v := get(o, key)
	if v == nil {
		return 0
	}
	x, err := v.Float64()
	if err != nil {
		r.wrong(key, v, "a number")
	}
	return x
}

func (r *reader) bool(o *fastjson.Value, key string) bool {
	v := get(o, key)
	if v == nil {
		return false
	}
	b, err := v.Bool()
	if err != nil {
		r.wrong(key, v, "a boolean")
	}
	return b
}

func (r *reader) object(o *fastjson.Value, key string) *fastjson.Value {
	v := get(o, key)
	if v != nil && v.Type() != fastjson.TypeObject {
		r.wrong(key, v, "an object")
		return nil
	}
	return v
}

func (r *reader) array(o *fastjson.Value, key string) []*fastjson.Value {
	v := get(o, key)
	if v == nil {
		return nil
	}
	a, err := v.Array()
	if err != nil {
		r.wrong(key, v, "an array")
	}
	return a
}

// ollamaFields is what Decode reads from one Ollama line.
type ollamaFields struct {
	text, thinking []byte // message.content and .thinking, or response and thinking
	createdAt      []byte // the server's instant of the line, RFC 3339
	done           bool
	doneReason     []byte
	err            []byte

	loadDuration, promptEvalDuration, evalDuration int64
	promptEvalCount, evalCount                     int
}

// ollamaDecoder reads Ollama's lines with a reused fastjson parser.
type ollamaDecoder struct {
	h hot
	p parser
	f ollamaFields
}

// decode reads data into d.f: a token line on the fast path (hot), any
// other with fastjson.
func (d *ollamaDecoder) decode(data []byte) error {
	if d.h.ollama(data, &d.f) {
		return nil
	}
	return d.slow(data)
}

// slow reads data into d.f with fastjson.
func (d *ollamaDecoder) slow(data []byte) error {
	v, err := d.p.parse(data)
	if err != nil {
		return err
	}
	if v.Type() != fastjson.TypeObject {
		return fmt.Errorf("a line is an object, not %s", v.Type())
	}
	r := reader{}
	f := &d.f
	*f = ollamaFields{}
	if m := r.object(v, "message"); m != nil {
		f.text, _ = r.str(m, "content")
		f.thinking, _ = r.str(m, "thinking")
		// response and thinking are still read for their types.
		r.str(v, "response")
		r.str(v, "thinking")
	} else {
		f.text, _ = r.str(v, "response")
		f.thinking, _ = r.str(v, "thinking")
	}
	f.createdAt, _ = r.str(v, "created_at")
	f.done = r.bool(v, "done")
	f.doneReason, _ = r.str(v, "done_reason")
	f.err, _ = r.str(v, "error")
	f.loadDuration = r.int64(v, "load_duration")
	f.promptEvalDuration = r.int64(v, "prompt_eval_duration")
	f.evalDuration = r.int64(v, "eval_duration")
	f.promptEvalCount, _ = r.int(v, "prompt_eval_count")
	f.evalCount, _ = r.int(v, "eval_count")
	return r.err
}

// validString is b as a string, with any invalid UTF-8 (a server's broken
// escape) replaced by U+FFFD, as encoding/json would give it.
func validString(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}
