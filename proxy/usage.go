package proxy

import (
	"bytes"
	"io"

	"github.com/valyala/fastjson"

	"github.com/tokbench/tokbench/api"
)

// askUsage returns body with stream_options.include_usage set, for an
// OpenAI streamed request that does not ask for usage itself, and whether
// it changed body: the answer then carries a usage chunk the client did
// not ask for, which stripUsage keeps from it. Without stream_options
// every other byte stays as sent; with them (null, or an object without
// include_usage) the object is written anew, values and order kept. A key
// given twice is read, and edited, where the server reads it: its last
// occurrence (encoding/json, Python's json and pydantic), so a client
// whose last stream_options asks for usage keeps its usage chunk, and one
// whose last does not gets it asked for.
func askUsage(a api.Adapter, body []byte) ([]byte, bool) {
	if _, ok := a.(api.OpenAI); !ok {
		return body, false
	}
	jp := parsers.Get()
	defer func() {
		if len(body) <= 1<<20 { // a parser keeps a copy of a large body: not pooled
			parsers.Put(jp)
		}
	}()
	v, err := jp.ParseBytes(body)
	if err != nil || v.Type() != fastjson.TypeObject {
		return body, false
	}
	var ar fastjson.Arena
	switch opts := lastValue(v, "stream_options"); {
	case opts == nil:
		// The usual case (an SDK's request without stream options): the
		// field goes in before the closing brace, every other byte as sent.
		end := len(bytes.TrimRight(body, " \t\r\n")) - 1 // the closing brace
		out := make([]byte, 0, len(body)+len(`,"stream_options":{"include_usage":true}`))
		out = append(out, body[:end]...)
		if v.GetObject().Len() > 0 {
			out = append(out, ',')
		}
		out = append(out, `"stream_options":{"include_usage":true}`...)
		return append(out, body[end:]...), true
	case opts.Type() == fastjson.TypeNull:
		o := ar.NewObject()
		o.Set("include_usage", ar.NewTrue())
		setLast(v.GetObject(), "stream_options", o)
	case opts.Type() != fastjson.TypeObject:
		return body, false // not an object: the server's to refuse
	default:
		if include := lastValue(opts, "include_usage"); include != nil && include.Type() == fastjson.TypeTrue {
			return body, false
		}
		setLast(opts.GetObject(), "include_usage", ar.NewTrue())
	}
	return v.MarshalTo(nil), true
}

// lastValue is the value of the last occurrence of key in the object o
// (nil: none), the one servers read; fastjson's Get finds the first.
func lastValue(o *fastjson.Value, key string) *fastjson.Value {
	var last *fastjson.Value
	o.GetObject().Visit(func(k []byte, v *fastjson.Value) {
		if string(k) == key {
			last = v
		}
	})
	return last
}

// setLast makes value the one a server reads for key in o: in place of
// its only occurrence, or of its last with the earlier ones (which no
// server reads) left out. (fastjson's Set replaces the first occurrence,
// and values it parsed may be shared: null, true and false are.)
func setLast(o *fastjson.Object, key string, value *fastjson.Value) {
	n := 0
	o.Visit(func(k []byte, _ *fastjson.Value) {
		if string(k) == key {
			n++
		}
	})
	for ; n > 1; n-- {
		o.Del(key) // the first
	}
	o.Set(key, value)
}

// parsers parse request bodies.
var parsers fastjson.ParserPool

// usageStripper writes an SSE stream to w less the usage-only chunks
// (empty choices, a usage object) that askUsage had the server add. It
// holds back only an event not yet ended by its blank line.
type usageStripper struct {
	w       io.Writer
	pending []byte
	p       fastjson.Parser
}

// Write passes on every whole event of b (with what came before it) but a
// usage-only one.
func (s *usageStripper) Write(b []byte) (int, error) {
	s.pending = append(s.pending, b...)
	out := s.pending[:0] // kept events, compacted in place
	rest := s.pending
	for {
		end := eventEnd(rest)
		if end < 0 {
			break
		}
		ev := rest[:end]
		if !s.usageOnly(ev) {
			out = append(out, ev...)
		}
		rest = rest[end:]
	}
	kept := len(out)
	out = append(out, rest...) // the unfinished event, after the kept ones
	if kept > 0 {
		if _, err := s.w.Write(out[:kept]); err != nil {
			return 0, err
		}
	}
	s.pending = append(s.pending[:0], out[kept:]...)
	return len(b), nil
}

// Close writes what is held back: an answer that did not end its last
// event still reaches the client whole.
func (s *usageStripper) Close() error {
	if len(s.pending) == 0 {
		return nil
	}
	_, err := s.w.Write(s.pending)
	s.pending = s.pending[:0]
	return err
}

// eventEnd is the length of b's first event with the blank line that
// ends it (LF or CRLF line ends), or -1 when b holds no whole event.
func eventEnd(b []byte) int {
	for i := 0; i < len(b); i++ {
		if b[i] != '\n' {
			continue
		}
		switch {
		case i+1 < len(b) && b[i+1] == '\n':
			return i + 2
		case i+2 < len(b) && b[i+1] == '\r' && b[i+2] == '\n':
			return i + 3
		}
	}
	return -1
}

// usageOnly reports whether an event is one data line holding a chunk
// with no choices and a usage object.
func (s *usageStripper) usageOnly(ev []byte) bool {
	line, ok := bytes.CutPrefix(bytes.TrimLeft(ev, "\r\n"), []byte("data:"))
	if !ok {
		return false
	}
	line = bytes.TrimSpace(line)
	if bytes.IndexByte(line, '\n') >= 0 || !bytes.Contains(line, []byte(`"usage"`)) {
		return false
	}
	v, err := s.p.ParseBytes(line)
	if err != nil {
		return false
	}
	choices := v.Get("choices")
	usage := v.Get("usage")
	return choices != nil && choices.Type() == fastjson.TypeArray && len(choices.GetArray()) == 0 &&
		usage != nil && usage.Type() == fastjson.TypeObject
}
