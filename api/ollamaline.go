package api

import (
	"unicode/utf8"
)

// ollamaScanner reads Ollama's hot line, a token that is not the last:
//
//	{"model":"m","created_at":"…","message":{"role":"assistant","content":" world"},"done":false}
//	{"model":"m","created_at":"…","response":" world","done":false}
//
// without encoding/json. It handles exactly these shapes: an object whose
// members are strings, numbers, booleans or null, plus at most one
// "message" that is an object of the same scalars. It reports false, and
// the caller decodes the line with encoding/json, for anything else:
// invalid JSON, nesting beyond message, "done" other than false, a
// "message", "response", "thinking" or "content" that is not a string, a
// repeated one of those, a member name that is escaped, not ASCII, or
// matches another ollamaLine field case-insensitively (so "error" and the
// final line's counts always go to encoding/json), a string that is not
// valid UTF-8, and a \u escape of a surrogate. Everything it accepts
// decodes to the same ollamaLine under encoding/json; FuzzOllamaLine checks
// that.
//
// It uses chunkScanner's lexical methods (already fuzzed by
// FuzzChunkScanner) and is reused from line to line; it is not safe for
// concurrent use.
type ollamaScanner struct {
	lex chunkScanner
	f   ollamaFields
	buf []byte // unescaped strings
}

// ollamaFields is what the fast path reads from a line. Byte slices alias
// the line or the scanner's buffer and are valid until the next scan.
type ollamaFields struct {
	message                  bool // an object "message" is present
	content, messageThinking []byte
	response, thinking       []byte
}

// text returns the chunk's answer and reasoning text, as Decode picks them
// from an ollamaLine.
func (f *ollamaFields) text() (text, thinking []byte) {
	if f.message {
		return f.content, f.messageThinking
	}
	return f.response, f.thinking
}

// ollamaKeys are ollamaLine's member names: encoding/json matches them
// case-insensitively, so an unknown name that folds to one of them is not
// for the fast path.
var (
	ollamaKeys        = []string{"message", "response", "thinking", "done", "done_reason", "error", "load_duration", "prompt_eval_count", "prompt_eval_duration", "eval_count", "eval_duration"}
	ollamaMessageKeys = []string{"content", "thinking"}
)

// scan reads data into s.f and reports whether it could.
func (s *ollamaScanner) scan(data []byte) bool {
	l := &s.lex
	l.data, l.pos = data, 0
	s.buf = s.buf[:0]
	s.f = ollamaFields{}
	l.ws()
	if !l.open('{') {
		return false
	}
	var seen uint32
	for n := 0; ; n++ {
		key, done, ok := l.member(n, '}')
		if !ok {
			return false
		}
		if done {
			break
		}
		switch string(key) {
		case "message":
			ok = once(&seen, 0) && s.message()
		case "response":
			s.f.response, ok = s.string()
			ok = once(&seen, 1) && ok
		case "thinking":
			s.f.thinking, ok = s.string()
			ok = once(&seen, 2) && ok
		case "done":
			ok = once(&seen, 3) && l.literal("false")
		default:
			ok = s.other(key, ollamaKeys)
		}
		if !ok {
			return false
		}
	}
	l.ws()
	return l.pos == len(l.data)
}

// message reads the "message" object.
func (s *ollamaScanner) message() bool {
	l := &s.lex
	if !l.open('{') {
		return false
	}
	s.f.message = true
	var seen uint32
	for n := 0; ; n++ {
		key, done, ok := l.member(n, '}')
		if !ok {
			return false
		}
		if done {
			return true
		}
		switch string(key) {
		case "content":
			s.f.content, ok = s.string()
			ok = once(&seen, 0) && ok
		case "thinking":
			s.f.messageThinking, ok = s.string()
			ok = once(&seen, 1) && ok
		default:
			ok = s.other(key, ollamaMessageKeys)
		}
		if !ok {
			return false
		}
	}
}

// other skips the scalar value of a member that ollamaLine does not have
// (encoding/json ignores it, however often it is repeated). A name that
// folds to a used one is refused.
func (s *ollamaScanner) other(key []byte, used []string) bool {
	for _, u := range used {
		if asciiEqualFold(u, key) {
			return false
		}
	}
	l := &s.lex
	if l.pos >= len(l.data) {
		return false
	}
	switch c := l.data[l.pos]; {
	case c == '"':
		start, end, flags, ok := l.str()
		return ok && (flags&nonASCII == 0 || utf8.Valid(l.data[start:end]))
	case c == 't':
		return l.literal("true")
	case c == 'f':
		return l.literal("false")
	case c == 'n':
		return l.literal("null")
	case c == '-' || '0' <= c && c <= '9':
		_, ok := l.number()
		return ok
	}
	return false
}

// string reads a string value as encoding/json decodes it into a string
// field. It refuses null (which would leave the field alone), invalid
// UTF-8 and \u escapes of surrogates; the escapes it does take map to one
// rune each exactly as in encoding/json.
func (s *ollamaScanner) string() ([]byte, bool) {
	l := &s.lex
	start, end, flags, ok := l.str()
	if !ok {
		return nil, false
	}
	raw := l.data[start:end]
	// Escapes are ASCII, so a multi-byte sequence never spans one: raw is
	// valid UTF-8 exactly when every unescaped run of it is.
	if flags&nonASCII != 0 && !utf8.Valid(raw) {
		return nil, false
	}
	if flags&escaped == 0 {
		return raw, true
	}
	at := len(s.buf)
	for i := 0; i < len(raw); {
		c := raw[i]
		if c != '\\' {
			s.buf = append(s.buf, c)
			i++
			continue
		}
		// str has checked that an escape is complete and well formed.
		switch e := raw[i+1]; e {
		case '"', '\\', '/':
			s.buf = append(s.buf, e)
		case 'b':
			s.buf = append(s.buf, '\b')
		case 'f':
			s.buf = append(s.buf, '\f')
		case 'n':
			s.buf = append(s.buf, '\n')
		case 'r':
			s.buf = append(s.buf, '\r')
		case 't':
			s.buf = append(s.buf, '\t')
		case 'u':
			var r rune
			for _, h := range raw[i+2 : i+6] {
				r = r<<4 | rune(unhex(h))
			}
			if utf8.RuneLen(r) < 0 { // a surrogate half: pairs and lone halves go to encoding/json
				return nil, false
			}
			s.buf = utf8.AppendRune(s.buf, r)
			i += 4
		}
		i += 2
	}
	return s.buf[at:len(s.buf):len(s.buf)], true
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}
