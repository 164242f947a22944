package api

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
)

// chunkFields is what Decode needs from one streamed OpenAI chunk. Byte
// slices alias the chunk or the scanner's buffers and are valid until the
// next chunk is scanned.
type chunkFields struct {
	text      []byte // answer text of every choice: content, tool-call arguments, text
	reasoning []byte // reasoning_content (or reasoning) of every choice
	finish    []byte // the last non-empty finish_reason
	id        []byte
	errored   bool // an "error" member that is not null, or "object": "error"

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

// decodeChunkStd fills f from data with encoding/json: the reference that
// chunkScanner must agree with, and its fallback.
func decodeChunkStd(data []byte, f *chunkFields) error {
	var c openaiChunk
	if err := json.Unmarshal(data, &c); err != nil {
		return err
	}
	*f = chunkFields{}
	f.errored = len(c.Error) > 0 && !bytes.Equal(c.Error, []byte("null")) || c.Object == "error"
	f.id = []byte(c.ID)
	var text, reasoning strings.Builder
	for i := range c.Choices {
		ch := &c.Choices[i]
		if ch.Delta.Content != nil {
			text.WriteString(*ch.Delta.Content)
		}
		for _, tc := range ch.Delta.ToolCalls {
			text.WriteString(tc.Function.Arguments)
		}
		if ch.Text != nil {
			text.WriteString(*ch.Text)
		}
		if ch.Delta.ReasoningContent != nil {
			reasoning.WriteString(*ch.Delta.ReasoningContent)
		} else if ch.Delta.Reasoning != nil {
			reasoning.WriteString(*ch.Delta.Reasoning)
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			f.finish = []byte(*ch.FinishReason)
		}
	}
	f.text = []byte(text.String())
	f.reasoning = []byte(reasoning.String())
	if u := c.Usage; u != nil {
		f.hasUsage = true
		f.promptTokens, f.completionTokens = u.PromptTokens, u.CompletionTokens
		if d := u.CompletionTokensDetails; d != nil {
			f.reasoningTokens = d.ReasoningTokens
		}
		if d := u.PromptTokensDetails; d != nil && d.CachedTokens != nil {
			f.hasCached, f.cachedTokens = true, *d.CachedTokens
		}
	}
	if t := c.Timings; t != nil {
		f.hasTimings = true
		f.promptMs, f.promptPerSecond = t.PromptMs, t.PromptPerSecond
		f.predictedMs, f.predictedPerSecond = t.PredictedMs, t.PredictedPerSecond
		f.promptN, f.predictedN = t.PromptN, t.PredictedN
		if t.CacheN != nil {
			f.hasCacheN, f.cacheN = true, *t.CacheN
		}
	}
	return nil
}

// chunkScanner reads the fields of an OpenAI chunk without encoding/json's
// reflection and allocations: one pass over the bytes that validates the
// whole JSON text and picks out the members Decode uses. Whenever the input
// is anything but plain (invalid JSON, a type that does not fit, a repeated
// or case-folded member name, an escaped name, deep nesting), scan reports
// false and the caller decodes with encoding/json instead, so the result is
// always what encoding/json would give. FuzzChunkScanner checks that.
//
// A chunkScanner is reused from chunk to chunk; it is not safe for
// concurrent use.
type chunkScanner struct {
	data []byte
	pos  int
	f    chunkFields
	// per choice, appended to f.text / f.reasoning when the choice ends
	content, toolArgs, text, rc, r   []byte
	hasContent, hasText, hasRC, hasR bool
	arena                            []byte // unescaped strings
}

// maxDepth bounds nesting in the fast path; deeper input goes to encoding/json.
const maxDepth = 64

// scan reads data into s.f and reports whether it could.
func (s *chunkScanner) scan(data []byte) bool {
	s.data, s.pos = data, 0
	s.arena = s.arena[:0]
	s.f = chunkFields{text: s.f.text[:0], reasoning: s.f.reasoning[:0]}
	s.ws()
	if !s.top() {
		return false
	}
	s.ws()
	return s.pos == len(s.data)
}

var (
	topKeys      = []string{"choices", "usage", "timings", "error", "id", "object", "message"}
	choiceKeys   = []string{"delta", "text", "finish_reason"}
	deltaKeys    = []string{"content", "reasoning_content", "reasoning", "tool_calls"}
	toolKeys     = []string{"function"}
	functionKeys = []string{"arguments"}
	usageKeys    = []string{"prompt_tokens", "completion_tokens", "completion_tokens_details", "prompt_tokens_details"}
	detailKeys   = []string{"reasoning_tokens"}
	promptKeys   = []string{"cached_tokens"}
	timingKeys   = []string{"prompt_ms", "prompt_per_second", "predicted_ms", "predicted_per_second", "prompt_n", "predicted_n", "cache_n"}
)

// once marks member i of an object as seen and reports false when it was
// already: encoding/json merges repeated members, the fast path does not.
func once(seen *uint32, i uint) bool {
	if *seen&(1<<i) != 0 {
		return false
	}
	*seen |= 1 << i
	return true
}

// other handles a member the fast path does not use: it must not match a
// used name case-insensitively (encoding/json would take it), and its value
// is validated and skipped.
func (s *chunkScanner) other(key []byte, used []string) bool {
	for _, u := range used {
		if asciiEqualFold(u, key) {
			return false
		}
	}
	return s.skip(1)
}

// asciiEqualFold is strings.EqualFold for ASCII names (member names with
// other bytes never reach it).
func asciiEqualFold(u string, key []byte) bool {
	if len(u) != len(key) {
		return false
	}
	for i := 0; i < len(u); i++ {
		a, b := u[i], key[i]
		if 'A' <= a && a <= 'Z' {
			a += 'a' - 'A'
		}
		if 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		if a != b {
			return false
		}
	}
	return true
}

func (s *chunkScanner) top() bool {
	if !s.open('{') {
		return false
	}
	var seen uint32
	for n := 0; ; n++ {
		key, done, ok := s.member(n, '}')
		if !ok {
			return false
		}
		if done {
			return true
		}
		switch string(key) {
		case "choices":
			ok = once(&seen, 0) && s.choices()
		case "usage":
			ok = once(&seen, 1) && s.usage()
		case "timings":
			ok = once(&seen, 2) && s.timings()
		case "error":
			start := s.pos
			ok = once(&seen, 3) && s.skip(1)
			s.f.errored = s.f.errored || ok && string(s.data[start:s.pos]) != "null"
		case "id":
			var v []byte
			v, ok = s.plainString()
			ok = once(&seen, 4) && ok
			s.f.id = v
		case "object":
			var v []byte
			v, ok = s.plainString()
			ok = once(&seen, 5) && ok
			s.f.errored = s.f.errored || string(v) == "error"
		case "message":
			_, ok = s.plainString()
			ok = once(&seen, 6) && ok
		default:
			ok = s.other(key, topKeys)
		}
		if !ok {
			return false
		}
	}
}

func (s *chunkScanner) choices() bool {
	if s.null() {
		return true
	}
	if !s.open('[') {
		return false
	}
	for n := 0; ; n++ {
		done, ok := s.element(n)
		if !ok {
			return false
		}
		if done {
			return true
		}
		if !s.choice() {
			return false
		}
	}
}

func (s *chunkScanner) choice() bool {
	if s.null() {
		return true
	}
	if !s.open('{') {
		return false
	}
	s.content, s.toolArgs, s.text, s.rc, s.r = nil, s.toolArgs[:0], nil, nil, nil
	s.hasContent, s.hasText, s.hasRC, s.hasR = false, false, false, false
	var seen uint32
	for n := 0; ; n++ {
		key, done, ok := s.member(n, '}')
		if !ok {
			return false
		}
		if done {
			break
		}
		switch string(key) {
		case "delta":
			ok = once(&seen, 0) && s.delta()
		case "text":
			ok = once(&seen, 1)
			s.text, s.hasText, ok = s.optString(ok)
		case "finish_reason":
			ok = once(&seen, 2)
			var v []byte
			v, _, ok = s.optString(ok)
			if len(v) > 0 {
				s.f.finish = v
			}
		default:
			ok = s.other(key, choiceKeys)
		}
		if !ok {
			return false
		}
	}
	if s.hasContent {
		s.f.text = append(s.f.text, s.content...)
	}
	s.f.text = append(s.f.text, s.toolArgs...)
	if s.hasText {
		s.f.text = append(s.f.text, s.text...)
	}
	if s.hasRC {
		s.f.reasoning = append(s.f.reasoning, s.rc...)
	} else if s.hasR {
		s.f.reasoning = append(s.f.reasoning, s.r...)
	}
	return true
}

func (s *chunkScanner) delta() bool {
	if s.null() {
		return true
	}
	if !s.open('{') {
		return false
	}
	var seen uint32
	for n := 0; ; n++ {
		key, done, ok := s.member(n, '}')
		if !ok {
			return false
		}
		if done {
			return true
		}
		switch string(key) {
		case "content":
			s.content, s.hasContent, ok = s.optString(once(&seen, 0))
		case "reasoning_content":
			s.rc, s.hasRC, ok = s.optString(once(&seen, 1))
		case "reasoning":
			s.r, s.hasR, ok = s.optString(once(&seen, 2))
		case "tool_calls":
			ok = once(&seen, 3) && s.toolCalls()
		default:
			ok = s.other(key, deltaKeys)
		}
		if !ok {
			return false
		}
	}
}

func (s *chunkScanner) toolCalls() bool {
	if s.null() {
		return true
	}
	if !s.open('[') {
		return false
	}
	for n := 0; ; n++ {
		done, ok := s.element(n)
		if !ok {
			return false
		}
		if done {
			return true
		}
		if !s.toolCall() {
			return false
		}
	}
}

func (s *chunkScanner) toolCall() bool {
	if s.null() {
		return true
	}
	if !s.open('{') {
		return false
	}
	var seen uint32
	for n := 0; ; n++ {
		key, done, ok := s.member(n, '}')
		if !ok {
			return false
		}
		if done {
			return true
		}
		switch string(key) {
		case "function":
			ok = once(&seen, 0) && s.function()
		default:
			ok = s.other(key, toolKeys)
		}
		if !ok {
			return false
		}
	}
}

func (s *chunkScanner) function() bool {
	if s.null() {
		return true
	}
	if !s.open('{') {
		return false
	}
	var seen uint32
	for n := 0; ; n++ {
		key, done, ok := s.member(n, '}')
		if !ok {
			return false
		}
		if done {
			return true
		}
		switch string(key) {
		case "arguments":
			var v []byte
			v, ok = s.plainString()
			ok = once(&seen, 0) && ok
			s.toolArgs = append(s.toolArgs, v...)
		default:
			ok = s.other(key, functionKeys)
		}
		if !ok {
			return false
		}
	}
}

func (s *chunkScanner) usage() bool {
	if s.null() {
		return true
	}
	if !s.open('{') {
		return false
	}
	s.f.hasUsage = true
	var seen uint32
	for n := 0; ; n++ {
		key, done, ok := s.member(n, '}')
		if !ok {
			return false
		}
		if done {
			return true
		}
		switch string(key) {
		case "prompt_tokens":
			ok = once(&seen, 0) && s.int(&s.f.promptTokens)
		case "completion_tokens":
			ok = once(&seen, 1) && s.int(&s.f.completionTokens)
		case "completion_tokens_details":
			ok = once(&seen, 2) && s.details()
		case "prompt_tokens_details":
			ok = once(&seen, 3) && s.promptDetails()
		default:
			ok = s.other(key, usageKeys)
		}
		if !ok {
			return false
		}
	}
}

// details reads usage.completion_tokens_details: its reasoning tokens.
func (s *chunkScanner) details() bool {
	var has bool
	return s.oneInt("reasoning_tokens", detailKeys, &s.f.reasoningTokens, &has)
}

// promptDetails reads usage.prompt_tokens_details: the prompt tokens the
// server took from its prefix cache (OpenAI, vLLM, SGLang).
func (s *chunkScanner) promptDetails() bool {
	return s.oneInt("cached_tokens", promptKeys, &s.f.cachedTokens, &s.f.hasCached)
}

// oneInt reads an object (or null) of which one integer member, name, is
// used: into dst, with has set when it was there and not null.
func (s *chunkScanner) oneInt(name string, keys []string, dst *int, has *bool) bool {
	if s.null() {
		return true
	}
	if !s.open('{') {
		return false
	}
	var seen uint32
	for n := 0; ; n++ {
		key, done, ok := s.member(n, '}')
		if !ok {
			return false
		}
		if done {
			return true
		}
		switch {
		case string(key) != name:
			ok = s.other(key, keys)
		case !once(&seen, 0):
			ok = false
		case s.null():
		default:
			ok = s.int(dst)
			*has = ok
		}
		if !ok {
			return false
		}
	}
}

func (s *chunkScanner) timings() bool {
	if s.null() {
		return true
	}
	if !s.open('{') {
		return false
	}
	s.f.hasTimings = true
	var seen uint32
	for n := 0; ; n++ {
		key, done, ok := s.member(n, '}')
		if !ok {
			return false
		}
		if done {
			return true
		}
		switch string(key) {
		case "prompt_ms":
			ok = once(&seen, 0) && s.float(&s.f.promptMs)
		case "prompt_per_second":
			ok = once(&seen, 1) && s.float(&s.f.promptPerSecond)
		case "predicted_ms":
			ok = once(&seen, 2) && s.float(&s.f.predictedMs)
		case "predicted_per_second":
			ok = once(&seen, 3) && s.float(&s.f.predictedPerSecond)
		case "prompt_n":
			ok = once(&seen, 4) && s.int(&s.f.promptN)
		case "predicted_n":
			ok = once(&seen, 5) && s.int(&s.f.predictedN)
		case "cache_n":
			if s.null() {
				ok = once(&seen, 6)
				break
			}
			ok = once(&seen, 6) && s.int(&s.f.cacheN)
			s.f.hasCacheN = ok
		default:
			ok = s.other(key, timingKeys)
		}
		if !ok {
			return false
		}
	}
}

// ---- lexical level ----

func (s *chunkScanner) ws() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// open consumes c ('{' or '[') and the white space after it.
func (s *chunkScanner) open(c byte) bool {
	if s.pos >= len(s.data) || s.data[s.pos] != c {
		return false
	}
	s.pos++
	s.ws()
	return true
}

// null consumes a null literal if one is next.
func (s *chunkScanner) null() bool {
	if bytes.HasPrefix(s.data[s.pos:], []byte("null")) {
		s.pos += 4
		return true
	}
	return false
}

// member reads the name of the n-th member of an object (after its value's
// separator) and the colon; done at the closing brace.
func (s *chunkScanner) member(n int, closer byte) (key []byte, done, ok bool) {
	s.ws()
	if s.pos >= len(s.data) {
		return nil, false, false
	}
	if n > 0 {
		switch s.data[s.pos] {
		case closer:
			s.pos++
			return nil, true, true
		case ',':
			s.pos++
			s.ws()
		default:
			return nil, false, false
		}
	} else if s.data[s.pos] == closer {
		s.pos++
		return nil, true, true
	}
	start, end, flags, ok := s.str()
	if !ok || flags != 0 { // an escaped or non-ASCII name: leave it to encoding/json
		return nil, false, false
	}
	s.ws()
	if s.pos >= len(s.data) || s.data[s.pos] != ':' {
		return nil, false, false
	}
	s.pos++
	s.ws()
	return s.data[start:end], false, true
}

// element positions at the n-th element of an array; done at its end.
func (s *chunkScanner) element(n int) (done, ok bool) {
	s.ws()
	if s.pos >= len(s.data) {
		return false, false
	}
	switch c := s.data[s.pos]; {
	case c == ']':
		s.pos++
		return true, true
	case n > 0 && c == ',':
		s.pos++
		s.ws()
		return false, true
	case n > 0:
		return false, false
	}
	return false, true
}

const (
	escaped  = 1
	nonASCII = 2
)

// str scans a string literal; data[start:end] is its raw content.
func (s *chunkScanner) str() (start, end, flags int, ok bool) {
	if s.pos >= len(s.data) || s.data[s.pos] != '"' {
		return 0, 0, 0, false
	}
	start = s.pos + 1
	for i := start; i < len(s.data); {
		c := s.data[i]
		switch {
		case c == '"':
			s.pos = i + 1
			return start, i, flags, true
		case c == '\\':
			flags |= escaped
			if i+1 >= len(s.data) {
				return 0, 0, 0, false
			}
			switch s.data[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(s.data) {
					return 0, 0, 0, false
				}
				for _, h := range s.data[i+2 : i+6] {
					if !isHex(h) {
						return 0, 0, 0, false
					}
				}
				i += 6
			default:
				return 0, 0, 0, false
			}
		case c < 0x20:
			return 0, 0, 0, false
		default:
			if c >= utf8.RuneSelf {
				flags |= nonASCII
			}
			i++
		}
	}
	return 0, 0, 0, false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// plainString reads a string (or null, giving nil) as encoding/json would
// decode it into a string field.
func (s *chunkScanner) plainString() ([]byte, bool) {
	v, _, ok := s.optString(true)
	return v, ok
}

// optString reads a string or null, for a *string field; present is false
// for null. Passing ok false fails at once (a repeated member).
func (s *chunkScanner) optString(ok bool) (v []byte, present, ok2 bool) {
	if !ok {
		return nil, false, false
	}
	if s.null() {
		return nil, false, true
	}
	start, end, flags, ok := s.str()
	if !ok {
		return nil, false, false
	}
	raw := s.data[start:end]
	if flags == 0 || flags == nonASCII && utf8.Valid(raw) {
		return raw, true, true
	}
	// Escapes or invalid UTF-8: let encoding/json unquote this one string.
	var str string
	if json.Unmarshal(s.data[start-1:end+1], &str) != nil {
		return nil, false, false
	}
	at := len(s.arena)
	s.arena = append(s.arena, str...)
	return s.arena[at:len(s.arena):len(s.arena)], true, true
}

// number scans a JSON number literal.
func (s *chunkScanner) number() ([]byte, bool) {
	d, i := s.data, s.pos
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && '1' <= d[i] && d[i] <= '9':
		for i < len(d) && '0' <= d[i] && d[i] <= '9' {
			i++
		}
	default:
		return nil, false
	}
	if i < len(d) && d[i] == '.' {
		i++
		if i >= len(d) || d[i] < '0' || d[i] > '9' {
			return nil, false
		}
		for i < len(d) && '0' <= d[i] && d[i] <= '9' {
			i++
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if i >= len(d) || d[i] < '0' || d[i] > '9' {
			return nil, false
		}
		for i < len(d) && '0' <= d[i] && d[i] <= '9' {
			i++
		}
	}
	lit := d[s.pos:i]
	s.pos = i
	return lit, true
}

// int reads an integer (or null, leaving *v) into an int field.
func (s *chunkScanner) int(v *int) bool {
	if s.null() {
		return true
	}
	lit, ok := s.number()
	if !ok {
		return false
	}
	n, err := strconv.ParseInt(string(lit), 10, 0)
	if err != nil {
		return false
	}
	*v = int(n)
	return true
}

// float reads a number (or null, leaving *v) into a float64 field.
func (s *chunkScanner) float(v *float64) bool {
	if s.null() {
		return true
	}
	lit, ok := s.number()
	if !ok {
		return false
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil {
		return false
	}
	*v = f
	return true
}

// skip validates and skips any value.
func (s *chunkScanner) skip(depth int) bool {
	if depth > maxDepth || s.pos >= len(s.data) {
		return false
	}
	switch c := s.data[s.pos]; c {
	case '{':
		s.pos++
		for n := 0; ; n++ {
			s.ws()
			if s.pos >= len(s.data) {
				return false
			}
			if s.data[s.pos] == '}' && n == 0 {
				s.pos++
				return true
			}
			if n > 0 {
				if s.data[s.pos] == '}' {
					s.pos++
					return true
				}
				if s.data[s.pos] != ',' {
					return false
				}
				s.pos++
				s.ws()
			}
			if _, _, _, ok := s.str(); !ok {
				return false
			}
			s.ws()
			if s.pos >= len(s.data) || s.data[s.pos] != ':' {
				return false
			}
			s.pos++
			s.ws()
			if !s.skip(depth + 1) {
				return false
			}
		}
	case '[':
		s.pos++
		for n := 0; ; n++ {
			s.ws()
			if s.pos >= len(s.data) {
				return false
			}
			if s.data[s.pos] == ']' {
				s.pos++
				return true
			}
			if n > 0 {
				if s.data[s.pos] != ',' {
					return false
				}
				s.pos++
				s.ws()
			}
			if !s.skip(depth + 1) {
				return false
			}
		}
	case '"':
		_, _, _, ok := s.str()
		return ok
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	default:
		_, ok := s.number()
		return ok
	}
}

func (s *chunkScanner) literal(lit string) bool {
	if !bytes.HasPrefix(s.data[s.pos:], []byte(lit)) {
		return false
	}
	s.pos += len(lit)
	return true
}
