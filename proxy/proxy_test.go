package proxy

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokbench/tokbench/api"
	"github.com/tokbench/tokbench/internal/busy"
	"github.com/tokbench/tokbench/internal/fakellm"
	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/wire"
)

// proxied starts a proxy in front of up; its records go to the returned
// func's result.
func proxied(t testing.TB, up string) (string, func() []metrics.Record) {
	t.Helper()
	return proxiedWith(t, up, nil)
}

// proxiedWith is proxied with the configuration changed by set. The
// records func waits for the requests the proxy is handling to be
// recorded: a client has its answer before the proxy has measured it.
func proxiedWith(t testing.TB, up string, set func(*Config)) (string, func() []metrics.Record) {
	t.Helper()
	_, base, records := startProxy(t, up, set)
	return base, records
}

// startProxy is proxiedWith that gives the proxy too.
func startProxy(t testing.TB, up string, set func(*Config)) (*Proxy, string, func() []metrics.Record) {
	t.Helper()
	u, _ := url.Parse(up + "/v1")
	var mu sync.Mutex
	var recs []metrics.Record
	cfg := Config{Upstream: u, Sink: func(r metrics.Record) {
		mu.Lock()
		recs = append(recs, r)
		mu.Unlock()
	}}
	if set != nil {
		set(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(p)
	srv.Listener = wire.StampListener(srv.Listener)
	srv.Config.ConnContext = p.ConnContext
	srv.Start()
	t.Cleanup(srv.Close)
	return p, srv.URL, func() []metrics.Record {
		// InFlight falls only once a record is in (an atomic, which orders
		// the records before the read; handlers.Wait would race with the
		// Add of a test's next request, which reaches the server by TCP).
		for deadline := time.Now().Add(10 * time.Second); p.InFlight.Load() > 0 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(recs)
	}
}

// sameRead is the last chunk read in the same read as chunk i: a read
// takes the kernel's stamp of its latest packet, so chunks that came in
// one read (the proxy descheduled past a gap between chunks: the race
// detector on a busy machine) all carry the stamp of the last one's
// arrival, and that chunk's flush is the truth to judge them by.
func sameRead(chunkMs []float64, i int) int {
	for i+1 < len(chunkMs) && chunkMs[i+1] == chunkMs[i] {
		i++
	}
	return i
}

// reads counts the reads a stream's chunks came in (chunks with stamps of
// their own). Judged by sameRead, a clock that gave every chunk one
// instant would pass: a test asks that most chunks were read alone too.
func reads(chunkMs []float64) int {
	n := 0
	for i := range chunkMs {
		if sameRead(chunkMs, i) == i {
			n++
		}
	}
	return n
}

func chat(t testing.TB, base string, header http.Header) (status int, body string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", strings.NewReader(
		`{"model":"m","stream":true,"stream_options":{"include_usage":true},"max_tokens":24,"messages":[{"role":"user","content":"hi"}]}`))
	if header != nil {
		req.Header = header.Clone()
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestProxyMeasuresAgainstTheServersInstants: 20 concurrent streams
// through the proxy; each record's upstream TTFT and every chunk's
// arrival match the fake server's own flushes (within ttftTolMs: one
// process holds server, proxy and clients), the tokens are the script's,
// and the client gets the stream and the headers unchanged. The gap
// between chunks is long enough that most reads take one (a read carries
// the kernel's stamp of its latest packet, so a proxy busy past a gap
// stamps the first chunk with the second's arrival: see sameRead).
func TestProxyMeasuresAgainstTheServersInstants(t *testing.T) {
	up := fakellm.New(fakellm.Script{TTFT: 30 * time.Millisecond, Gap: 20 * time.Millisecond, Tokens: 24, Usage: true})
	defer up.Close()
	base, records := proxied(t, up.URL)
	const n = 20
	var wg sync.WaitGroup
	bodies := make([]string, n)
	watch := busy.Start()
	for i := range n {
		wg.Go(func() {
			var st int
			st, bodies[i] = chat(t, base, http.Header{"Authorization": {"Bearer sk-secret-9"}})
			if st != 200 {
				t.Errorf("status %d", st)
			}
		})
	}
	wg.Wait()
	// How late a chunk is read, and whether a client in this process
	// read slowly, are the machine's as much as the proxy's.
	timed := watch.Stop().Judge(t, "chunk arrivals against the server's flushes, and slow_client")
	recs := records()
	if len(recs) != n {
		t.Fatalf("%d records for %d requests", len(recs), n)
	}
	if got := up.LastHeader("Authorization"); got != "Bearer sk-secret-9" {
		t.Errorf("the upstream got Authorization %q", got)
	}
	byID := map[string]*fakellm.Stream{}
	streams := up.Streams()
	for i := range streams {
		byID[streams[i].ID] = &streams[i]
	}
	var worst float64
	chunks, alone := 0, 0
	for _, r := range recs {
		if !r.OK || r.OutputTokens != 24 || r.TokenSource != metrics.SourceUsage || r.API != "openai-chat" || r.Model != "m" {
			t.Fatalf("record %+v", r)
		}
		s := byID[r.ResponseID]
		if s == nil {
			t.Fatalf("no stream %q", r.ResponseID)
		}
		if len(r.ChunkMs) != len(s.Flushes) {
			t.Fatalf("%d chunks recorded for %d flushed", len(r.ChunkMs), len(s.Flushes))
		}
		worst = max(worst, s.OffMs(sameRead(r.ChunkMs, 0), r.Start, r.TTFTMs))
		for i, at := range r.ChunkMs { // every chunk, so the decode rate too
			worst = max(worst, s.OffMs(sameRead(r.ChunkMs, i), r.Start, at))
		}
		chunks, alone = chunks+len(r.ChunkMs), alone+reads(r.ChunkMs)
		if r.Proxy == nil || (timed && r.Proxy.SlowClient) {
			t.Errorf("proxy block %+v", r.Proxy)
		}
	}
	if timed && (worst > ttftTolMs || alone < chunks/2) {
		t.Errorf("upstream chunks off the server's flushes by up to %.3f ms (want ≤ %d), %d of %d read alone (want half or more)", worst, ttftTolMs, alone, chunks)
	}
	for _, b := range bodies {
		if !strings.Contains(b, `"completion_tokens":24`) || !strings.HasSuffix(strings.TrimSpace(b), "data: [DONE]") {
			t.Fatalf("the client's stream is not the server's:\n%s", b)
		}
	}
	for _, r := range recs {
		var buf bytes.Buffer
		fmt.Fprint(&buf, r)
		if strings.Contains(buf.String(), "sk-secret-9") {
			t.Fatal("a record holds the API key")
		}
	}
}

// TestProxyPassesThrough: a path the proxy does not measure and an
// upstream error reach the client as they came; the error is recorded.
func TestProxyPassesThrough(t *testing.T) {
	up := fakellm.New(fakellm.Script{TTFT: time.Millisecond, Gap: time.Millisecond, Tokens: 4, Usage: true,
		Fault: func(n int) fakellm.Fault {
			if n == 0 {
				return fakellm.Fault{Status: 429}
			}
			return fakellm.Fault{}
		}})
	defer up.Close()
	base, records := proxied(t, up.URL)
	resp, err := http.Get(base + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	models, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(models), `"object":"list"`) {
		t.Fatalf("models: %d %s", resp.StatusCode, models)
	}
	st, body := chat(t, base, nil)
	if st != 429 || len(body) == 0 {
		t.Fatalf("a 429 reached the client as %d %q", st, body)
	}
	st, body = chat(t, base, nil)
	if st != 200 {
		t.Fatalf("second request: %d", st)
	}
	sc := bufio.NewScanner(strings.NewReader(body))
	events := 0
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "data: ") {
			events++
		}
	}
	recs := records()
	if len(recs) != 2 || recs[0].OK || recs[0].ErrorClass != "http_429" || !recs[1].OK || recs[1].OutputTokens != 4 {
		t.Fatalf("records %+v", recs)
	}
	if events < 5 {
		t.Fatalf("%d events reached the client", events)
	}
}

