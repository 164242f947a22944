package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokbench/tokbench/api"
	"github.com/tokbench/tokbench/internal/busy"
	"github.com/tokbench/tokbench/metrics"
)

// embedUpstream is a scripted embeddings server of every protocol the
// proxy reads: it answers after first, half its answer, then after
// second the rest, each input a vector of dims; where the protocol has a
// token count it counts each input's words and one more (a BOS), so the
// server's count differs from the proxy's. It keeps each answer it sent
// and the span of its last write.
type embedUpstream struct {
	*httptest.Server
	first, second time.Duration
	dims          int
	mu            sync.Mutex
	sent          []embedAnswer
}

type embedAnswer struct {
	body          string
	began, flushd time.Time // the last write's
}

func newEmbedUpstream(t *testing.T, first, second time.Duration, dims int) *embedUpstream {
	u := &embedUpstream{first: first, second: second, dims: dims}
	u.Server = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.Close)
	return u
}

func (u *embedUpstream) serve(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model  string          `json:"model"`
		Input  json.RawMessage `json:"input"`
		Inputs []string        `json:"inputs"`
		Prompt string          `json:"prompt"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var in []string
	json.Unmarshal(req.Input, &in)
	in = append(in, req.Inputs...)
	if req.Prompt != "" {
		in = append(in, req.Prompt)
	}
	tokens := 0
	var vecs []string
	for i, s := range in {
		tokens += len(strings.Fields(s)) + 1
		var v strings.Builder
		for d := range u.dims {
			if d > 0 {
				v.WriteByte(',')
			}
			fmt.Fprintf(&v, "%.6f", float64(i*u.dims+d)/1e4)
		}
		vecs = append(vecs, "["+v.String()+"]")
	}
	var body string
	switch p := r.URL.Path; {
	case strings.HasSuffix(p, "/api/embed"):
		body = fmt.Sprintf(`{"model":%q,"embeddings":[%s],"total_duration":1,"prompt_eval_count":%d}`, req.Model, strings.Join(vecs, ","), tokens)
	case strings.HasSuffix(p, "/api/embeddings"):
		body = fmt.Sprintf(`{"embedding":%s}`, vecs[0])
	case strings.HasSuffix(p, "/embed"):
		body = "[" + strings.Join(vecs, ",") + "]"
	case strings.HasSuffix(p, "/embeddings"):
		var data []string
		for i, v := range vecs {
			data = append(data, fmt.Sprintf(`{"object":"embedding","index":%d,"embedding":%s}`, i, v))
		}
		body = fmt.Sprintf(`{"id":"emb-%d","object":"list","data":[%s],"model":%q,"usage":{"prompt_tokens":%d,"total_tokens":%d}}`,
			len(u.answers()), strings.Join(data, ","), req.Model, tokens, tokens)
	default:
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	time.Sleep(u.first)
	half := len(body) / 2
	io.WriteString(w, body[:half])
	w.(http.Flusher).Flush()
	time.Sleep(u.second)
	began := time.Now()
	io.WriteString(w, body[half:])
	w.(http.Flusher).Flush()
	u.mu.Lock()
	u.sent = append(u.sent, embedAnswer{body, began, time.Now()})
	u.mu.Unlock()
}

func (u *embedUpstream) answers() []embedAnswer {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]embedAnswer(nil), u.sent...)
}

// post sends body to base+path with an API key and returns the answer.
func post(t testing.TB, base, path, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-embed-secret-42")
	req.Header.Set("Api-Key", "azure-embed-secret-43")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s: reading the answer: %v", path, err)
	}
	return resp.StatusCode, b
}

// TestProxyMeasuresEmbeddings: embeddings calls of each protocol, of
// known inputs, through the proxy: each becomes a record as bench's
// embeddings requests do — its inputs, its tokens (the server's count
// where it gives one, else the proxy's tokenizer's count of the inputs
// the client sent, named so), its vectors' dimension, and its latency t0
// to the answer's last byte, which lies within the server's last write —
// while the client gets the server's bytes unchanged. The level's
// embeddings figures add them up; it has no TTFT.
//
// The proxy's tokenizer is words (upstream_test.go): it counts words, the
// truth the inputs are written to.
func TestProxyMeasuresEmbeddings(t *testing.T) {
	const first, second = 15 * time.Millisecond, 10 * time.Millisecond
	up := newEmbedUpstream(t, first, second, 384)
	p, base, records := startProxy(t, up.URL, func(c *Config) { c.Tokenizer = words{} })
	texts := []string{"the quick brown fox", "jumps over", "the lazy dog today", "a"}
	in, _ := json.Marshal(texts)
	calls := []struct {
		path, body, api string
		inputs, tokens  int
		source          string
	}{
		// The server counts each input's words and one more.
		{"/v1/embeddings", `{"model":"bge","input":` + string(in) + `,"encoding_format":"float"}`, api.EmbedOpenAI, 4, 11 + 4, metrics.SourceUsage},
		{"/api/embed", `{"model":"nomic","input":` + string(in) + `}`, api.EmbedOllama, 4, 11 + 4, metrics.SourceUsage},
		// TEI's answer and Ollama's older one count no tokens: the
		// proxy's tokenizer (words) counts the inputs sent.
		{"/embed", `{"inputs":` + string(in[:len(in)-5]) + `]}`, api.EmbedTEI, 3, 10, metrics.SourceTokenizer},
		{"/api/embeddings", `{"model":"nomic","prompt":"one two three four five"}`, api.EmbedOllamaLegacy, 1, 5, metrics.SourceTokenizer},
	}
	const perRoute = 3
	var clients [][]byte
	watch := busy.Start()
	for _, c := range calls {
		for range perRoute {
			st, got := post(t, base, c.path, c.body)
			if st != 200 {
				t.Fatalf("%s: %d %s", c.path, st, got)
			}
			clients = append(clients, got)
		}
	}
	timed := watch.Stop().Judge(t, "latency against the server's last write")
	recs, sent := records(), up.answers()
	// The server notes an answer after its last write, which the client
	// may have read first: a machine that holds the handler holds the note.
	for deadline := time.Now().Add(5 * time.Second); len(sent) < len(recs) && time.Now().Before(deadline); sent = up.answers() {
		time.Sleep(time.Millisecond)
	}
	if len(recs) != len(calls)*perRoute || len(sent) != len(recs) {
		t.Fatalf("%d records, %d answers for %d calls", len(recs), len(sent), len(calls)*perRoute)
	}
	var worst float64
	for i, r := range recs {
		c := calls[i/perRoute]
		if string(clients[i]) != sent[i].body {
			t.Errorf("%s #%d: the client got %d bytes, not the server's %d", c.path, i, len(clients[i]), len(sent[i].body))
		}
		if !r.OK || r.API != c.api || r.EmbedInputs != c.inputs || r.InputTokens != c.tokens || r.TokenSource != c.source ||
			r.EmbedDims != 384 || r.OutputTokens != 0 || len(r.ChunkMs) != 0 || r.TTFTMs != 0 {
			t.Fatalf("%s #%d: record %+v, want %s of %d inputs, %d tokens from %s", c.path, i, r, c.api, c.inputs, c.tokens, c.source)
		}
		if r.Proxy == nil || !r.Proxy.NotStreamed || r.Proxy.ClientE2EMs < r.DoneMs {
			t.Errorf("%s #%d: proxy block %+v, want the client's latency past the upstream's %.3f ms", c.path, i, r.Proxy, r.DoneMs)
		}
		lo, hi := ms(sent[i].began.Sub(r.Start)), ms(sent[i].flushd.Sub(r.Start))
		if r.DoneMs < ms(first+second) {
			t.Errorf("%s #%d: latency %.3f ms, under the server's scripted %v", c.path, i, r.DoneMs, first+second)
		}
		worst = max(worst, lo-r.DoneMs, r.DoneMs-hi)
	}
	t.Logf("latency off the server's last write by %.3f ms at most", worst)
	if timed && worst > ttftTolMs {
		t.Errorf("latency off the server's last write by up to %.3f ms (want ≤ %d)", worst, ttftTolMs)
	}
	lv := metrics.Summarize(metrics.Load{Mode: metrics.ModeLive}, recs, 0)
	e := lv.Embeddings
	if e == nil || e.Inputs != perRoute*(4+4+3+1) || e.Tokens != perRoute*(15+15+10+5) || e.TokenSource != metrics.EmbedSourceMixed ||
		e.Latency.Count != len(recs) || lv.TTFT.Count != 0 || lv.Requests.Completed != len(recs) {
		t.Errorf("level %+v, embeddings %+v", lv, e)
	}
	if n := p.bodies.used.Load(); n != 0 {
		t.Errorf("%d bytes of request bodies still held after every record was made", n)
	}
	if peak := p.peakKept.Load(); peak > api.MaxEmbeddingAnswer(4) || peak < int64(len(sent[0].body)) {
		t.Errorf("an answer kept %d bytes at most: want its %d bytes, within the bound %d", peak, len(sent[0].body), api.MaxEmbeddingAnswer(4))
	}
}

// TestProxyEmbeddingsPastBound: an embeddings answer larger than bench's
// bound (1 MiB an input and 64 KiB) reaches the client whole, is kept
// only up to the bound, and is recorded as event_too_large; one that
// never ends reaches the client until it stops reading, within the same
// memory, and is recorded as the client's doing.
func TestProxyEmbeddingsPastBound(t *testing.T) {
	const total = 6 << 20
	piece := bytes.Repeat([]byte("0.123456,"), 7<<10) // 63 KiB
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		endless := strings.Contains(r.URL.Path, "/api/embed")
		w.Write([]byte("[["))
		for n := 2; endless || n < total; {
			k := min(len(piece), total-n)
			if endless {
				k = len(piece)
			}
			if _, err := w.Write(piece[:k]); err != nil {
				return // the client went
			}
			w.(http.Flusher).Flush()
			n += k
		}
	}))
	defer up.Close()
	p, base, records := startProxy(t, up.URL, nil)
	st, got := post(t, base, "/embed", `{"inputs":["one text"]}`)
	if st != 200 || len(got) != total || !bytes.HasPrefix(got, []byte("[[0.123456,")) {
		t.Fatalf("the client got %d: %d bytes of the server's %d", st, len(got), total)
	}
	bound := api.MaxEmbeddingAnswer(1)
	recs := records()
	if len(recs) != 1 || recs[0].OK || recs[0].ErrorClass != string(api.ClassEventTooLarge) || recs[0].EmbedInputs != 1 ||
		!strings.Contains(recs[0].Error, "forwarded to the client") {
		t.Fatalf("records %+v, want one event_too_large of 1 input", recs)
	}
	if peak := p.peakKept.Load(); peak > bound || peak < bound-int64(len(piece)) {
		t.Errorf("the answer kept %d bytes at most, want up to the bound %d", peak, bound)
	}

	// Endless: the client reads 4 MiB and hangs up.
	req, _ := http.NewRequest(http.MethodPost, base+"/api/embed", strings.NewReader(`{"model":"m","input":["a","b"]}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := io.CopyN(io.Discard, resp.Body, 4<<20)
	resp.Body.Close()
	if n != 4<<20 {
		t.Fatalf("the client read %d bytes of an endless answer", n)
	}
	recs = records()
	for deadline := time.Now().Add(10 * time.Second); len(recs) < 2 && time.Now().Before(deadline); recs = records() {
		time.Sleep(5 * time.Millisecond)
	}
	if len(recs) != 2 || recs[1].OK || recs[1].ErrorClass != string(ClassClientClosed) || recs[1].EmbedInputs != 2 {
		t.Fatalf("records %+v, want the endless answer's client_closed, of 2 inputs", recs)
	}
	if peak := p.peakKept.Load(); peak > api.MaxEmbeddingAnswer(2) {
		t.Errorf("an answer kept %d bytes, past the bound %d", peak, api.MaxEmbeddingAnswer(2))
	}
	if n := p.bodies.used.Load(); n != 0 {
		t.Errorf("%d bytes of request bodies still held", n)
	}
}

