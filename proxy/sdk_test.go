package proxy

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tokbench/tokbench/metrics"
)

// sdkAnswer is one request as stream.mjs (proxy/sdkcheck) saw it through
// the official OpenAI Node SDK.
type sdkAnswer struct {
	ID     string   `json:"id"`
	Text   string   `json:"text"`
	TTFTMs *float64 `json:"ttft_ms"`
	Tokens *int     `json:"completion_tokens"`
	// The last line: how late Node's event loop ran while the requests
	// streamed (monitorEventLoopDelay), ms.
	LoopDelayP99Ms *float64 `json:"event_loop_delay_p99_ms"`
	LoopDelayMaxMs *float64 `json:"event_loop_delay_max_ms"`
}

// readAnswers reads stream.mjs's answers, and its event loop's longest
// delay.
func readAnswers(t *testing.T, path string) ([]sdkAnswer, float64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []sdkAnswer
	delay := -1.0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var a sdkAnswer
		if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if a.LoopDelayMaxMs != nil {
			delay = *a.LoopDelayMaxMs
			continue
		}
		out = append(out, a)
	}
	if delay < 0 {
		t.Fatalf("%s: no event loop delay line", path)
	}
	return out, delay
}

// TestSDKThroughProxy judges a run of the official OpenAI Node SDK that
// .ci/real made: eight concurrent streamed chat completions from the
// simulator direct (TOKBENCH_SDK_DIRECT) and, from a fresh simulator with
// the same seed, through tokbench proxy (TOKBENCH_SDK_PROXIED), whose run
// directory is TOKBENCH_SDK_OUT. The SDK received the same texts both ways,
// byte for byte (the simulator's words follow its seed and each request's
// arrival order, so the texts are compared as a set); the proxy's record
// of each answer gives the SDK's own TTFT within 1 ms and its token count
// exactly; and the API key the SDK sent is in none of the proxy's files,
// raw or in Base64.
func TestSDKThroughProxy(t *testing.T) {
	direct, proxied, out, key := os.Getenv("TOKBENCH_SDK_DIRECT"), os.Getenv("TOKBENCH_SDK_PROXIED"), os.Getenv("TOKBENCH_SDK_OUT"), os.Getenv("TOKBENCH_SDK_KEY")
	if direct == "" || proxied == "" || out == "" || key == "" {
		t.Skip("set TOKBENCH_SDK_DIRECT, TOKBENCH_SDK_PROXIED, TOKBENCH_SDK_OUT and TOKBENCH_SDK_KEY (.ci/real does)")
	}
	d, _ := readAnswers(t, direct)
	p, delay := readAnswers(t, proxied)
	// The SDK's TTFT counts its own event loop's delays on both ends of
	// the exchange (its write, its read of the first chunk), which the
	// proxy cannot see: the bound is 1 ms beyond twice the longest of
	// those delays, measured in the same run.
	bound := 1 + 2*delay
	if len(d) != 8 || len(p) != 8 {
		t.Fatalf("%d answers direct, %d through the proxy; want 8 each", len(d), len(p))
	}
	texts := func(as []sdkAnswer) []string {
		var s []string
		for _, a := range as {
			s = append(s, a.Text)
		}
		slices.Sort(s)
		return s
	}
	if !slices.Equal(texts(d), texts(p)) {
		t.Errorf("the SDK received other texts through the proxy than direct:\n direct  %q\n proxied %q", texts(d), texts(p))
	}
	recs := map[string]metrics.Record{}
	b, err := os.ReadFile(filepath.Join(out, "requests.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var r metrics.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		recs[r.ResponseID] = r
	}
	worst := 0.0
	for _, a := range p {
		r, ok := recs[a.ID]
		if !ok || !r.OK || r.Proxy == nil {
			t.Errorf("answer %s: the proxy's record (found %v) is not a completed one: ok %v, class %q, error %q", a.ID, ok, r.OK, r.ErrorClass, r.Error)
			continue
		}
		if a.TTFTMs == nil || a.Tokens == nil {
			t.Errorf("answer %s: the SDK saw no content or no usage", a.ID)
			continue
		}
		diff := *a.TTFTMs - r.Proxy.ClientTTFTMs
		worst = max(worst, math.Abs(diff))
		if math.Abs(diff) > bound {
			t.Errorf("answer %s: the SDK's TTFT %.3f ms, the proxy's client_ttft_ms %.3f: want within %.2f ms (1 ms and twice its event loop's longest delay, %.2f ms)", a.ID, *a.TTFTMs, r.Proxy.ClientTTFTMs, bound, delay)
		}
		if r.OutputTokens != *a.Tokens {
			t.Errorf("answer %s: the proxy recorded %d output tokens, the server's usage to the SDK says %d", a.ID, r.OutputTokens, *a.Tokens)
		}
	}
	leaks := []string{key, base64.StdEncoding.EncodeToString([]byte(key)), base64.StdEncoding.EncodeToString([]byte("Bearer " + key))}
	filepath.WalkDir(out, func(path string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, l := range leaks {
			if bytes.Contains(b, []byte(l)) {
				t.Errorf("%s holds the SDK's API key", path)
			}
		}
		return nil
	})
	t.Logf("8 answers, the same texts both ways; SDK TTFT against the proxy's client_ttft_ms within %.3f ms (bound %.2f ms: Node's event loop delayed up to %.2f ms); no key in %s", worst, bound, delay, out)
}
