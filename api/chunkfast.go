package api

import (
	"bytes"
	"strconv"
)

// hot is the fast path for the chunks that carry one token: fastjson
// parses every member of a chunk into values, about 45% more CPU per token
// than reading the few members Decode needs (BenchmarkOpenAIDecode), so
// the common shapes are read here and everything else goes to fastjson.
//
// It takes an object whose strings have no escapes and whose members are
// scalars, except OpenAI's "choices" (objects with a "delta" object of
// scalars), its "usage" (an object of integers) and Ollama's "message" (an
// object of scalars). It gives up — ok false, and the caller decodes with
// fastjson — on anything else: an escape, a nested value elsewhere, a
// repeated member it reads, "error", "timings", tool calls, token details,
// or an Ollama line that is done. Whatever it accepts decodes the same with
// fastjson; FuzzChunkDecoder and FuzzOllamaLine check that.
type hot struct {
	b []byte
	i int
}

func (h *hot) ws() {
	for h.i < len(h.b) {
		switch h.b[h.i] {
		case ' ', '\t', '\n', '\r':
			h.i++
		default:
			return
		}
	}
}

// next consumes c after white space.
func (h *hot) next(c byte) bool {
	h.ws()
	if h.i < len(h.b) && h.b[h.i] == c {
		h.i++
		return true
	}
	return false
}

// str reads a string without escapes.
func (h *hot) str() ([]byte, bool) {
	if !h.next('"') {
		return nil, false
	}
	n := bytes.IndexByte(h.b[h.i:], '"')
	if n < 0 {
		return nil, false
	}
	s := h.b[h.i : h.i+n]
	if bytes.IndexByte(s, '\\') >= 0 {
		return nil, false
	}
	h.i += n + 1
	return s, true
}

// scalar reads a string, number, true, false or null; raw is its text
// (a string's without quotes), isStr whether it was a string.
func (h *hot) scalar() (raw []byte, isStr, ok bool) {
	h.ws()
	if h.i >= len(h.b) {
		return nil, false, false
	}
	if h.b[h.i] == '"' {
		s, ok := h.str()
		return s, true, ok
	}
	start := h.i
	for h.i < len(h.b) {
		c := h.b[h.i]
		if c == ',' || c == '}' || c == ']' || c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			break
		}
		h.i++
	}
	raw = h.b[start:h.i]
	switch string(raw) {
	case "true", "false", "null":
		return raw, false, true
	}
	digits := raw
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || digits[0] < '0' || digits[0] > '9' {
		return nil, false, false
	}
	for _, c := range raw {
		if !(c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E') {
			return nil, false, false
		}
	}
	return raw, false, true
}

// object reads an object's members, calling member for each name with the
// position at its value; member reads the value and reports false to give
// up.
func (h *hot) object(member func(key []byte) bool) bool {
	if !h.next('{') {
		return false
	}
	if h.next('}') {
		return true
	}
	for {
		key, ok := h.str()
		if !ok || !h.next(':') || !member(key) {
			return false
		}
		if h.next('}') {
			return true
		}
		if !h.next(',') {
			return false
		}
	}
}

// end reports whether only white space is left.
func (h *hot) end() bool {
	h.ws()
	return h.i == len(h.b)
}

// openAI reads a token chunk into f. f's buffers are reused.
func (h *hot) openAI(data []byte, f *chunkFields) bool {
	h.b, h.i = data, 0
	*f = chunkFields{text: f.text[:0], reasoning: f.reasoning[:0]}
	var seen [4]bool // choices, usage, id, object
	once := func(i int) bool {
		if seen[i] {
			return false
		}
		seen[i] = true
		return true
	}
	ok := h.object(func(key []byte) bool {
		switch string(key) {
		case "choices":
			return once(0) && h.choices(f)
		case "usage":
			if !once(1) {
				return false
			}
			h.ws()
			if h.i < len(h.b) && h.b[h.i] == '{' {
				f.hasUsage = true
				return h.usage(f)
			}
			raw, _, ok := h.scalar()
			return ok && string(raw) == "null"
		case "id":
			s, ok := h.str()
			f.id = s
			return once(2) && ok
		case "object":
			s, ok := h.str()
			return once(3) && ok && string(s) != "error"
		case "error", "timings":
			return false
		}
		_, _, ok := h.scalar()
		return ok
	})
	return ok && h.end()
}