// TestProxyEmbeddingsRequestBodies: an embeddings request body past
// Config.MaxBody is refused as a completion's is (413, not sent on), and
// a failed embeddings call is recorded with its class and inputs.
func TestProxyEmbeddingsRequestBodies(t *testing.T) {
	calls := 0
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"error":{"message":"model loading"}}`)
	}))
	defer up.Close()
	p, base, records := startProxy(t, up.URL, func(c *Config) { c.MaxBody = 64 << 10 })
	big := `{"input":["` + strings.Repeat("word ", 20<<10) + `"]}`
	if st, _ := post(t, base, "/v1/embeddings", big); st != http.StatusRequestEntityTooLarge || calls != 0 {
		t.Errorf("a %d KiB body: %d, %d calls upstream; want 413 and none", len(big)>>10, st, calls)
	}
	if st, got := post(t, base, "/v1/embeddings", `{"model":"e","input":["a","b","c"]}`); st != 503 || !strings.Contains(string(got), "model loading") {
		t.Errorf("the upstream's 503 reached the client as %d %q", st, got)
	}
	recs := records()
	if len(recs) != 1 || recs[0].ErrorClass != "http_503" || recs[0].EmbedInputs != 3 || recs[0].API != api.EmbedOpenAI || recs[0].Model != "e" {
		t.Fatalf("records %+v, want one http_503 of 3 inputs", recs)
	}
	if n := p.bodies.used.Load(); n != 0 {
		t.Errorf("%d bytes of request bodies still held", n)
	}
}

// TestProxyMixedTraffic: completions and embeddings through one proxy
// make one live level in which they stay apart as bench keeps them: the
// TTFT and output figures are the completions' alone, the embeddings
// block (and each window's) the embeddings', the requests both.
func TestProxyMixedTraffic(t *testing.T) {
	up := newEmbedUpstream(t, time.Millisecond, time.Millisecond, 16)
	chat := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/chat/completions") {
			up.Config.Handler.ServeHTTP(w, r)
			return
		}
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c","choices":[{"message":{"content":"hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":7}}`)
	}))
	defer chat.Close()
	_, base, records := startProxy(t, chat.URL, nil)
	for range 3 {
		if st, got := post(t, base, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`); st != 200 {
			t.Fatalf("chat: %d %s", st, got)
		}
		if st, got := post(t, base, "/v1/embeddings", `{"model":"e","input":["a b","c d e"]}`); st != 200 {
			t.Fatalf("embeddings: %d %s", st, got)
		}
	}
	rec := NewRecorder(nil, time.Minute, nil)
	for _, r := range records() {
		rec.Add(r)
	}
	s, err := rec.Close(metrics.Target{API: "proxy"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	lv := s.Levels[0]
	e := lv.Embeddings
	if lv.Requests.Completed != 6 || lv.TTFT.Count != 3 || lv.OutputTokens != 21 || e == nil || e.Inputs != 6 || e.Tokens != 3*7 ||
		e.Latency.Count != 3 || e.TokenSource != metrics.EmbedSourceUsage {
		t.Fatalf("level: %d completed, %d TTFTs, %d output tokens; embeddings %+v", lv.Requests.Completed, lv.TTFT.Count, lv.OutputTokens, e)
	}
	if len(lv.Windows) != 1 || lv.Windows[0].Embeddings == nil || lv.Windows[0].Embeddings.Inputs != 6 || lv.Windows[0].TTFT.Count != 3 {
		t.Errorf("windows %+v", lv.Windows)
	}
}
