package workload

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tokbench/tokbench/tokenize"
)

func writeTrace(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestReadTraceFormats: each format's instants (from the first request,
// in order), lengths, hash ids and sessions.
func TestReadTraceFormats(t *testing.T) {
	for _, c := range []struct {
		name, text, format string
		at                 []time.Duration
		in, out            []int
	}{
		{"m.jsonl", `{"timestamp": 5000, "input_length": 700, "output_length": 3, "hash_ids": [1, 2]}
{"timestamp": 5250.5, "input_length": 10, "output_length": 4, "hash_ids": [1]}
`, TraceMooncake, []time.Duration{0, 250500 * time.Microsecond}, []int{700, 10}, []int{3, 4}},
		{"a.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:46.5000000,396,109\n",
			TraceAzure, []time.Duration{0, 180590 * time.Microsecond}, []int{396, 374}, []int{109, 44}},
		{"p.jsonl", `{"t": 1.5, "input_tokens": 20, "output_tokens": 5, "session": "s1"}
{"t": 0.5, "prompt": "hello there", "output_tokens": 7, "session": 42}
`, TraceJSONL, []time.Duration{0, time.Second}, []int{0, 20}, []int{7, 5}},
	} {
		tr, err := ReadTrace(writeTrace(t, c.name, c.text), "")
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if tr.Format != c.format || len(tr.Requests) != len(c.at) {
			t.Fatalf("%s: format %s, %d requests", c.name, tr.Format, len(tr.Requests))
		}
		for i, r := range tr.Requests {
			if r.At != c.at[i] || r.InputTokens != c.in[i] || r.OutputTokens != c.out[i] {
				t.Errorf("%s request %d: at %v in %d out %d, want %v %d %d", c.name, i, r.At, r.InputTokens, r.OutputTokens, c.at[i], c.in[i], c.out[i])
			}
		}
	}
}

// TestReadTraceErrors: a bad line names the file, the line and the field.
func TestReadTraceErrors(t *testing.T) {
	for _, c := range []struct{ name, text, want string }{
		{"m.jsonl", `{"timestamp": 1, "input_length": 5, "output_length": 2}` + "\n" + `{"timestamp": 2, "input_length": 5}`, `:2: field "output_length": missing`},
		{"m.jsonl", `{"timestamp": -1, "input_length": 5, "output_length": 2}`, `:1: field "timestamp"`},
		{"m.jsonl", `{"timestamp": 1, "input_length": 2000, "output_length": 2, "hash_ids": [1]}`, `:1: field "hash_ids"`},
		{"m.jsonl", `{"timestamp": "soon", "input_length": 5, "output_length": 2}`, `:1: field "timestamp"`},
		{"p.jsonl", `{"t": 1, "output_tokens": 2}`, `:1: field "input_tokens": missing`},
		{"p.jsonl", `{"t": 1, "input_tokens": 3, "output_tokens": 2, "session": [1]}`, `:1: field "session"`},
		{"a.csv", "TIMESTAMP,ContextTokens\n", `:1: field "GeneratedTokens"`},
		{"a.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,x,3\n", `:2: field "ContextTokens"`},
		{"a.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,3,3\n", `:2: field "TIMESTAMP"`},
	} {
		path := writeTrace(t, c.name, c.text)
		_, err := ReadTrace(path, "")
		if err == nil || !strings.Contains(err.Error(), path+c.want) {
			t.Errorf("%q: error %v, want %q", c.text, err, path+c.want)
		}
		if _, ok := errors.AsType[*RowError](err); !ok && !strings.Contains(c.want, "csv") {
			t.Errorf("%q: %T, want a *RowError", c.text, err)
		}
	}
}

// TestTraceWindowAndSpeed: a window keeps its requests from its start; a
// speed divides the instants.
func TestTraceWindowAndSpeed(t *testing.T) {
	tr := &Trace{Requests: []TraceRequest{{At: 0}, {At: time.Second}, {At: 2 * time.Second}, {At: 3 * time.Second}}}
	w := tr.Window(time.Second, 3*time.Second)
	if len(w.Requests) != 2 || w.Requests[0].At != 0 || w.Requests[1].At != time.Second {
		t.Errorf("window %+v", w.Requests)
	}
	if off := tr.Offsets(2); off[3] != 1500*time.Millisecond {
		t.Errorf("offsets at speed 2: %v", off)
	}
}

// TestTraceSourcePrompts: synthetic prompts of the trace's exact lengths;
// a hash id's block is the same words wherever it appears; a session's
// requests start alike; the trace's own prompt is sent as given.
func TestTraceSourcePrompts(t *testing.T) {
	tok, _ := tokenize.Open(tokenize.Default)
	tr := &Trace{Requests: []TraceRequest{
		{InputTokens: 600, OutputTokens: 3, HashIDs: []int64{9, 1}},
		{InputTokens: 700, OutputTokens: 3, HashIDs: []int64{9, 2}},
		{InputTokens: 50, OutputTokens: 3, Session: "a"},
		{InputTokens: 80, OutputTokens: 3, Session: "a"},
		{Prompt: "as recorded", OutputTokens: 9},
	}}
	s, err := NewTraceSource(tr, tok, "m", 1)
	if err != nil {
		t.Fatal(err)
	}
	text := func(i int) string {
		req, n := s.Request(i)
		if req.MaxTokens != tr.Requests[i].OutputTokens || !req.IgnoreEOS || req.Model != "m" {
			t.Errorf("request %d: %+v", i, req)
		}
		c := req.Messages[0].Content
		if n > 0 && tok.Count(c) != n {
			t.Errorf("request %d: %d tokens, want %d", i, tok.Count(c), n)
		}
		return c
	}
	a, b := text(0), text(1)
	if a[:len(firstWords(a, 512))] != b[:len(firstWords(b, 512))] || a == b {
		t.Error("requests sharing hash id 9 do not share its block")
	}
	if !strings.HasPrefix(text(3), text(2)) {
		t.Error("a session's longer request does not start with its shorter one")
	}
	if text(4) != "as recorded" {
		t.Errorf("the trace's prompt was not sent as given")
	}
	if w, _ := s.WarmupRequest(0); strings.HasPrefix(text(0), w.Messages[0].Content[:20]) {
		t.Error("the warm-up request's words are the first request's")
	}
}

// TestShareGPTTurnsDriveAChat: a conversation's later human turns are a
// chat's later turns, each answered as long as its recorded reply; its
// first turn is its first prompt.
func TestShareGPTTurnsDriveAChat(t *testing.T) {
	text := `[{"conversations": [
	  {"from": "human", "value": "first question"}, {"from": "gpt", "value": "one two three"},
	  {"from": "human", "value": "second question"}, {"from": "gpt", "value": "one two three four five"},
	  {"from": "human", "value": "third question"}]}]`
	var rows []Row
	if err := ReadShareGPT(strings.NewReader(text), "c.json", Limits{}, func(r Row) error { rows = append(rows, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || len(rows[0].Turns) != 2 || rows[0].TurnReplies[0] != "one two three four five" || rows[0].TurnReplies[1] != "" {
		t.Fatalf("rows %+v", rows)
	}
	tok, _ := tokenize.Open(tokenize.Default)
	s, err := NewSource(t.Context(), Config{Tokenizer: tok, Input: Fixed(8), Output: Fixed(50), Rows: rows, Steps: 3}, 3)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []struct {
		text string
		max  int
	}{{"first question", 3}, {"second question", 5}, {"third question", 50}} {
		req, _ := s.Request(i)
		if got := req.Messages[len(req.Messages)-1].Content; got != want.text || req.MaxTokens != want.max {
			t.Errorf("turn %d: %q max %d, want %q max %d", i+1, got, req.MaxTokens, want.text, want.max)
		}
	}
}

// TestTraceBackwardsNoted is issue 34's: a trace whose timestamps go back
// in time is sent in time order, and says so, naming the first such line
// and by how much; one in order says nothing.
func TestTraceBackwardsNoted(t *testing.T) {
	path := writeTrace(t, "b.jsonl", `{"t": 1.0, "input_tokens": 20, "output_tokens": 5}
{"t": 3.0, "input_tokens": 20, "output_tokens": 5}
{"t": 0.5, "input_tokens": 20, "output_tokens": 5}
{"t": 4.0, "input_tokens": 20, "output_tokens": 5}
{"t": 3.5, "input_tokens": 20, "output_tokens": 5}
`)
	tr, err := ReadTrace(path, "")
	if err != nil {
		t.Fatal(err)
	}
	want := "trace " + path + ": 2 of 5 requests are stamped before the one above them (the first at line 3, 2.5s before line 2's); they are sent in time order"
	if len(tr.Notes) != 1 || tr.Notes[0] != want {
		t.Errorf("notes %q, want [%q]", tr.Notes, want)
	}
	var lines []int
	for _, r := range tr.Requests {
		lines = append(lines, r.Line)
	}
	if got := fmt.Sprint(lines); got != "[3 1 2 5 4]" {
		t.Errorf("send order by line %s, want [3 1 2 5 4]", got)
	}
	if w := tr.Window(0, 0); len(w.Notes) != 1 {
		t.Errorf("a window of it lost the note: %q", w.Notes)
	}
	inOrder, err := ReadTrace(writeTrace(t, "o.jsonl", "{\"t\": 1, \"input_tokens\": 2, \"output_tokens\": 1}\n{\"t\": 1, \"input_tokens\": 2, \"output_tokens\": 1}\n"), "")
	if err != nil || len(inOrder.Notes) != 0 {
		t.Errorf("a trace in order: notes %q, %v", inOrder.Notes, err)
	}
}