func TestTarget(t *testing.T) {
	for _, c := range []struct{ up, req, want string }{
		{"http://h:8000/v1", "/v1/chat/completions", "http://h:8000/v1/chat/completions"},
		{"http://h:8000", "/v1/models", "http://h:8000/v1/models"},
		{"http://h/openai/v1", "/v1/chat/completions", "http://h/openai/v1/chat/completions"},
		{"http://h/openai/v1", "/chat/completions", "http://h/openai/v1/chat/completions"},
		{"http://h/v1?api-version=2024", "/v1/chat/completions?x=1", "http://h/v1/chat/completions?api-version=2024&x=1"},
		{"http://h/v1", "/api/chat", "http://h/v1/api/chat"},
		{"http://h", "/a%2Fb", "http://h/a%2Fb"},
	} {
		up, _ := url.Parse(c.up)
		req, _ := url.Parse(c.req)
		p := &Proxy{cfg: Config{Upstream: up}}
		if got := p.target(req); got != c.want {
			t.Errorf("%s + %s = %s, want %s", c.up, c.req, got, c.want)
		}
	}
}

// TestProxyClientGoesAway: a client that stops reading and closes after
// the first chunks is recorded as the client's doing, not the server's;
// a client asking for gzip still gets a measured plain stream.
func TestProxyClientGoesAway(t *testing.T) {
	up := fakellm.New(fakellm.Script{TTFT: time.Millisecond, Gap: 20 * time.Millisecond, Tokens: 50, Usage: true})
	defer up.Close()
	base, records := proxied(t, up.URL)
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", strings.NewReader(
		`{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	for range 3 {
		if _, err := br.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
	}
	resp.Body.Close() // the stop button
	deadline := time.Now().Add(5 * time.Second)
	for len(records()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	recs := records()
	if len(recs) != 1 || recs[0].OK || recs[0].ErrorClass != string(ClassClientClosed) {
		t.Fatalf("records %+v, want one client_closed", recs)
	}
	h := http.Header{"Accept-Encoding": {"gzip, deflate"}}
	if st, body := chat(t, base, h); st != 200 || !strings.Contains(body, "data: [DONE]") {
		t.Fatalf("gzip-asking client: %d %q", st, body)
	}
	if recs := records(); len(recs) != 2 || !recs[1].OK || recs[1].OutputTokens != 50 {
		t.Fatalf("the gzip-asking client's request was not measured: %+v", recs)
	}
}

// TestProxyClientSide: the client-facing TTFT, E2E and decode rate the
// proxy records are what each client measuring its own stream saw (its
// first and last token's arrival, paired with its record by the answer's
// id), less the part before its request reached the proxy; they never
// beat the upstream's.
func TestProxyClientSide(t *testing.T) {
	up := fakellm.New(fakellm.Script{TTFT: 30 * time.Millisecond, Gap: 5 * time.Millisecond, Tokens: 24, Usage: true, RoleChunk: true})
	defer up.Close()
	base, records := proxied(t, up.URL)
	const n = 10
	type seen struct{ ttft, span float64 } // ms, from the client's t0
	var mu sync.Mutex
	own := map[string]seen{}
	var wg sync.WaitGroup
	// Each client is tokbench's own: its chunks carry the kernel's
	// receive stamps, so a busy test process does not make it late.
	client := &api.Client{HTTP: &http.Client{Transport: wire.NewTransport()}, Adapter: api.OpenAI{Chat: true}, BaseURL: base + "/v1"}
	watch := busy.Start()
	for range n {
		wg.Go(func() {
			r := client.Do(context.Background(), &api.Request{Model: "m", Messages: []api.Message{{Role: "user", Content: "hi"}}})
			if r.Failed() || len(r.Chunks) == 0 || !r.KernelStamps {
				t.Errorf("client: %s, %d chunks, kernel stamps %v", r.Error, len(r.Chunks), r.KernelStamps)
				return
			}
			first, last := r.Chunks[0].At, r.Chunks[len(r.Chunks)-1].At
			mu.Lock()
			own[r.ID] = seen{ttft: ms(first.Sub(r.Start)), span: ms(last.Sub(first))}
			mu.Unlock()
		})
	}
	wg.Wait()
	// A client's t0 is taken just before its write: a process held
	// between the two makes the client's TTFT longer than the proxy's,
	// which counts from the kernel's stamp of the request's arrival. The
	// hold is the machine's, not the proxy's: where the machine kept the
	// process from its cores, the tolerance grows by the hold the watch
	// measured (its longest late wake-up, or the time the threads waited
	// for a core or were stolen, summed).
	tol := float64(ttftTolMs)
	if lag := watch.Stop(); !lag.Quiet() {
		tol += max(lag.MaxMs, lag.WaitMs+lag.StealMs)
		t.Logf("the machine kept this process from its cores (%v): client-side figures judged within %.1f ms", lag, tol)
	}
	recs := records()
	if len(recs) != n || len(own) != n {
		t.Fatalf("%d records, %d clients' streams", len(recs), len(own))
	}
	for _, r := range recs {
		pr, o := r.Proxy, own[r.ResponseID]
		if pr == nil || pr.ClientTTFTMs < r.TTFTMs || pr.ClientE2EMs < r.E2EMs || pr.MaxHeldMs <= 0 {
			t.Fatalf("client side %+v of a record with TTFT %.3f, E2E %.3f", pr, r.TTFTMs, r.E2EMs)
		}
		if d := o.ttft - pr.ClientTTFTMs; math.Abs(d) > tol {
			t.Errorf("%s: client TTFT %.3f ms recorded, %.3f ms seen by the client", r.ResponseID, pr.ClientTTFTMs, o.ttft)
		}
		// Each end of the span is off by a scheduling delay at most.
		span := pr.ClientE2EMs - pr.ClientTTFTMs
		if math.Abs(o.span-span) > 2*tol {
			t.Errorf("%s: first to last token %.3f ms recorded, %.3f ms seen by the client", r.ResponseID, span, o.span)
		}
		if want := float64(r.OutputTokens-1) / span * 1e3; math.Abs(pr.ClientDecodeTPS-want) > 1e-6*want {
			t.Errorf("%s: client decode %.3f tok/s for %d tokens over %.3f ms", r.ResponseID, pr.ClientDecodeTPS, r.OutputTokens, span)
		}
	}
}

// TestProxyBoundsRequestBody: a request body past MaxBody is answered 413
// and never reaches the upstream; one within it goes through whole.
func TestProxyBoundsRequestBody(t *testing.T) {
	up := fakellm.New(fakellm.Script{TTFT: time.Millisecond, Gap: time.Millisecond, Tokens: 3, Usage: true})
	defer up.Close()
	base, records := proxiedWith(t, up.URL, func(c *Config) { c.MaxBody = 4 << 10 })
	post := func(content string) int {
		resp, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(
			`{"model":"m","stream":true,"messages":[{"role":"user","content":"`+content+`"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := post(strings.Repeat("x", 5<<10)); st != http.StatusRequestEntityTooLarge {
		t.Errorf("a 5 KiB body: status %d, want 413", st)
	}
	if st := post(strings.Repeat("x", 3<<10)); st != 200 {
		t.Errorf("a 3 KiB body: status %d", st)
	}
	if n := len(up.Streams()); n != 1 {
		t.Errorf("the upstream got %d requests, want 1", n)
	}
	if recs := records(); len(recs) != 1 || !recs[0].OK || recs[0].OutputTokens != 3 {
		t.Errorf("records %+v", recs)
	}
}

// TestProxyExpectContinue: a client that expects 100 Continue (curl with
// a body over 1 KB) gets it from the proxy; the upstream gets the request
// whole without the expectation, on a connection that keeps the kernel's
// receive stamps.
func TestProxyExpectContinue(t *testing.T) {
	up := fakellm.New(fakellm.Script{TTFT: time.Millisecond, Gap: time.Millisecond, Tokens: 3, Usage: true})
	defer up.Close()
	base, records := proxied(t, up.URL)
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", strings.NewReader(
		`{"model":"m","stream":true,"messages":[{"role":"user","content":"`+strings.Repeat("x", 2<<10)+`"}]}`))
	req.Header.Set("Expect", "100-continue")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || up.LastHeader("Expect") != "" {
		t.Errorf("status %d; the upstream got Expect %q", resp.StatusCode, up.LastHeader("Expect"))
	}
	recs := records()
	if len(recs) != 1 || !recs[0].OK || recs[0].OutputTokens != 3 || recs[0].Phases == nil {
		t.Fatalf("records %+v", recs)
	}
	if ph := recs[0].Phases; !ph.KernelStamps || ph.HTTP != "HTTP/1.1" || ph.FirstByteMs <= 0 || ph.FirstByteMs > recs[0].TTFTMs {
		t.Errorf("phases %+v of a record with TTFT %.3f ms", ph, recs[0].TTFTMs)
	}
}

// TestProxyPassThroughUpload: a request the proxy does not measure goes
// on net/http, which reads the upstream's early answer while a large
// body is still going out: a refusal reaches the client as it came.
func TestProxyPassThroughUpload(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		http.Error(w, `{"error":{"message":"no key"}}`, http.StatusUnauthorized) // without reading the upload
	}))
	defer up.Close()
	base, records := proxied(t, up.URL)
	resp, err := http.Post(base+"/v1/audio/transcriptions", "application/octet-stream", bytes.NewReader(make([]byte, 8<<20)))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(b), "no key") {
		t.Errorf("the client got %d %q, want the upstream's 401", resp.StatusCode, b)
	}
	if recs := records(); len(recs) != 0 {
		t.Errorf("%d records of an unmeasured path", len(recs))
	}
}
