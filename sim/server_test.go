package sim

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"
)

// testServer is a simulator with fixed 2 ms steps behind httptest.
func testServer(t *testing.T, mod func(*Config)) (*Server, *httptest.Server) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Cost = fixedCost(2*ms, 100_000)
	cfg.ServedModel = "sim-test"
	if mod != nil {
		mod(&cfg)
	}
	s, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		hs.Close()
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s, hs
}

func post(t *testing.T, ctx context.Context, url, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// sseEvents reads the data lines of an SSE body.
func sseEvents(t *testing.T, r io.Reader) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(r)
	blank := true
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			blank = true
			continue
		}
		if !blank {
			t.Fatalf("two data lines without a blank line between: %q", line)
		}
		blank = false
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("line %q is not an SSE data line", line)
		}
		out = append(out, data)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

type streamChunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Role    *string `json:"role"`
			Content *string `json:"content"`
		} `json:"delta"`
		Text         *string `json:"text"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *usage `json:"usage"`
}

var wordRE = regexp.MustCompile(`^( [a-z]+)+$`)

func TestChatStreamFormat(t *testing.T) {
	_, hs := testServer(t, nil)
	resp := post(t, t.Context(), hs.URL+"/v1/chat/completions",
		`{"model":"x","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"one two three four"}],
		  "max_tokens":5,"stream":true,"stream_options":{"include_usage":true}}`)
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	ev := sseEvents(t, resp.Body)
	// role chunk, 5 token chunks (one token per 2 ms step), usage, [DONE]
	if len(ev) != 8 {
		t.Fatalf("got %d events, want 8:\n%s", len(ev), strings.Join(ev, "\n"))
	}
	if ev[7] != "[DONE]" {
		t.Errorf("last event = %q, want [DONE]", ev[7])
	}
	chunks := make([]streamChunk, 7)
	for i := range chunks {
		if err := json.Unmarshal([]byte(ev[i]), &chunks[i]); err != nil {
			t.Fatalf("event %d: %v: %s", i, err, ev[i])
		}
		if chunks[i].Object != "chat.completion.chunk" || chunks[i].Model != "sim-test" || chunks[i].ID != chunks[0].ID {
			t.Errorf("event %d: object %q model %q id %q", i, chunks[i].Object, chunks[i].Model, chunks[i].ID)
		}
	}
	if c := chunks[0].Choices[0]; c.Delta.Role == nil || *c.Delta.Role != "assistant" || *c.Delta.Content != "" {
		t.Errorf("first chunk = %s, want a role-only delta", ev[0])
	}
	for i := 1; i <= 5; i++ {
		c := chunks[i].Choices[0]
		if c.Delta.Content == nil || !wordRE.MatchString(*c.Delta.Content) || strings.Count(*c.Delta.Content, " ") != 1 {
			t.Errorf("chunk %d content = %s, want one word", i, ev[i])
		}
		wantFinish := i == 5
		if (c.FinishReason != nil) != wantFinish {
			t.Errorf("chunk %d finish_reason = %v, want set only on the last", i, c.FinishReason)
		}
	}
	if f := chunks[5].Choices[0].FinishReason; f == nil || *f != "length" {
		t.Errorf("finish_reason = %v, want length", f)
	}
	u := chunks[6]
	if len(u.Choices) != 0 || u.Usage == nil {
		t.Fatalf("usage chunk = %s, want empty choices and usage", ev[6])
	}
	// 6 words + 3 per message × 2 + 3 for the reply.
	if *u.Usage != (usage{PromptTokens: 15, CompletionTokens: 5, TotalTokens: 20}) {
		t.Errorf("usage = %+v, want 15 prompt + 5 completion", *u.Usage)
	}
}

func TestCompletionsStreamNoUsage(t *testing.T) {
	_, hs := testServer(t, nil)
	resp := post(t, t.Context(), hs.URL+"/v1/completions", `{"prompt":"a b c","max_tokens":3,"stream":true}`)
	defer resp.Body.Close()
	ev := sseEvents(t, resp.Body)
	if len(ev) != 4 || ev[3] != "[DONE]" {
		t.Fatalf("events = %q, want 3 token chunks and [DONE]", ev)
	}
	var c streamChunk
	if err := json.Unmarshal([]byte(ev[0]), &c); err != nil {
		t.Fatal(err)
	}
	if c.Object != "text_completion" || c.Choices[0].Text == nil || !wordRE.MatchString(*c.Choices[0].Text) {
		t.Errorf("first chunk = %s, want a text_completion with one word", ev[0])
	}
}

func TestNonStreaming(t *testing.T) {
	_, hs := testServer(t, nil)
	for _, tc := range []struct {
		path, body string
		prompt     int
	}{
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":[{"type":"text","text":"hi there"}]}],"max_completion_tokens":4}`, 8},
		{"/v1/completions", `{"prompt":["x y z w"],"max_tokens":4}`, 4},
		{"/v1/completions", `{"prompt":[1,2,3],"max_tokens":4}`, 3},
	} {
		resp := post(t, t.Context(), hs.URL+tc.path, tc.body)
		var got struct {
			Object  string `json:"object"`
			Choices []struct {
				Message struct {
					Role, Content string
				} `json:"message"`
				Text         string `json:"text"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
			Usage usage `json:"usage"`
		}
		err := json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: status %d, %v", tc.path, resp.StatusCode, err)
		}
		text := got.Choices[0].Text + got.Choices[0].Message.Content
		if strings.Count(text, " ") != 4 || !wordRE.MatchString(text) {
			t.Errorf("%s: text %q, want 4 words", tc.path, text)
		}
		if got.Usage != (usage{tc.prompt, 4, tc.prompt + 4}) || got.Choices[0].FinishReason != "length" {
			t.Errorf("%s: usage %+v finish %q, want %d+4, length", tc.path, got.Usage, got.Choices[0].FinishReason, tc.prompt)
		}
	}
}

func TestBadRequests(t *testing.T) {
	_, hs := testServer(t, func(c *Config) { c.MaxBodyBytes = 1024; c.MaxModelLen = 100 })
	for _, tc := range []struct {
		name, path, body string
		status           int
	}{
		{"bad json", "/v1/chat/completions", `{"messages":`, 400},
		{"no messages", "/v1/chat/completions", `{"messages":[]}`, 400},
		{"no prompt", "/v1/completions", `{"max_tokens":3}`, 400},
		{"zero max tokens", "/v1/completions", `{"prompt":"a","max_tokens":0}`, 400},
		{"too long", "/v1/completions", `{"prompt":"a","max_tokens":100}`, 400},
		// prompt + max_tokens overflows int: still too long, streaming or not.
		{"max_tokens at the top of int", "/v1/completions", `{"prompt":"a","max_tokens":9223372036854775807}`, 400},
		{"max_tokens at the top of int, streaming", "/v1/chat/completions", `{"messages":[{"role":"user","content":"a"}],"max_tokens":9223372036854775807,"stream":true}`, 400},
		{"max_completion_tokens at the top of int", "/v1/chat/completions", `{"messages":[{"role":"user","content":"a"}],"max_completion_tokens":9223372036854775807}`, 400},
		{"n=2", "/v1/completions", `{"prompt":"a","n":2}`, 400},
		{"body too large", "/v1/completions", `{"prompt":"` + strings.Repeat("a ", 1000) + `"}`, 413},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := post(t, t.Context(), hs.URL+tc.path, tc.body)
			defer resp.Body.Close()
			var e struct {
				Error struct{ Message, Type string } `json:"error"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.status || e.Error.Message == "" || e.Error.Type == "" {
				t.Errorf("status %d error %+v, want %d with message and type", resp.StatusCode, e.Error, tc.status)
			}
		})
	}
}

