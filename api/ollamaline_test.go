package api

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// checkOllamaLine compares the fast scanner with encoding/json on one line:
// whenever the scanner accepts a line, it must be valid JSON and decode to
// the same ollamaLine. It reports whether the fast path was taken.
func checkOllamaLine(t *testing.T, sc *ollamaScanner, data []byte) bool {
	t.Helper()
	var want ollamaLine
	stdErr := json.Unmarshal(data, &want)
	if !sc.scan(data) {
		return false
	}
	if !json.Valid(data) || stdErr != nil {
		t.Fatalf("scan(%q) accepted what encoding/json rejects: %v", data, stdErr)
	}
	f := &sc.f
	got := ollamaLine{Response: string(f.response), Thinking: string(f.thinking)}
	if f.message {
		got.Message = &ollamaMessage{Content: string(f.content), Thinking: string(f.messageThinking)}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("scan(%q) = %+v %+v, encoding/json gives %+v %+v", data, got, got.Message, want, want.Message)
	}
	return true
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

func TestOllamaScannerAgreesWithEncodingJSON(t *testing.T) {
	var sc ollamaScanner
	for _, c := range ollamaLineCases {
		if got := checkOllamaLine(t, &sc, []byte(c.line)); got != c.handled {
			t.Errorf("scan(%q) handled = %v, want %v", c.line, got, c.handled)
		}
	}
	// Every capture's token lines take the fast path (and agree); its
	// final line, done true, does not.
	files, _ := filepath.Glob("testdata/ollama-*.ndjson")
	if len(files) == 0 {
		t.Fatal("no Ollama captures in testdata")
	}
	for _, f := range files {
		for _, line := range ndjsonLines(t, f) {
			var o ollamaLine
			if err := json.Unmarshal(line, &o); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if got := checkOllamaLine(t, &sc, line); got != !o.Done {
				t.Errorf("%s: scan(%s) handled = %v, want %v", f, line, got, !o.Done)
			}
		}
	}
}

// TestOllamaScannerReused: a line's unescaped text does not leak into the
// next line's fields.
func TestOllamaScannerReused(t *testing.T) {
	var sc ollamaScanner
	for _, c := range []struct{ line, text string }{
		{`{"response":"a\nb","thinking":"\u00e9"}`, "a\nb"},
		{`{"message":{"content":"c\td"}}`, "c\td"},
		{`{"response":"plain"}`, "plain"},
		{`{"done":false}`, ""},
	} {
		if !sc.scan([]byte(c.line)) {
			t.Fatalf("scan(%q) not handled", c.line)
		}
		if text, _ := sc.f.text(); string(text) != c.text {
			t.Errorf("scan(%q) text = %q, want %q", c.line, text, c.text)
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
	var sc ollamaScanner
	f.Fuzz(func(t *testing.T, data []byte) {
		checkOllamaLine(t, &sc, data)
	})
}
