package sim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// proto is the wire protocol a response is written in. The engine is the
// same for all of them; only the encoding differs.
type proto int

const (
	protoOpenAI proto = iota
	protoAnthropic
	protoOllamaChat
	protoOllamaGenerate
	protoLlamaCpp // llama.cpp /completion (nativetoken.go)
	protoTGI      // TGI /generate_stream (nativetoken.go)
)

// alwaysStreams reports whether the protocol streams whatever the
// request's "stream" field says.
func (p proto) alwaysStreams() bool {
	return p == protoOllamaChat || p == protoOllamaGenerate || p == protoLlamaCpp || p == protoTGI
}

// nativeRoutes adds the Anthropic Messages API (POST /v1/messages, SSE) and
// Ollama's native API (POST /api/chat and /api/generate, NDJSON, always
// streamed; GET /api/tags). Ollama's final object reports the simulated
// server's own timing: prompt_eval_duration from the request's arrival to
// its first token (queueing included), eval_duration from the first token to
// the last, in nanoseconds. Non-streaming Anthropic requests are answered in
// the OpenAI shape.
func (s *Server) nativeRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/messages", func(w http.ResponseWriter, r *http.Request) { s.serve(w, r, true, protoAnthropic) })
	mux.HandleFunc("POST /api/chat", func(w http.ResponseWriter, r *http.Request) { s.serve(w, r, true, protoOllamaChat) })
	mux.HandleFunc("POST /api/generate", func(w http.ResponseWriter, r *http.Request) { s.serve(w, r, false, protoOllamaGenerate) })
	mux.HandleFunc("GET /api/tags", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"models": []map[string]any{{
			"name": s.cfg.ServedModel, "model": s.cfg.ServedModel,
			"details": map[string]any{"family": s.cfg.Model, "quantization_level": s.cfg.Quant},
		}}})
	})
	s.tokenRoutes(mux)
}

// nativeStart is what a native stream writes before its first token:
// Anthropic's message_start and content_block_start; nothing for Ollama.
func (e *encoder) nativeStart(buf []byte) []byte {
	if e.proto != protoAnthropic {
		return buf
	}
	model, _ := json.Marshal(e.model)
	buf = fmt.Appendf(buf, `event: message_start`+"\n"+`data: {"type":"message_start","message":{"id":"msg_sim_%d","type":"message","role":"assistant","content":[],"model":%s,"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":%d,"output_tokens":1}}}`+"\n\n", e.id, model, e.prompt)
	if e.tool != "" {
		return buf // the tool_use block opens with the first token (anthropicToolDelta)
	}
	return append(buf, `event: content_block_start`+"\n"+`data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`+"\n\n"...)
}

// nativeChunk writes one engine step's tokens, and the ending when the
// step finished the request; generated counts the tokens written so far.
func (e *encoder) nativeChunk(buf []byte, c chunk, generated *int) []byte {
	now := time.Now()
	if e.firstAt.IsZero() {
		e.firstAt = now
	}
	if e.proto == protoLlamaCpp || e.proto == protoTGI {
		return e.tokenChunkNative(buf, c, generated)
	}
	*generated += c.tokens
	switch e.proto {
	case protoAnthropic:
		if e.tool != "" {
			buf = e.anthropicToolDelta(buf, c)
		} else {
			buf = append(buf, `event: content_block_delta`+"\n"+`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"`...)
			buf = appendWords(buf, e.seed, e.id, c.first, c.tokens)
			buf = append(buf, `"}}`+"\n\n"...)
		}
		if c.finish != FinishNone {
			reason := "end_turn"
			switch {
			case e.tool != "":
				reason = "tool_use"
			case c.finish == FinishLength:
				reason = "max_tokens"
			}
			buf = append(buf, `event: content_block_stop`+"\n"+`data: {"type":"content_block_stop","index":0}`+"\n\n"...)
			buf = fmt.Appendf(buf, `event: message_delta`+"\n"+`data: {"type":"message_delta","delta":{"stop_reason":%q,"stop_sequence":null},"usage":{"output_tokens":%d}}`+"\n\n", reason, *generated)
			buf = append(buf, `event: message_stop`+"\n"+`data: {"type":"message_stop"}`+"\n\n"...)
		}
		return buf
	default:
		head := e.ollamaHead(buf, now)
		buf = head
		if e.proto == protoOllamaChat {
			buf = append(buf, `"message":{"role":"assistant","content":"`...)
			buf = appendWords(buf, e.seed, e.id, c.first, c.tokens)
			buf = append(buf, `"},"done":false}`+"\n"...)
		} else {
			buf = append(buf, `"response":"`...)
			buf = appendWords(buf, e.seed, e.id, c.first, c.tokens)
			buf = append(buf, `","done":false}`+"\n"...)
		}
		if c.finish != FinishNone {
			buf = e.ollamaHead(buf, now)
			if e.proto == protoOllamaChat {
				buf = append(buf, `"message":{"role":"assistant","content":""},`...)
			} else {
				buf = append(buf, `"response":"",`...)
			}
			prompt, eval := e.firstAt.Sub(e.start), now.Sub(e.firstAt)
			buf = fmt.Appendf(buf, `"done":true,"done_reason":%q,"total_duration":%d,"load_duration":0,"prompt_eval_count":%d,"prompt_eval_duration":%d,"eval_count":%d,"eval_duration":%d}`+"\n",
				c.finish.String(), int64(now.Sub(e.start)), e.prompt, int64(prompt), *generated, int64(eval))
		}
		return buf
	}
}

func (e *encoder) ollamaHead(buf []byte, now time.Time) []byte {
	model, _ := json.Marshal(e.model)
	buf = append(buf, `{"model":`...)
	buf = append(buf, model...)
	buf = append(buf, `,"created_at":"`...)
	buf = now.UTC().AppendFormat(buf, time.RFC3339Nano)
	return append(buf, `",`...)
}