func TestModelsHealthMetrics(t *testing.T) {
	_, hs := testServer(t, nil)
	resp, err := http.Get(hs.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var models struct {
		Object string `json:"object"`
		Data   []struct{ ID, Object string }
	}
	_ = json.NewDecoder(resp.Body).Decode(&models)
	resp.Body.Close()
	if models.Object != "list" || len(models.Data) != 1 || models.Data[0].ID != "sim-test" {
		t.Errorf("models = %+v", models)
	}
	if resp, err := http.Get(hs.URL + "/health"); err != nil || resp.StatusCode != 200 {
		t.Errorf("/health: %v", err)
	} else {
		resp.Body.Close()
	}

	resp = post(t, t.Context(), hs.URL+"/v1/completions", `{"prompt":"a b","max_tokens":7}`)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	body := scrape(t, hs.URL)
	for _, want := range []string{
		"vllm:generation_tokens_total 7",
		"vllm:prompt_tokens_total 2",
		`vllm:request_success_total{finished_reason="length"} 1`,
		"vllm:num_requests_running 0",
		"vllm:num_requests_waiting 0",
		"vllm:kv_cache_usage_perc",
		"tokbench_sim_generation_tokens_per_second",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
}

func scrape(t *testing.T, base string) string {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func TestClientDisconnectCancels(t *testing.T) {
	s, hs := testServer(t, func(c *Config) { c.MaxInflight = 1 })
	ctx, cancel := context.WithCancel(t.Context())
	resp := post(t, ctx, hs.URL+"/v1/chat/completions",
		`{"messages":[{"role":"user","content":"go"}],"max_tokens":10000,"stream":true}`)
	br := bufio.NewReader(resp.Body)
	for range 6 { // role chunk and two token chunks
		if _, err := br.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
	}
	// A second request is over the in-flight limit.
	r2 := post(t, t.Context(), hs.URL+"/v1/completions", `{"prompt":"a"}`)
	r2.Body.Close()
	if r2.StatusCode != http.StatusTooManyRequests {
		t.Errorf("second request: status %d, want 429", r2.StatusCode)
	}
	cancel()
	resp.Body.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		m := scrape(t, hs.URL)
		if strings.Contains(m, "tokbench_sim_requests_cancelled_total 1") && strings.Contains(m, "vllm:num_requests_running 0") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("request not cancelled in the engine:\n%s", m)
		}
		time.Sleep(5 * ms)
	}
	if n := s.inflight.Load(); n != 0 {
		t.Errorf("in flight after disconnect = %d, want 0", n)
	}
}

func TestStartAndContextStop(t *testing.T) {
	cfg := DefaultConfig()
	s, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	base, err := s.Start(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(base, "http://127.0.0.1:") || !strings.HasSuffix(base, "/v1") {
		t.Errorf("base URL = %q", base)
	}
	resp := post(t, t.Context(), base+"/chat/completions",
		`{"messages":[{"role":"user","content":"hello"}],"max_tokens":3,"stream":true}`)
	ev := sseEvents(t, resp.Body)
	resp.Body.Close()
	if len(ev) != 5 {
		t.Errorf("events = %d, want role + 3 tokens + [DONE]", len(ev))
	}
	cancel()
	if err := s.Close(); err != nil {
		t.Error(err)
	}
	if _, err := http.Get(base + "/models"); err == nil {
		t.Error("server still answers after ctx cancel and Close")
	}
}

func TestCloseEndsStreams(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Cost = fixedCost(2*ms, 100_000)
	s, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	resp := post(t, t.Context(), hs.URL+"/v1/completions", `{"prompt":"a","max_tokens":30000,"stream":true}`)
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(br)
	resp.Body.Close()
	if !strings.Contains(string(rest), "server shutting down") {
		t.Errorf("stream after Close ends with %q, want a shutdown error event", lastN(string(rest), 200))
	}
}

// TestShutdownLetsStreamsEnd: Shutdown takes no new request and lets a
// stream in flight end whole while its context lasts; a stream longer than
// that is cut with the shutdown's error event.
func TestShutdownLetsStreamsEnd(t *testing.T) {
	for _, c := range []struct {
		name   string
		grace  time.Duration
		tokens int
		whole  bool
	}{{"ends within the grace", 10 * time.Second, 100, true}, {"cut at the grace", 100 * time.Millisecond, 30000, false}} {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Cost = fixedCost(2*ms, 100_000)
			s, err := NewServer(cfg)
			if err != nil {
				t.Fatal(err)
			}
			base, err := s.Start(t.Context(), "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			resp := post(t, t.Context(), base+"/completions", fmt.Sprintf(`{"prompt":"a","max_tokens":%d,"stream":true}`, c.tokens))
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			if _, err := br.ReadString('\n'); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), c.grace)
			defer cancel()
			shut := make(chan error, 1)
			go func() { shut <- s.Shutdown(ctx) }()
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
				if _, err := http.Get(base + "/models"); err != nil {
					break // the listener is closed
				}
				if time.Now().After(deadline) {
					t.Fatal("the server still takes requests 5 s into Shutdown")
				}
			}
			rest, _ := io.ReadAll(br)
			if whole := strings.HasSuffix(string(rest), "data: [DONE]\n\n"); whole != c.whole {
				t.Errorf("stream whole %v, want %v: it ends %q", whole, c.whole, lastN(string(rest), 200))
			}
			if !c.whole && !strings.Contains(string(rest), "server shutting down") {
				t.Errorf("the cut stream ends %q, want the shutdown's error event", lastN(string(rest), 200))
			}
			if err := <-shut; err != nil {
				t.Error(err)
			}
		})
	}
}

