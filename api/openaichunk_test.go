package api

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// sameFields reports how two chunkFields differ, or "".
func sameFields(a, b *chunkFields) string {
	switch {
	case !bytes.Equal(a.text, b.text):
		return "text " + string(a.text) + " vs " + string(b.text)
	case !bytes.Equal(a.reasoning, b.reasoning):
		return "reasoning " + string(a.reasoning) + " vs " + string(b.reasoning)
	case !bytes.Equal(a.finish, b.finish):
		return "finish " + string(a.finish) + " vs " + string(b.finish)
	case !bytes.Equal(a.id, b.id):
		return "id " + string(a.id) + " vs " + string(b.id)
	case a.errored != b.errored:
		return "errored"
	case a.hasUsage != b.hasUsage || a.promptTokens != b.promptTokens ||
		a.completionTokens != b.completionTokens || a.reasoningTokens != b.reasoningTokens:
		return "usage"
	case a.hasCached != b.hasCached || a.cachedTokens != b.cachedTokens:
		return "cached tokens"
	case a.hasTimings != b.hasTimings || a.promptMs != b.promptMs || a.promptPerSecond != b.promptPerSecond ||
		a.predictedMs != b.predictedMs || a.predictedPerSecond != b.predictedPerSecond:
		return "timings"
	case a.promptN != b.promptN || a.predictedN != b.predictedN || a.hasCacheN != b.hasCacheN || a.cacheN != b.cacheN:
		return "timings counts"
	}
	return ""
}

// checkDecoder checks the chunkDecoder on one chunk: whatever the fast path
// (hot) accepts, fastjson reads the same; and every chunk encoding/json
// reads, written back in its canonical form (the members Decode reads,
// escaped as Go escapes them), reads the same with the decoder. Invalid
// JSON that fastjson does not look at closely (a bad escape, a raw control
// character or an odd number in a string or a member Decode skips) may be
// read; broken structure may not (TestChunkDecoderTypes).
func checkDecoder(t *testing.T, d *chunkDecoder, data []byte) {
	t.Helper()
	if d.h.openAI(data, &d.f) {
		fast := d.f
		fast.text, fast.reasoning = bytes.Clone(fast.text), bytes.Clone(fast.reasoning)
		fast.id, fast.finish = bytes.Clone(fast.id), bytes.Clone(fast.finish)
		if err := d.slow(data); err != nil {
			t.Fatalf("the fast path read %q, which fastjson refuses: %v", data, err)
		}
		if diff := sameFields(&fast, &d.f); diff != "" {
			t.Fatalf("the fast path and fastjson read %q differently: %s", data, diff)
		}
	}
	var c openaiChunk
	if json.Unmarshal(data, &c) != nil {
		return // a type encoding/json refuses; the decoder may read past it
	}
	canon, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var want chunkFields
	if err := decodeChunkStd(canon, &want); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"decode", "slow"} {
		if path == "decode" {
			err = d.decode(canon)
		} else {
			err = d.slow(canon)
		}
		if err != nil {
			t.Fatalf("%s(%s) = %v; encoding/json reads it", path, canon, err)
		}
		got := d.f
		got.text, got.reasoning = []byte(validString(got.text)), []byte(validString(got.reasoning))
		if diff := sameFields(&got, &want); diff != "" {
			t.Fatalf("%s(%s) differs from encoding/json: %s", path, canon, diff)
		}
	}
}

var scannerSeeds = []string{
	`{"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`,
	`{"choices":[{"delta":{"content":" hi"}}]}`,
	`{"choices":[{"delta":{"content":"a\nb \"q\" \u00e9 \ud83d\ude00"}}]}`,
	`{"choices":[{"delta":{"reasoning_content":"think","content":null}}]}`,
	`{"choices":[{"delta":{"reasoning":"r"}},{"delta":{"content":"c"},"text":"t"}]}`,
	`{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"f","arguments":"{\"a\""}},{"function":{"arguments":":1}"}}]}}]}`,
	`{"choices":[{"text":"legacy","finish_reason":"length"}]}`,
	`{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":7,"total_tokens":19,"completion_tokens_details":{"reasoning_tokens":3}}}`,
	`{"choices":[{"index":0,"delta":{"content":" sky"},"logprobs":null,"finish_reason":null}],"usage":{"prompt_tokens":18,"total_tokens":20,"completion_tokens":2}}`,
	`{"choices":[{"delta":{},"finish_reason":"stop"}],"timings":{"prompt_n":3,"prompt_ms":1.5,"prompt_per_second":2000,"predicted_ms":90.25,"predicted_per_second":96.9e0}}`,
	`{"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":64}}}`,
	`{"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":null,"audio_tokens":0}}}`,
	`{"choices":[],"usage":{"prompt_tokens":1,"prompt_tokens_details":null}}`,
	`{"choices":[{"delta":{},"finish_reason":"stop"}],"timings":{"cache_n":30,"prompt_n":5,"predicted_n":12,"prompt_ms":1.5}}`,
	`{"timings":{"cache_n":null}}`,
	`{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"prompt_tokens_details":3}}`,
	`{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"completion_tokens_details":null}}`,
	`{"error":{"message":"boom"}}`,
	`{"error":null,"object":"error"}`,
	`{"choices":[{"delta":{"Content":"folded"}}]}`,
	`{"choices":[{"delta":{"content":"a"}}],"choices":[]}`,
	`{"usage":{"completion_tokens":1.5}}`,
	`{"usage":{"completion_tokens":"1"}}`,
	`{"choices":[{"delta":{"content":"bad` + "\xff" + `utf8"}}]}`,
	`{"choices":[null,{"delta":null}],"usage":null,"timings":null}`,
	`{"a":[1,2,{"b":[true,false,null,-0.5e+3]}],"choices":[{"delta":{"content":"x"}}]}`,
	`{"choices":[{"delta":{"content":"x"}}]} trailing`,
	`{"choices":[{"delta":{"content":"x"}},]}`,
	`null`,
	`[]`,
	`{"ch\u006fices":[{"delta":{"content":"x"}}]}`,
}