func (h *hot) choices(f *chunkFields) bool {
	if !h.next('[') {
		return false
	}
	if h.next(']') {
		return true
	}
	for {
		var content, text, rc, r []byte
		var hasContent, hasText, hasRC, hasR bool
		var seen [3]bool // delta, text, finish_reason
		ok := h.object(func(key []byte) bool {
			switch string(key) {
			case "delta":
				if seen[0] {
					return false
				}
				seen[0] = true
				var dseen [4]bool
				return h.object(func(k []byte) bool {
					raw, isStr, ok := h.scalar()
					if !ok {
						return false
					}
					i := -1
					switch string(k) {
					case "content":
						i, content, hasContent = 0, raw, isStr
					case "reasoning_content":
						i, rc, hasRC = 1, raw, isStr
					case "reasoning":
						i, r, hasR = 2, raw, isStr
					case "tool_calls":
						return false
					default:
						return true
					}
					if dseen[i] || !isStr && string(raw) != "null" {
						return false
					}
					dseen[i] = true
					return true
				})
			case "text", "finish_reason":
				i := 1
				if key[0] == 'f' {
					i = 2
				}
				raw, isStr, ok := h.scalar()
				if !ok || seen[i] || !isStr && string(raw) != "null" {
					return false
				}
				seen[i] = true
				if i == 1 {
					text, hasText = raw, isStr
				} else if isStr && len(raw) > 0 {
					f.finish = raw
				}
				return true
			}
			_, _, ok := h.scalar()
			return ok
		})
		if !ok {
			return false
		}
		if hasContent {
			f.text = append(f.text, content...)
		}
		if hasText {
			f.text = append(f.text, text...)
		}
		if hasRC {
			f.reasoning = append(f.reasoning, rc...)
		} else if hasR {
			f.reasoning = append(f.reasoning, r...)
		}
		if h.next(']') {
			return true
		}
		if !h.next(',') {
			return false
		}
	}
}

// usage reads a usage object of integers (no token details).
func (h *hot) usage(f *chunkFields) bool {
	var seen [2]bool
	return h.object(func(key []byte) bool {
		raw, isStr, ok := h.scalar()
		if !ok || isStr {
			return false
		}
		var dst *int
		switch string(key) {
		case "prompt_tokens":
			dst = &f.promptTokens
			ok = !seen[0]
			seen[0] = true
		case "completion_tokens":
			dst = &f.completionTokens
			ok = !seen[1]
			seen[1] = true
		case "prompt_tokens_details", "completion_tokens_details":
			return string(raw) == "null" // fastjson reads these as objects
		default:
			return string(raw) == "null" || isInt(raw)
		}
		if !ok {
			return false
		}
		if string(raw) == "null" {
			return true
		}
		n, err := strconv.Atoi(string(raw))
		*dst = n
		return err == nil
	})
}

func isInt(raw []byte) bool {
	_, err := strconv.ParseInt(string(raw), 10, 64)
	return err == nil
}

// ollama reads a token line (done false) into f.
func (h *hot) ollama(data []byte, f *ollamaFields) bool {
	h.b, h.i = data, 0
	*f = ollamaFields{}
	var message bool
	var resp, think []byte
	var seen [4]bool // message, response, thinking, done
	ok := h.object(func(key []byte) bool {
		i := -1
		switch string(key) {
		case "message":
			if seen[0] {
				return false
			}
			seen[0], message = true, true
			var mseen [2]bool
			return h.object(func(k []byte) bool {
				raw, isStr, ok := h.scalar()
				if !ok {
					return false
				}
				j := -1
				switch string(k) {
				case "content":
					j, f.text = 0, raw
				case "thinking":
					j, f.thinking = 1, raw
				default:
					return true
				}
				if mseen[j] || !isStr {
					return false
				}
				mseen[j] = true
				return true
			})
		case "response":
			i = 1
		case "thinking":
			i = 2
		case "created_at":
			raw, isStr, ok := h.scalar()
			if !ok || !isStr || f.createdAt != nil {
				return false
			}
			f.createdAt = raw
			return true
		case "done":
			raw, _, ok := h.scalar()
			if !ok || seen[3] || string(raw) != "false" {
				return false
			}
			seen[3] = true
			return true
		case "error", "done_reason", "eval_count", "eval_duration", "prompt_eval_count", "prompt_eval_duration", "load_duration":
			return false
		default:
			_, _, ok := h.scalar()
			return ok
		}
		raw, isStr, ok := h.scalar()
		if !ok || seen[i] || !isStr {
			return false
		}
		seen[i] = true
		if i == 1 {
			resp = raw
		} else {
			think = raw
		}
		return true
	})
	if !ok || !h.end() {
		return false
	}
	if !message {
		f.text, f.thinking = resp, think
	}
	return true
}
