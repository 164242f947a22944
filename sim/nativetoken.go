package sim

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// EngineName is the name the simulator gives itself where a server names its
// engine: owned_by in /v1/models, build_info in /props, version in /info.
// Probing (probe.Detect) reads it to know that the server speaking llama.cpp
// and TGI is the simulator, which speaks OpenAI first.
const EngineName = "tokbench-sim"

// tokenRoutes adds llama.cpp's native POST /completion and GET /props, and
// TGI's POST /generate_stream and GET /info. Both streams are SSE, one event
// per token (a step that yields k tokens writes k events at once), always
// streamed:
//
//   - llama.cpp: {"content", "tokens", "stop": false, …} per token, then a
//     last event with "stop": true, stop_type, token counts and "timings"
//     from the engine's schedule: prompt_ms from the request's arrival to
//     its first token (queueing included), predicted_ms from the first
//     token to the last, predicted_n counting every output token as
//     llama.cpp does (so predicted_per_second is n/(t_last − t_first)).
//   - TGI: {"index", "token": {"id", "text", "logprob", "special"},
//     "generated_text": null, "details": null} per token; the last token
//     carries generated_text and details {finish_reason, generated_tokens,
//     seed, input_length}. A request stopped by EOS ends with a special
//     "</s>" token, counted in generated_tokens as TGI counts it.
func (s *Server) tokenRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /completion", func(w http.ResponseWriter, r *http.Request) { s.serve(w, r, false, protoLlamaCpp) })
	mux.HandleFunc("POST /generate_stream", func(w http.ResponseWriter, r *http.Request) { s.serve(w, r, false, protoTGI) })
	mux.HandleFunc("GET /props", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, map[string]any{
			"default_generation_settings": map[string]any{
				"n_ctx": s.maxLen(), "params": map[string]any{"n_predict": -1},
			},
			"total_slots": s.cfg.MaxInflight, "model_path": s.cfg.ServedModel, "build_info": EngineName,
		})
	})
	mux.HandleFunc("GET /info", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, map[string]any{
			"model_id": s.cfg.ServedModel, "model_dtype": s.cfg.Quant, "router": "text-generation-router",
			"max_input_tokens": s.maxLen() - 1, "max_total_tokens": s.maxLen(),
			"max_concurrent_requests": s.cfg.MaxInflight, "version": EngineName,
		})
	})
}

// maxLen is the longest request (prompt + output) the server accepts.
func (s *Server) maxLen() int { return min(s.cfg.MaxModelLen, s.kvCap) }

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// tokenChunkNative writes one step's tokens in llama.cpp's or TGI's
// per-token events, and the ending when the step finished the request.
// generated counts the tokens written so far.
func (e *encoder) tokenChunkNative(buf []byte, c chunk, generated *int) []byte {
	if *generated == 0 {
		e.firstEng = c.at
	}
	for i := c.first; i < c.first+c.tokens; i++ {
		*generated++
		word := outputWord(e.seed, e.id, i)
		last := c.finish != FinishNone && i == c.first+c.tokens-1
		if e.proto == protoLlamaCpp {
			buf = append(buf, `data: {"index":0,"content":"`...)
			buf = append(buf, word...)
			buf = append(buf, `","tokens":[`...)
			buf = strconv.AppendInt(buf, int64(wordIDs[word]), 10)
			buf = append(buf, `],"stop":false,"id_slot":-1,"tokens_predicted":`...)
			buf = strconv.AppendInt(buf, int64(*generated), 10)
			buf = append(buf, `,"tokens_evaluated":`...)
			buf = strconv.AppendInt(buf, int64(e.prompt), 10)
			buf = append(buf, "}\n\n"...)
			continue
		}
		e.text = append(e.text, word...)
		buf = e.tgiToken(buf, *generated, wordIDs[word], word, false)
		if !last {
			buf = append(buf, `,"generated_text":null,"details":null}`+"\n\n"...)
		} else if c.finish == FinishLength {
			buf = e.tgiEnd(buf, "length", *generated)
		} else {
			buf = append(buf, `,"generated_text":null,"details":null}`+"\n\n"...)
			buf = e.tgiToken(buf, *generated+1, 2, "</s>", true)
			buf = e.tgiEnd(buf, "eos_token", *generated+1)
		}
	}
	if c.finish == FinishNone || e.proto != protoLlamaCpp {
		return buf
	}
	stopType := "limit"
	if c.finish != FinishLength {
		stopType = "eos"
	}
	prompt, predicted := e.firstEng-e.arrival, c.at-e.firstEng
	t := llamacppTimings{
		PromptN: e.prompt, PromptMs: msOf(prompt), PredictedN: *generated, PredictedMs: msOf(predicted),
	}
	if prompt > 0 {
		t.PromptPerTokenMs = t.PromptMs / float64(e.prompt)
		t.PromptPerSecond = float64(e.prompt) / prompt.Seconds()
	}
	if predicted > 0 {
		t.PredictedPerTokenMs = t.PredictedMs / float64(*generated)
		t.PredictedPerSecond = float64(*generated) / predicted.Seconds()
	}
	end, _ := json.Marshal(map[string]any{
		"index": 0, "content": "", "tokens": []int{}, "id_slot": 0, "stop": true, "model": e.model,
		"tokens_predicted": *generated, "tokens_evaluated": e.prompt, "stop_type": stopType,
		"stopping_word": "", "truncated": false, "tokens_cached": e.prompt + *generated, "timings": t,
	})
	buf = append(buf, "data: "...)
	buf = append(buf, end...)
	return append(buf, "\n\n"...)
}

