package proxy

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"html"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/results"
)

// The six credentials a client sends through the proxy in
// TestProxyKeepsClientCredentials.
const (
	keyBearer = "sk-probe-BEARER123xyz"
	keyXAPI   = "sk-ant-XAPI456xyz"
	keyAPIKey = "azure-APIKEY789xyz"
	keyQuery  = "AIzaQUERYkey321xyz"
	keyBasic  = "basic-PASS654xyz" // user probeuser
	keyCookie = "cookie-SESS987xyz"
)

// forms are the encodings a secret may come back in.
func forms(s string) []string {
	b := []byte(s)
	return []string{s, url.QueryEscape(s), url.PathEscape(s),
		base64.StdEncoding.EncodeToString(b), base64.RawStdEncoding.EncodeToString(b),
		base64.URLEncoding.EncodeToString(b), base64.RawURLEncoding.EncodeToString(b)}
}

// TestProxyKeepsClientCredentials: an upstream quotes back every
// credential its clients sent (Bearer, x-api-key, api-key, a query key,
// Basic auth, a cookie) in every encoding — in headers, a 401's and a
// 429's body, a redirect's Location, in-stream error events, a stream's
// id and finish reason, an embeddings answer's id and error, JSON the
// proxy cannot parse, past the 300 bytes a
// message keeps — and none of them, in any encoding, is in the run
// directory the proxy wrote (records, summary, report), its /metrics,
// its log or the errors it served, while every request was recorded
// with its class and the quoted keys as [REDACTED].
func TestProxyKeepsClientCredentials(t *testing.T) {
	basicUser := "probeuser:" + keyBasic
	secrets := [][]string{} // each secret with its encodings
	for _, k := range []string{keyBearer, keyXAPI, keyAPIKey, keyQuery, keyBasic, keyCookie, basicUser} {
		secrets = append(secrets, forms(k))
	}
	echo := echoCredentials
	jsonStr := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req struct{ Model string }
		json.Unmarshal(body, &req)
		e := echo(r)
		w.Header().Set("X-Echo", e)
		sse := func() {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, `data: {"id":"c","choices":[{"index":0,"delta":{"content":"hi"}}]}`+"\n\n")
			w.(http.Flusher).Flush()
		}
		switch req.Model {
		case "unauthorized":
			w.Header().Set("Retry-After", e)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"error":{"message":`+jsonStr("Incorrect API key provided: "+e)+`}}`)
		case "limited": // a plain-text body, cut at 300 bytes in the middle of a key
			w.WriteHeader(http.StatusTooManyRequests)
			io.WriteString(w, strings.Repeat("z", 280)+" slow down "+e)
		case "redirect":
			w.Header().Set("Location", "http://127.0.0.1:1/login?key="+url.QueryEscape(keyQuery)+"&next="+url.QueryEscape(e))
			w.WriteHeader(http.StatusFound)
		case "stream-error":
			sse()
			io.WriteString(w, `data: {"error":{"message":`+jsonStr("Incorrect API key provided: "+e)+`}}`+"\n\n")
		case "stream-id":
			sse()
			io.WriteString(w, `data: {"id":`+jsonStr(r.Header.Get("Authorization"))+`,"choices":[{"index":0,"delta":{"content":" there"},"finish_reason":`+jsonStr(e)+`}]}`+"\n\ndata: [DONE]\n\n")
		case "stream-garbage":
			sse()
			io.WriteString(w, "data: {not json "+e+"\n\n")
		case "whole-garbage":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"choices": `+e)
		case "embed-401":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"error":{"message":`+jsonStr("Incorrect API key provided: "+e)+`}}`)
		case "embed-id":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"id":`+jsonStr(r.Header.Get("Authorization"))+`,"object":"list","data":[{"embedding":[0.1,0.2]}],"model":`+jsonStr(e)+`,"usage":{"prompt_tokens":2}}`)
		case "embed-error":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"error":{"message":`+jsonStr("bad key "+e)+`}}`)
		case "embed-garbage":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"data": `+e)
		default:
			http.Error(w, "unknown scenario "+req.Model, http.StatusBadRequest)
		}
	}))
	defer up.Close()

	var logs bytes.Buffer
	var logMu sync.Mutex
	log.SetOutput(writerFunc(func(b []byte) (int, error) { logMu.Lock(); defer logMu.Unlock(); return logs.Write(b) }))
	defer log.SetOutput(os.Stderr)

	u, _ := url.Parse(up.URL + "/v1")
	dir := filepath.Join(t.TempDir(), "live")
	w, err := results.Create(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx, stop := context.WithCancel(context.Background())
	ready := make(chan [2]string, 1)
	done := make(chan metrics.Summary, 1)
	go func() {
		s, err := Run(ctx, Options{Listen: "127.0.0.1:0", Config: Config{Upstream: u}, Out: w, MetricsAddr: "127.0.0.1:0",
			Every: time.Second, Grace: 5 * time.Second, Ready: func(p, m string) { ready <- [2]string{p, m} }})
		if err != nil {
			t.Error(err)
		}
		done <- s
	}()
	var urls [2]string
	select {
	case urls = <-ready:
	case <-time.After(10 * time.Second):
		t.Fatal("the proxy did not start")
	}
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte(basicUser))
	// Each request carries all six credentials but one: an Authorization
	// header holds Bearer or Basic.
	send := func(path, model string, stream bool, auth string) (int, string) {
		b, _ := json.Marshal(map[string]any{"model": model, "stream": stream, "messages": []any{}, "input": []string{"a b"}})
		req, _ := http.NewRequest(http.MethodPost, urls[0]+path+"?key="+keyQuery, bytes.NewReader(b))
		req.Header.Set("Authorization", auth)
		req.Header.Set("X-Api-Key", keyXAPI)
		req.Header.Set("Api-Key", keyAPIKey)
		req.Header.Set("Cookie", "session="+keyCookie+"; theme=dark")
		req.Header.Set("Content-Type", "application/json")
		resp, err := noRedirects.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", model, err)
		}
		defer resp.Body.Close()
		got, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(got)
	}
	want := map[string]string{} // model: error class
	var served []string         // what the proxy wrote itself to clients
	const chat, embed = "/v1/chat/completions", "/v1/embeddings"
	for _, c := range []struct {
		path, model string
		stream      bool
		class       string
	}{
		{chat, "unauthorized", true, "http_401"},
		{chat, "limited", true, "http_429"},
		{chat, "redirect", true, "redirect"},
		{chat, "stream-error", true, "stream_error"},
		{chat, "stream-id", true, ""},
		{chat, "stream-garbage", true, "malformed_stream"},
		{chat, "whole-garbage", false, "malformed_stream"},
		{embed, "embed-401", false, "http_401"},
		{embed, "embed-id", false, ""},
		{embed, "embed-error", false, "stream_error"},
		{embed, "embed-garbage", false, "malformed_stream"},
	} {
		for _, auth := range []string{"Bearer " + keyBearer, basic} {
			send(c.path, c.model, c.stream, auth)
		}
		want[c.model] = c.class
	}
	// An upstream that is gone: the proxy's own 502 names the URL it
	// tried, whose query held a key.
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	stop502 := serveProxyTo(t, gone.URL)
	for _, auth := range []string{"Bearer " + keyBearer, basic} {
		st, body := stop502.send(auth)
		if st != http.StatusBadGateway {
			t.Errorf("a gone upstream: %d %q, want 502", st, body)
		}
		served = append(served, body)
	}
	if n := stop502.records(); n != 2 {
		t.Errorf("%d records of requests to a gone upstream, want 2", n)
	}

	// Scrape once nothing is in flight, then stop for the summary and report.
	var scraped []byte
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		resp, err := http.Get(urls[1])
		if err != nil {
			t.Fatal(err)
		}
		scraped, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if bytes.Contains(scraped, []byte("\ntokbench_in_flight_requests 0\n")) || time.Now().After(deadline) {
			break
		}
	}
	if !bytes.Contains(scraped, []byte(`tokbench_requests_total{api="openai-chat",model="unauthorized",outcome="http_401"`)) {
		t.Errorf("the metrics do not count the requests, so their search proves nothing:\n%s", scraped)
	}
	stop()
	var s metrics.Summary
	select {
	case s = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the proxy did not stop")
	}
	recs, _, err := results.ReadRecords(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2*len(want) || s.Levels[0].Requests.Sent != len(recs) {
		t.Fatalf("%d records, summary counts %d, want %d", len(recs), s.Levels[0].Requests.Sent, 2*len(want))
	}
	redacted := 0
	for _, r := range recs {
		if r.ErrorClass != want[r.Model] {
			t.Errorf("%s: class %q (%s), want %q", r.Model, r.ErrorClass, r.Error, want[r.Model])
		}
		redacted += strings.Count(r.Error+r.ResponseID+r.FinishReason, "[REDACTED]")
		if strings.HasPrefix(r.Model, "embed-") && (r.API != "openai-embeddings" || r.EmbedInputs != 1 ||
			!strings.Contains(r.Error+r.ResponseID, "[REDACTED]")) {
			t.Errorf("%s: api %s, %d inputs, error %q, id %q: want an embeddings record quoting the keys as [REDACTED]", r.Model, r.API, r.EmbedInputs, r.Error, r.ResponseID)
		}
	}
	if redacted < 2*len(want) {
		t.Errorf("%d [REDACTED] in the records, want one a request at least: the upstream's quotes did not reach them", redacted)
	}

	// Everything the proxy wrote or served.
	texts := map[string]string{"/metrics": string(scraped), "log": logs.String()}
	for i, b := range served {
		texts["served 502 #"+string(rune('0'+i))] = b
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) < 4 {
		t.Fatalf("the run directory holds %d files (%v)", len(entries), err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		texts[e.Name()] = string(b)
	}
	if _, ok := texts["report.html"]; !ok {
		t.Errorf("no report.html among %d files", len(entries))
	}
	for name, text := range texts {
		for _, text := range []string{text, html.UnescapeString(text), jsonUnescape(text)} {
			for _, fs := range secrets {
				for _, f := range fs {
					if i := strings.Index(text, f); i >= 0 {
						t.Errorf("%s holds %q (a form of %q): …%s…", name, f, fs[0], text[max(0, i-60):min(len(text), i+len(f)+20)])
					}
				}
			}
		}
	}
}

// echoCredentials is everything a request carried, in every form: what
// a careless upstream puts in its errors.
func echoCredentials(r *http.Request) string {
	var b strings.Builder
	for _, h := range []string{"Authorization", "X-Api-Key", "Api-Key", "Cookie"} {
		if v := r.Header.Get(h); v != "" {
			b.WriteString(h + ": " + v + "; ")
			for _, f := range forms(v) {
				b.WriteString(f + " ")
			}
		}
	}
	for _, vs := range r.URL.Query() {
		for _, f := range forms(vs[0]) {
			b.WriteString(f + " ")
		}
	}
	if u, p, ok := r.BasicAuth(); ok {
		for _, f := range append(forms(p), forms(u+":"+p)...) {
			b.WriteString(f + " ")
		}
	}
	for _, c := range r.Cookies() {
		for _, f := range forms(c.Value) {
			b.WriteString(f + " ")
		}
	}
	return b.String()
}

// jsonUnescape undoes JSON's escapes of <, > and & (\u003c …), which
// would hide a form from a plain search.
func jsonUnescape(s string) string {
	return strings.NewReplacer(`\u003c`, "<", `\u003e`, ">", `\u0026`, "&", `\/`, "/").Replace(s)
}

var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// goneProxy is a proxy in front of an upstream that is not there.
type goneProxy struct {
	t       *testing.T
	base    string
	records func() int
}

func serveProxyTo(t *testing.T, upstream string) *goneProxy {
	base, recs := proxied(t, upstream)
	return &goneProxy{t: t, base: base, records: func() int { return len(recs()) }}
}

func (g *goneProxy) send(auth string) (int, string) {
	req, _ := http.NewRequest(http.MethodPost, g.base+"/v1/chat/completions?key="+keyQuery, strings.NewReader(`{"model":"m","stream":true}`))
	req.Header.Set("Authorization", auth)
	req.Header.Set("Cookie", "session="+keyCookie)
	c := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext}}
	resp, err := c.Do(req)
	if err != nil {
		g.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
