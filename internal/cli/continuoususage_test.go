package cli

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tokbench/tokbench/internal/fakellm"
	"github.com/tokbench/tokbench/results"
	"github.com/tokbench/tokbench/tokenize"
)

// peopleTokenizer writes a byte-level tokenizer.json under which " people"
// is seven tokens (one per byte) and every other word of the fake, and
// enough common words for synthetic prompts, is one. Local counts then put
// the fake's tokens in other chunks than it sent them in.
func peopleTokenizer(t *testing.T) string {
	t.Helper()
	vocab := map[string]int{}
	var enc [256]string // GPT-2's byte-to-rune map
	n := 0
	for b := 0; b < 256; b++ {
		r := rune(b)
		if !(b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE && b <= 0xFF) {
			r = rune(256 + n)
			n++
		}
		enc[b] = string(r)
		vocab[enc[b]] = b
	}
	words := strings.Fields(`of and to in is was for that on with as by at from his her they have had are
		not but this which were all their one been has more when there who will would into only other new
		some could these two may first then do any like my now over such our man me even most made after`)
	for _, w := range fakellm.Words {
		if w != " people" {
			words = append(words, strings.TrimSpace(w))
		}
	}
	for _, w := range words {
		vocab[enc[' ']+w] = len(vocab)
	}
	f := map[string]any{
		"pre_tokenizer": map[string]any{"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
		"decoder":       map[string]any{"type": "ByteLevel"},
		"model":         map[string]any{"type": "BPE", "vocab": vocab, "merges": []string{}, "ignore_merges": true},
	}
	data, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tokenizer.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	tok, err := tokenize.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := tok.Count(" people"), tok.Count(" the time water"); a != 7 || b != 3 {
		t.Fatalf("test tokenizer: %q is %d tokens, want 7; %q is %d, want 3", " people", a, " the time water", b)
	}
	return path
}

// TestBenchContinuousUsage runs bench against a fake that sends its
// running usage in every chunk only when the request asks for it
// (stream_options.continuous_usage_stats, as vLLM), in chunks of 3, 1 and 2
// tokens. --continuous-usage auto asks when the server is known to be vLLM
// (--api auto detected it, or the model list bench reads without --model
// says owned_by "vllm"), and only then: no other probe is made. When asked,
// every record's chunks carry exactly the tokens the fake sent in them;
// when not, the local tokenizer, which miscounts " people", puts them
// elsewhere, so the test tells the two apart. run.json records the choice.
func TestBenchContinuousUsage(t *testing.T) {
	tokFile := peopleTokenizer(t)
	cases := []struct {
		name        string
		ownedBy     string
		completions bool
		args        []string
		want        bool // the requests ask for usage in every chunk
	}{
		{"model list says vllm", "vllm", false, []string{"--continuous-usage", "auto"}, true},
		{"model list says vllm, completions", "vllm", true, []string{"--api", "openai-completions"}, true},
		{"api auto detects vllm", "vllm", false, []string{"--api", "auto"}, true},
		{"model list says another engine", "sglang", false, []string{"--continuous-usage", "auto"}, false},
		{"model list without owned_by", "", false, nil, false},
		{"model given: no list read", "vllm", false, []string{"--model", "fake-model"}, false},
		{"off", "vllm", false, []string{"--continuous-usage", "off"}, false},
		{"on", "", false, []string{"--continuous-usage", "on"}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := fakellm.New(fakellm.Script{TTFT: 2 * time.Millisecond, Gap: time.Millisecond, Tokens: 12,
				ChunkSizes: []int{3, 1, 2}, Usage: true, ContinuousUsageOnRequest: true, RoleChunk: true,
				OwnedBy: c.ownedBy, Completions: c.completions})
			defer srv.Close()
			dir := filepath.Join(t.TempDir(), "run")
			args := append([]string{"bench", "--url", srv.URL + "/v1", "--tokenizer", tokFile, "--concurrency", "2",
				"--requests", "4", "--warmup", "0", "--output-tokens", "12", "--out", dir, "--format", "json"}, c.args...)
			code, _, stderr := runCLI(context.Background(), nil, args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			// auto says when it asks; on was the user's own word.
			if note, wantNote := strings.Contains(stderr, "the server is vLLM: asking for usage in every chunk"), c.want && !slices.Contains(c.args, "on"); note != wantNote {
				t.Errorf("stderr %q: says it asks %v, want %v", stderr, note, wantNote)
			}

			want := map[string]any{"include_usage": true}
			if c.want {
				want["continuous_usage_stats"] = true
			}
			bodies := srv.Bodies()
			if len(bodies) != 4 {
				t.Fatalf("the fake saw %d requests, want 4", len(bodies))
			}
			for i, b := range bodies {
				if so, ok := b["stream_options"].(map[string]any); !ok || !maps.Equal(so, want) {
					t.Errorf("request %d: stream_options %#v, want %#v", i, b["stream_options"], want)
				}
			}

			recs, _, err := results.ReadRecords(dir)
			if err != nil || len(recs) != 4 {
				t.Fatalf("requests.jsonl: %d records, %v", len(recs), err)
			}
			sent := map[string][]int{}
			for _, st := range srv.Streams() {
				sent[st.ID] = st.Tokens
			}
			for _, r := range recs {
				s, ok := sent[r.ResponseID]
				if !ok || r.OutputTokens != 12 {
					t.Fatalf("record %d: response id %q, %d output tokens; the fake sent %v", r.ID, r.ResponseID, r.OutputTokens, sent)
				}
				if exact := slices.Equal(r.ChunkTokens, s); exact != c.want {
					t.Errorf("record %d: chunk tokens %v, the fake sent %v (want equal: %v)", r.ID, r.ChunkTokens, s, c.want)
				}
			}

			var run results.Run
			raw, err := os.ReadFile(filepath.Join(dir, results.RunFile))
			if err == nil {
				err = json.Unmarshal(raw, &run)
			}
			if err != nil {
				t.Fatal(err)
			}
			if got, ok := run.Config["continuous_usage"].(bool); !ok || got != c.want {
				t.Errorf("run.json config continuous_usage = %#v, want %v", run.Config["continuous_usage"], c.want)
			}
		})
	}
}

// TestBenchContinuousUsageOnOtherAPI: --continuous-usage on with an API
// that has no such option is a one-line usage error naming the flag, also
// when --api auto finds such an API (after the line saying what it found).
func TestBenchContinuousUsageOnOtherAPI(t *testing.T) {
	srv, _ := fakeOllama(t)
	for _, c := range []struct {
		api   string
		lines int // --api auto says what it found first
	}{{"ollama-chat", 1}, {"auto", 2}} {
		code, _, stderr := runCLI(context.Background(), nil, "bench", "--url", srv.URL, "--api", c.api,
			"--continuous-usage", "on", "--concurrency", "1", "--requests", "1", "--warmup", "0")
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		last := lines[len(lines)-1]
		if code != ExitUsage || len(lines) != c.lines || !strings.Contains(last, "--continuous-usage") || !strings.Contains(last, "ollama-chat") {
			t.Errorf("--api %s: exit %d, stderr %q; want 2 and a last line naming --continuous-usage and ollama-chat", c.api, code, stderr)
		}
	}
}

// TestBenchSimulatorContinuousUsage: the embedded simulator answers
// continuous_usage_stats as vLLM does, so auto asks it (quietly: no vLLM
// line), and off does not.
func TestBenchSimulatorContinuousUsage(t *testing.T) {
	for _, c := range []struct {
		mode string
		want bool
	}{{"auto", true}, {"off", false}} {
		dir := filepath.Join(t.TempDir(), "run")
		code, _, stderr := runCLI(context.Background(), nil, "bench", "--concurrency", "1", "--requests", "2", "--warmup", "0",
			"--input-tokens", "32", "--output-tokens", "8", "--continuous-usage", c.mode, "--out", dir, "--format", "json")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", c.mode, code, stderr)
		}
		if strings.Contains(stderr, "vLLM") {
			t.Errorf("%s: stderr mentions vLLM for the simulator: %q", c.mode, stderr)
		}
		var run results.Run
		raw, err := os.ReadFile(filepath.Join(dir, results.RunFile))
		if err == nil {
			err = json.Unmarshal(raw, &run)
		}
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := run.Config["continuous_usage"].(bool); !ok || got != c.want {
			t.Errorf("%s: run.json config continuous_usage = %#v, want %v", c.mode, run.Config["continuous_usage"], c.want)
		}
		recs, _, err := results.ReadRecords(dir)
		if err != nil || len(recs) != 2 {
			t.Fatalf("%s: %d records, %v", c.mode, len(recs), err)
		}
		for _, r := range recs {
			sum := 0
			for _, k := range r.ChunkTokens {
				sum += k
			}
			if !r.OK || r.OutputTokens != 8 || sum != 8 {
				t.Errorf("%s: record %d: ok %v, %d output tokens, chunk tokens %v", c.mode, r.ID, r.OK, r.OutputTokens, r.ChunkTokens)
			}
		}
	}
}
