package api

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// checkOllamaLine checks the ollamaDecoder on one line, as checkDecoder
// does the chunkDecoder: the fast path reads what fastjson reads, and a
// line encoding/json reads, written back in its canonical form, reads the
// same with the decoder.
func checkOllamaLine(t *testing.T, d *ollamaDecoder, data []byte) {
	t.Helper()
	fields := func(f *ollamaFields) [11]any {
		return [...]any{validString(f.text), validString(f.thinking), f.done, string(f.doneReason), string(f.err),
			f.loadDuration, f.promptEvalCount, f.promptEvalDuration, f.evalCount, f.evalDuration, validString(f.createdAt)}
	}
	if d.h.ollama(data, &d.f) {
		fast := fields(&d.f)
		if err := d.slow(data); err != nil {
			t.Fatalf("the fast path read %q, which fastjson refuses: %v", data, err)
		}
		if slow := fields(&d.f); fast != slow {
			t.Fatalf("the fast path and fastjson read %q differently: %v vs %v", data, fast, slow)
		}
	}
	var want ollamaLine
	if json.Unmarshal(data, &want) != nil {
		return
	}
	canon, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	text, thinking := want.Response, want.Thinking
	if want.Message != nil {
		text, thinking = want.Message.Content, want.Message.Thinking
	}
	exp := [...]any{text, thinking, want.Done, want.DoneReason, want.Error,
		want.LoadDuration, want.PromptEvalCount, want.PromptEvalDuration, want.EvalCount, want.EvalDuration, want.CreatedAt}
	for _, path := range []string{"decode", "slow"} {
		if path == "decode" {
			err = d.decode(canon)
		} else {
			err = d.slow(canon)
		}
		if err != nil {
			t.Fatalf("%s(%s) = %v; encoding/json reads it", path, canon, err)
		}
		if got := fields(&d.f); got != exp {
			t.Fatalf("%s(%s) = %v, encoding/json gives %v", path, canon, got, exp)
		}
	}
}

var ollamaLineCases = []struct {
	line    string
	handled bool
}{
	// The hot line and its variants.
	{`{"model":"llama3.1:8b","created_at":"2026-11-29T20:00:00.123456789Z","message":{"role":"assistant","content":" world"},"done":false}`, true},
	{`{"model":"llama3.1:8b","created_at":"2026-11-29T20:00:00.123456789Z","response":" world","done":false}`, true},
	{`{"model":"m","created_at":"t","response":"","thinking":"hmm","done":false}`, true},
	{`{"model":"m","message":{"role":"assistant","content":"","thinking":"hmm"},"done":false}`, true},
	{`{"response":"r","thinking":"t","message":{"content":"c"}}`, true}, // message wins in Decode; both kept here
	{`{"response":"a\nb \"q\" \\ \/ \b\f\r\t \u003c\u00e9\u2028\uFFFD\u0000 end","done":false}`, true},
	{`{"message":{"content":"\u003cthink\u003e\n"}}`, true},
	{`{"response":"é世界😀 \u00e9","done":false}`, true},
	{" { \"response\" : \"x\" ,\t\"done\" :\r\nfalse } \n", true},
	{`{}`, true},
	{`{"message":{}}`, true},
	{`{"response":"x"}`, true}, // no done: false, as encoding/json leaves it
	{`{"n":-1.5e+3,"m":0,"e":2E-2,"t":true,"z":null,"f":false,"s":"\u0041\"","response":"x"}`, true},
	{`{"model":"a","model":"b","response":"x"}`, true}, // ignored members may repeat
	{`{"message":{"role":null,"images":null,"n":1,"content":"x"}}`, true},
	{`{"responses":"x","don":true,"message_":1}`, true},

	// Anything else goes to encoding/json.
	{`{"model":"m","response":"","done":true,"done_reason":"stop","eval_count":3}`, false},
	{`{"error":"boom"}`, false},
	{`{"Error":"boom","done":false}`, false},
	{`{"response":"x","done_reason":"stop","done":false}`, false},
	{`{"Response":"x"}`, false},
	{`{"THINKING":"x"}`, false},
	{`{"message":{"Content":"x"}}`, false},
	{`{"Message":{"content":"x"}}`, false},
	{`{"DONE":false}`, false},
	{`{"eval_count":1}`, false},
	{`{"response":"a","response":"b"}`, false},
	{`{"thinking":"a","thinking":"b"}`, false},
	{`{"message":{"content":"a"},"message":{"thinking":"b"}}`, false},
	{`{"message":{"content":"a","content":"b"}}`, false},
	{`{"done":false,"done":false}`, false},
	{`{"response":"\ud83d\ude00"}`, false},
	{`{"response":"\ud800"}`, false},
	{`{"response":"\uDFFFx"}`, false},
	{"{\"response\":\"bad\xffutf8\"}", false},
	{"{\"model\":\"bad\xed\xa0\x80\",\"response\":\"x\"}", false},
	{"{\"message\":{\"content\":\"\xc3\"}}", false},
	{`{"context":[1,2],"response":"x"}`, false},
	{`{"message":{"content":"x","tool_calls":[]}}`, false},
	{`{"x":{},"response":"x"}`, false},
	{`{"message":null}`, false},
	{`{"message":"x"}`, false},
	{`{"response":null}`, false},
	{`{"response":1}`, false},
	{`{"done":null}`, false},
	{`{"done":0}`, false},
	{`{"message":{"content":null}}`, false},
	{`{"message":{"thinking":true}}`, false},
	{`{"respons\u0065":"x"}`, false},
	{`{"réponse":"x"}`, false},
	{`{"response":"x",}`, false},
	{`{,"response":"x"}`, false},
	{`{"response":"x"} x`, false},
	{`{"response":"x"}{}`, false},
	{`{"response":"x"`, false},
	{`{"response":"x`, false},
	{`{"response" "x"}`, false},
	{`{"response":"a\qb"}`, false},
	{`{"response":"\u12"}`, false},
	{`{"response":"\u12g4"}`, false},
	{"{\"response\":\"tab\there\"}", false},
	{`{"n":01}`, false},
	{`{"n":1.}`, false},
	{`{"n":+1}`, false},
	{`{"n":.5}`, false},
	{`{"n":1e}`, false},
	{`{"n":-}`, false},
	{`{"t":tru}`, false},
	{`{"t":nul}`, false},
	{`{"t":True}`, false},
	{`{"done":fals}`, false},
	{`null`, false},
	{`[]`, false},
	{`"x"`, false},
	{``, false},
	{` `, false},
}

