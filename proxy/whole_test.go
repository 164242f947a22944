package proxy

import (
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokbench/tokbench/api"
)

// TestProxyMeasuresWholeAnswers: a non-streamed completion of each API is
// recorded as one chunk at its last byte: TTFT the server's delay, tokens
// its usage, the answer reaching the client unchanged.
func TestProxyMeasuresWholeAnswers(t *testing.T) {
	const delay = 20 * time.Millisecond
	answers := map[string]string{
		"/v1/chat/completions": `{"id":"c1","choices":[{"message":{"role":"assistant","content":"hello there","reasoning_content":"hm"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":7,"completion_tokens_details":{"reasoning_tokens":2},"prompt_tokens_details":{"cached_tokens":3}}}`,
		"/v1/completions":      `{"id":"c2","choices":[{"text":"hello","finish_reason":"length"}],"usage":{"prompt_tokens":5,"completion_tokens":7}}`,
		"/v1/messages":         `{"id":"m1","content":[{"type":"thinking","thinking":"hm"},{"type":"text","text":"hello"}],"stop_reason":"end_turn","usage":{"input_tokens":5,"output_tokens":7,"cache_read_input_tokens":3}}`,
		"/api/chat":            `{"message":{"role":"assistant","content":"hello"},"done":true,"done_reason":"stop","prompt_eval_count":5,"eval_count":7}`,
		"/api/generate":        `{"response":"hello","done":true,"done_reason":"stop","prompt_eval_count":5,"eval_count":7}`,
		"/completion":          `{"content":"hello","stop_type":"eos","tokens_evaluated":5,"tokens_predicted":7,"tokens_cached":3}`,
	}
	var mu sync.Mutex
	sent := map[string][2]time.Time{} // by path: the answer's write began, its flush returned
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		time.Sleep(delay)
		w.Header().Set("Content-Type", "application/json")
		best := ""
		for path := range answers { // the proxy's upstream is …/v1: /api/chat arrives as /v1/api/chat
			if strings.HasSuffix(r.URL.Path, path) && len(path) > len(best) {
				best = path
			}
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(answers[best])))
		began := time.Now()
		io.WriteString(w, answers[best])
		w.(http.Flusher).Flush()
		mu.Lock()
		sent[best] = [2]time.Time{began, time.Now()}
		mu.Unlock()
	}))
	defer up.Close()
	base, records := proxied(t, up.URL)
	for k, path := range slices.Sorted(maps.Keys(answers)) {
		answer := answers[path]
		resp, err := http.Post(base+path, "application/json", strings.NewReader(`{"model":"m","stream":false,"messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != answer {
			t.Errorf("%s: the client got %q", path, body)
		}
		recs := records()
		if len(recs) != k+1 {
			t.Fatalf("%s: %d records after %d answers", path, len(recs), k+1)
		}
		r := recs[k]
		if !r.OK || r.OutputTokens != 7 || r.InputTokens != 5 || len(r.ChunkMs) != 1 || r.Proxy == nil || !r.Proxy.NotStreamed {
			t.Errorf("%s: record %+v", path, r)
			continue
		}
		// The last byte's arrival lies within the server's write of it
		// (whose end the server notes once the client may have the answer).
		var span [2]time.Time
		for deadline := time.Now().Add(10 * time.Second); span[1].IsZero() && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			mu.Lock()
			span = sent[path]
			mu.Unlock()
		}
		lo, hi := ms(span[0].Sub(r.Start)), ms(span[1].Sub(r.Start))
		if r.TTFTMs < float64(delay/time.Millisecond) || r.TTFTMs < lo-ttftTolMs || r.TTFTMs > hi+ttftTolMs || r.E2EMs != r.TTFTMs {
			t.Errorf("%s: TTFT %.3f ms, E2E %.3f ms, want both past %v, the server's write spanning %.3f to %.3f ms", path, r.TTFTMs, r.E2EMs, delay, lo, hi)
		}
		if cached := strings.Contains(answer, "cache"); r.CacheReported != cached || cached && r.CachedTokens != 3 {
			t.Errorf("%s: cached %d (reported %v)", path, r.CachedTokens, r.CacheReported)
		}
	}
	if n := len(records()); n != len(answers) {
		t.Errorf("%d records for %d answers", n, len(answers))
	}
}

// TestProxyWholeAnswerPastBound: a non-streamed answer longer than
// maxWhole reaches the client whole; the record says it was not measured.
func TestProxyWholeAnswerPastBound(t *testing.T) {
	answer := `{"id":"c1","choices":[{"message":{"content":"` + strings.Repeat("x", maxWhole) + `"}}],"usage":{"prompt_tokens":1,"completion_tokens":9}}`
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, answer)
	}))
	defer up.Close()
	base, records := proxied(t, up.URL)
	resp, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	n, _ := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if n != int64(len(answer)) {
		t.Errorf("the client got %d bytes of %d", n, len(answer))
	}
	if recs := records(); len(recs) != 1 || recs[0].OK || recs[0].ErrorClass != string(api.ClassOverlongStream) {
		t.Errorf("records %+v", recs)
	}
}