func TestChunkDecoderAgreesWithEncodingJSON(t *testing.T) {
	var d chunkDecoder
	for _, s := range scannerSeeds {
		checkDecoder(t, &d, []byte(s))
	}
	// Every capture's chunks decode, and agree.
	files, _ := filepath.Glob("testdata/*openai*.sse")
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(raw))
		for sc.Scan() {
			line, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
			if !ok || bytes.Equal(line, []byte("[DONE]")) {
				continue
			}
			if err := d.decode(line); err != nil {
				t.Errorf("%s: %v: %s", f, err, line)
			}
			// A capture's token chunks take the fast path.
			plain := !bytes.Contains(line, []byte(`\`)) && !bytes.Contains(line, []byte("timings")) &&
				!bytes.Contains(line, []byte("_details")) && !bytes.Contains(line, []byte("tool_calls"))
			if plain && bytes.Contains(line, []byte(`"choices"`)) && !d.h.openAI(line, &d.f) {
				t.Errorf("%s: a token chunk missed the fast path: %s", f, line)
			}
			checkDecoder(t, &d, line)
		}
	}
}

// TestChunkDecoderTypes: a member Decode reads that has the wrong type is
// an error, as encoding/json makes it; one it does not read is ignored.
func TestChunkDecoderTypes(t *testing.T) {
	var d chunkDecoder
	for _, c := range []struct {
		chunk string
		ok    bool
	}{
		{`{"usage":{"completion_tokens":1.5}}`, false},
		{`{"usage":{"completion_tokens":"1"}}`, false},
		{`{"choices":[{"delta":{"content":5}}]}`, false},
		{`{"choices":{"delta":{}}}`, false},
		{`{"choices":[7]}`, false},
		{`{"timings":{"prompt_ms":"fast"}}`, false},
		{`{"id":1}`, false},
		{`[]`, false},
		{`{"choices":[{"delta":{"content":"x"}}]`, false},
		{`{"choices":[{"delta":{"content":"x"}},]}`, false},
		{`{"choices":[{"delta":{"content":"x}}]}`, false},
		{`{"choices":[{"delta":{"content":"x"}}]} trailing`, false},
		{``, false},
		{`{"choices":[{"delta":{"content":"x"}}],"system_fingerprint":5,"logprobs":[1]}`, true},
		{`{"choices":[null,{"delta":null}],"usage":null,"timings":null}`, true},
	} {
		if err := d.decode([]byte(c.chunk)); (err == nil) != c.ok {
			t.Errorf("decode(%s) = %v, want ok %v", c.chunk, err, c.ok)
		}
	}
}

func FuzzChunkDecoder(f *testing.F) {
	for _, s := range scannerSeeds {
		f.Add([]byte(s))
	}
	var d chunkDecoder
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecoder(t, &d, data)
	})
}

// TestDecodeCachedTokens: usage's prompt_tokens_details.cached_tokens
// (OpenAI, vLLM) reaches the response; a usage without it says nothing of
// the cache.
func TestDecodeCachedTokens(t *testing.T) {
	for _, c := range []struct {
		usage  string
		cached int
		known  bool
	}{
		{`{"prompt_tokens":100,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":64}}`, 64, true},
		{`{"prompt_tokens":100,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":0}}`, 0, true},
		{`{"prompt_tokens":100,"completion_tokens":1}`, 0, false},
	} {
		body := "data: {\"choices\":[{\"delta\":{\"content\":\" hi\"}}]}\n\n" +
			"data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":" + c.usage + "}\n\ndata: [DONE]\n\n"
		var resp Response
		OpenAI{Chat: true}.Decode(bytes.NewReader([]byte(body)), &resp)
		if resp.Failed() || resp.Usage == nil {
			t.Fatalf("%s: %s %s", c.usage, resp.ErrorClass, resp.Error)
		}
		if resp.Usage.CachedTokens != c.cached || resp.Usage.CachedKnown != c.known {
			t.Errorf("%s: cached %d known %v, want %d %v", c.usage, resp.Usage.CachedTokens, resp.Usage.CachedKnown, c.cached, c.known)
		}
	}
}