func lastN(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func TestRequestAfterClose(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Cost = fixedCost(2*ms, 100_000)
	s, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	defer hs.Close()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	resp := post(t, t.Context(), hs.URL+"/v1/completions", `{"prompt":"a","max_tokens":3}`)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("status after Close = %d, want 503", resp.StatusCode)
	}
}

// TestMaxConns: at the cap a new connection waits while every connection
// has a request in progress, and takes the place of one that goes idle; an
// idle keep-alive connection gives way to a new client at once.
func TestMaxConns(t *testing.T) {
	_, base, _ := startServer(t, func(c *Config) { c.MaxConns = 1 })
	get := func() chan error {
		got := make(chan error, 1)
		go func() {
			c := &http.Client{Transport: &http.Transport{}}
			defer c.CloseIdleConnections()
			r, err := c.Get(base + "/models")
			if err == nil {
				_, _ = io.Copy(io.Discard, r.Body)
				r.Body.Close()
			}
			got <- err
		}()
		return got
	}
	// The first client holds the only connection with a stream in progress
	// (500 tokens at 1 ms a step: about half a second).
	c1 := &http.Client{Transport: &http.Transport{}}
	defer c1.CloseIdleConnections()
	resp, err := c1.Post(base+"/completions", "application/json",
		strings.NewReader(`{"prompt":"a","max_tokens":500,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	got := get()
	select {
	case err := <-got:
		t.Fatalf("second connection served while the first streams (err %v)", err)
	case <-time.After(100 * time.Millisecond):
	}
	// The stream ends; c1's connection goes idle and gives way.
	_, _ = io.Copy(io.Discard, br)
	resp.Body.Close()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("second connection not served after the first went idle")
	}
	// c2 closed its connection; c1 opens one and keeps it idle; a third
	// client is served at once.
	r, err := c1.Get(base + "/models")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, r.Body)
	r.Body.Close()
	select {
	case err := <-get():
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("an idle keep-alive connection held the only slot")
	}
}

// TestSlowBodies: clients that send headers and part of a body hold neither
// the in-flight limit nor the server: a normal request is served beside
// them, and each slow one gets 408 once BodyTimeout passes.
func TestSlowBodies(t *testing.T) {
	const bodyTimeout = 300 * time.Millisecond
	_, base, addr := startServer(t, func(c *Config) { c.MaxInflight, c.BodyTimeout = 2, bodyTimeout })
	var slow []net.Conn
	for range 5 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, err = io.WriteString(c, "POST /v1/completions HTTP/1.1\r\nHost: x\r\n"+
			"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"prompt\":")
		if err != nil {
			t.Fatal(err)
		}
		slow = append(slow, c)
	}
	// A whole JSON body short of its Content-Length, then silence: 408 too,
	// not a connection held for ever.
	short, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer short.Close()
	if _, err := io.WriteString(short, "POST /v1/completions HTTP/1.1\r\nHost: x\r\n"+
		"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"prompt\":\"a\",\"max_tokens\":3}"); err != nil {
		t.Fatal(err)
	}
	slow = append(slow, short)
	start := time.Now()
	resp := post(t, t.Context(), base+"/completions", `{"prompt":"a","max_tokens":3}`)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("normal request beside 5 slow bodies: status %d, want 200", resp.StatusCode)
	}
	for i, c := range slow {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			t.Fatalf("slow client %d: %v", i, err)
		}
		if !strings.Contains(line, "408") {
			t.Errorf("slow client %d: %q, want 408", i, strings.TrimSpace(line))
		}
	}
	if el := time.Since(start); el < bodyTimeout-50*time.Millisecond {
		t.Errorf("slow bodies answered after %v, before BodyTimeout %v", el, bodyTimeout)
	}
}

func TestMaxModelLenFollowsTheModel(t *testing.T) {
	s, err := NewServer(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Llama 3.1 8B's context is 131,072 tokens; a 128k-token prompt fits.
	if got := s.Config().MaxModelLen; got != 131072 {
		t.Errorf("MaxModelLen = %d, want 131072 (llama-3.1-8b's context)", got)
	}
}

// TestContinuousUsageStats: asked for continuous usage stats, as vLLM is,
// every token chunk carries the running usage, rising by exactly the tokens
// (words) it carries — several per chunk with speculative decoding — and
// ending at the final usage. Unasked, token chunks carry none.
func TestContinuousUsageStats(t *testing.T) {
	_, hs := testServer(t, func(c *Config) {
		c.Engine.Spec = Spec{DraftTokens: 4, Acceptance: 0.8, DraftCostRatio: 0.1}
	})
	for _, asked := range []bool{true, false} {
		opts := `{"include_usage":true}`
		if asked {
			opts = `{"include_usage":true,"continuous_usage_stats":true}`
		}
		resp := post(t, t.Context(), hs.URL+"/v1/chat/completions",
			`{"model":"x","messages":[{"role":"user","content":"one two three four"}],"max_tokens":40,"stream":true,"stream_options":`+opts+`}`)
		ev := sseEvents(t, resp.Body)
		resp.Body.Close()
		if len(ev) < 4 || ev[len(ev)-1] != "[DONE]" {
			t.Fatalf("events: %q", ev)
		}
		var final streamChunk
		if err := json.Unmarshal([]byte(ev[len(ev)-2]), &final); err != nil || final.Usage == nil || final.Usage.CompletionTokens != 40 {
			t.Fatalf("final usage chunk %s: %v", ev[len(ev)-2], err)
		}
		running, multi := 0, false
		for i := 1; i < len(ev)-2; i++ { // the token chunks
			var c streamChunk
			if err := json.Unmarshal([]byte(ev[i]), &c); err != nil {
				t.Fatal(err)
			}
			words := strings.Count(*c.Choices[0].Delta.Content, " ")
			multi = multi || words > 1
			running += words
			switch {
			case !asked && c.Usage != nil:
				t.Fatalf("unasked, token chunk %d carries usage: %s", i, ev[i])
			case asked && (c.Usage == nil || c.Usage.CompletionTokens != running || c.Usage.PromptTokens != final.Usage.PromptTokens):
				t.Fatalf("token chunk %d: %s; want completion_tokens %d", i, ev[i], running)
			}
		}
		if running != 40 || !multi {
			t.Errorf("asked %v: %d tokens in the chunks (want 40), a chunk of several tokens: %v", asked, running, multi)
		}
	}
}

// TestPresetErrors: a preset out of range or not in the catalog names the
// field at fault.
func TestPresetErrors(t *testing.T) {
	good := Preset{Model: DefaultModel, Quant: DefaultQuant, Hardware: DefaultHardware, GPUs: 1, MaxBatch: 8, MaxBatchedTokens: 512}
	if _, err := good.Config(); err != nil {
		t.Fatal(err)
	}
	for field, mod := range map[string]func(*Preset){
		"gpus":               func(p *Preset) { p.GPUs = 0 },
		"max-batched-tokens": func(p *Preset) { p.SpecDraftTokens, p.MaxBatchedTokens = 8, 4 },
		"spec-acceptance":    func(p *Preset) { p.SpecAcceptance = 2 },
		"hardware":           func(p *Preset) { p.Hardware = "h9000" },
		"model":              func(p *Preset) { p.Model = "llama-3.1-405b" }, // does not fit on one H100
	} {
		p := good
		mod(&p)
		_, err := p.Config()
		if pe, ok := errors.AsType[*PresetError](err); !ok || pe.Field != field {
			t.Errorf("%s: %v, want a PresetError of that field", field, err)
		}
	}
}

// TestMaxConnsQueue: clients waiting for the only slot are served in turn;
// none is accepted and then cut off for the next in line.
func TestMaxConnsQueue(t *testing.T) {
	_, base, _ := startServer(t, func(c *Config) { c.MaxConns = 1 })
	hold := &http.Client{Transport: &http.Transport{}}
	resp, err := hold.Post(base+"/completions", "application/json", strings.NewReader(`{"prompt":"a","max_tokens":300,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			c := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
			defer c.CloseIdleConnections()
			r, err := c.Get(base + "/models")
			if err == nil {
				_, _ = io.Copy(io.Discard, r.Body)
				r.Body.Close()
			}
			errs <- err
		}()
		time.Sleep(20 * time.Millisecond) // the clients queue in order
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	hold.CloseIdleConnections()
	for i := range 4 {
		if err := <-errs; err != nil {
			t.Errorf("waiting client %d: %v", i, err)
		}
	}
}

// TestServerFrontEnd: the HTTP server keeps the front end's instants. With
// 2 ms steps, 40 ms a request and 20 ms a chunk on one output worker, a
// three-token answer's first token cannot reach the client before
// 40 + 2 + 20 = 62 ms, nor its last before 62 + 2 × 20 = 102 ms (the
// engine alone: 2 and 6 ms). Lower bounds only: a busy machine makes the
// answer later, never earlier.
func TestServerFrontEnd(t *testing.T) {
	_, hs := testServer(t, func(c *Config) { c.Engine.FrontEnd = FrontEnd{RequestMs: 40, ChunkUs: 20_000} })
	t0 := time.Now()
	resp := post(t, t.Context(), hs.URL+"/v1/completions", `{"prompt":"a b c","max_tokens":3,"stream":true}`)
	defer resp.Body.Close()
	var at []time.Duration
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, "data: {") {
			at = append(at, time.Since(t0))
		}
	}
	if len(at) != 3 {
		t.Fatalf("%d token chunks, want 3", len(at))
	}
	if at[0] < 62*ms || at[2] < 102*ms {
		t.Errorf("first token at %v, last at %v: want no earlier than 62 ms and 102 ms", at[0], at[2])
	}
}