func TestOllamaDecoderAgreesWithEncodingJSON(t *testing.T) {
	var d ollamaDecoder
	for _, c := range ollamaLineCases {
		checkOllamaLine(t, &d, []byte(c.line))
	}
	files, _ := filepath.Glob("testdata/ollama-*.ndjson")
	if len(files) == 0 {
		t.Fatal("no Ollama captures in testdata")
	}
	for _, f := range files {
		for _, line := range ndjsonLines(t, f) {
			if err := d.decode(line); err != nil {
				t.Errorf("%s: %v: %s", f, err, line)
			}
			// Token lines (not done) take the fast path.
			if !d.f.done && !bytes.Contains(line, []byte(`\`)) && !d.h.ollama(line, &d.f) {
				t.Errorf("%s: a token line missed the fast path: %s", f, line)
			}
			checkOllamaLine(t, &d, line)
		}
	}
}

// TestOllamaDecoderReused: a line's text does not leak into the next
// line's fields.
func TestOllamaDecoderReused(t *testing.T) {
	var d ollamaDecoder
	for _, c := range []struct{ line, text string }{
		{`{"response":"a\nb","thinking":"\u00e9"}`, "a\nb"},
		{`{"message":{"content":"c\td"}}`, "c\td"},
		{`{"response":"plain"}`, "plain"},
		{`{"done":false}`, ""},
	} {
		if err := d.decode([]byte(c.line)); err != nil {
			t.Fatalf("decode(%q): %v", c.line, err)
		}
		if string(d.f.text) != c.text {
			t.Errorf("decode(%q) text = %q, want %q", c.line, d.f.text, c.text)
		}
	}
}

func ndjsonLines(t testing.TB, path string) [][]byte {
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var lines [][]byte
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) > 0 {
			lines = append(lines, bytes.Clone(sc.Bytes()))
		}
	}
	return lines
}

func FuzzOllamaLine(f *testing.F) {
	for _, c := range ollamaLineCases {
		f.Add([]byte(c.line))
	}
	files, _ := filepath.Glob("testdata/ollama-*.ndjson")
	for _, file := range files {
		for _, line := range ndjsonLines(f, file) {
			f.Add(line)
		}
	}
	var d ollamaDecoder
	f.Fuzz(func(t *testing.T, data []byte) {
		checkOllamaLine(t, &d, data)
	})
}