type llamacppTimings struct {
	PromptN             int     `json:"prompt_n"`
	PromptMs            float64 `json:"prompt_ms"`
	PromptPerTokenMs    float64 `json:"prompt_per_token_ms"`
	PromptPerSecond     float64 `json:"prompt_per_second"`
	PredictedN          int     `json:"predicted_n"`
	PredictedMs         float64 `json:"predicted_ms"`
	PredictedPerTokenMs float64 `json:"predicted_per_token_ms"`
	PredictedPerSecond  float64 `json:"predicted_per_second"`
}

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// tgiToken writes a TGI event up to the token object, without closing it.
func (e *encoder) tgiToken(buf []byte, index, id int, text string, special bool) []byte {
	buf = append(buf, `data: {"index":`...)
	buf = strconv.AppendInt(buf, int64(index), 10)
	buf = append(buf, `,"token":{"id":`...)
	buf = strconv.AppendInt(buf, int64(id), 10)
	buf = append(buf, `,"text":"`...)
	buf = append(buf, text...)
	buf = append(buf, `","logprob":-0.5,"special":`...)
	buf = strconv.AppendBool(buf, special)
	return append(buf, `},"top_tokens":[]`...)
}

// tgiEnd closes the last TGI event with generated_text and details.
func (e *encoder) tgiEnd(buf []byte, reason string, generated int) []byte {
	text, _ := json.Marshal(string(e.text))
	buf = append(buf, `,"generated_text":`...)
	buf = append(buf, text...)
	buf = append(buf, `,"details":{"finish_reason":"`...)
	buf = append(buf, reason...)
	buf = append(buf, `","generated_tokens":`...)
	buf = strconv.AppendInt(buf, int64(generated), 10)
	buf = append(buf, `,"seed":null,"input_length":`...)
	buf = strconv.AppendInt(buf, int64(e.prompt), 10)
	return append(buf, "}}\n\n"...)
}

// tgiShutdownEvent is TGI's in-stream error, for a stream the engine ends.
const tgiShutdownEvent = `data: {"error":"server shutting down","error_type":"overloaded"}` + "\n\n"

// wordIDs are the token ids the native protocols report: a word's place in
// outputWords, offset past the low ids tokenizers keep for special tokens.
var wordIDs = func() map[string]int {
	m := make(map[string]int, len(outputWords))
	for i, w := range outputWords {
		m[w] = 100 + i
	}
	return m
}()