// TestServerArrivalNotBackdated: behind a front end that writes each
// chunk out in 20 ms after 2 ms steps, the engine's clock runs tens of
// milliseconds behind the loop, which sleeps until each step's delivery.
// A request sent while a stream is under way is stamped no earlier than
// it was sent (the engine-clock stamp was 18–38 ms early).
func TestServerArrivalNotBackdated(t *testing.T) {
	arrivals := make(chan time.Duration, 2)
	s, hs := testServer(t, func(c *Config) {
		c.Engine.FrontEnd = FrontEnd{ChunkUs: 20_000}
		c.onArrival = func(a time.Duration) { arrivals <- a }
	})
	resp := post(t, t.Context(), hs.URL+"/v1/completions", `{"prompt":"a b c","max_tokens":30,"stream":true}`)
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for n := 0; n < 4 && sc.Scan(); {
		if strings.HasPrefix(sc.Text(), "data: {") {
			n++
		}
	}
	<-arrivals
	sent := time.Since(s.base)
	b := post(t, t.Context(), hs.URL+"/v1/completions", `{"prompt":"a b c","max_tokens":1}`)
	b.Body.Close()
	if got := <-arrivals; got < sent-time.Millisecond {
		t.Errorf("request sent at %v (server clock) stamped as arriving at %v", sent, got)
	}
}
