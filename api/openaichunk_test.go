package api

import (
	"bufio"
	"bytes"
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

// checkScanner compares the fast scanner with encoding/json on one chunk:
// whenever the scanner accepts a chunk, encoding/json must accept it too and
// give the same fields. It reports whether the fast path was taken.
func checkScanner(t *testing.T, sc *chunkScanner, data []byte) bool {
	t.Helper()
	var want chunkFields
	stdErr := decodeChunkStd(data, &want)
	if !sc.scan(data) {
		return false
	}
	if stdErr != nil {
		t.Fatalf("scan(%q) accepted what encoding/json rejects: %v", data, stdErr)
	}
	if d := sameFields(&sc.f, &want); d != "" {
		t.Fatalf("scan(%q) differs from encoding/json: %s", data, d)
	}
	return true
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

func TestChunkScannerAgreesWithEncodingJSON(t *testing.T) {
	var sc chunkScanner
	fast := 0
	for _, s := range scannerSeeds {
		if checkScanner(t, &sc, []byte(s)) {
			fast++
		}
	}
	// Every capture's chunks must take the fast path (and agree).
	files, _ := filepath.Glob("testdata/*openai*.sse")
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(raw))
		var s chunkScanner
		for sc.Scan() {
			line, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
			if !ok || bytes.Equal(line, []byte("[DONE]")) {
				continue
			}
			if !checkScanner(t, &s, line) {
				t.Errorf("%s: chunk took the slow path: %s", f, line)
			}
		}
	}
	if fast < 10 {
		t.Errorf("only %d of %d seeds took the fast path", fast, len(scannerSeeds))
	}
}

func FuzzChunkScanner(f *testing.F) {
	for _, s := range scannerSeeds {
		f.Add([]byte(s))
	}
	var sc chunkScanner
	f.Fuzz(func(t *testing.T, data []byte) {
		checkScanner(t, &sc, data)
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
