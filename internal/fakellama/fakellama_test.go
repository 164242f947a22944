package fakellama

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestSlotsAndEndpoints: with 2 slots, a third request waits for one (its
// first token comes after one of the others' last); every
// chunk names the model the request named; /props, /slots and /metrics say
// what the loop did.
func TestSlotsAndEndpoints(t *testing.T) {
	const step = 10 * time.Millisecond
	s := New(Config{Slots: 2, Step: step, Tokens: 5})
	defer s.Close()
	start := time.Now()
	var wg sync.WaitGroup
	first, last := make([]time.Duration, 3), make([]time.Duration, 3)
	models := make([]string, 3)
	for i := range 3 {
		if i == 2 { // once the first two hold the slots
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
				s.mu.Lock()
				busy := len(s.active)
				s.mu.Unlock()
				if busy == 2 || time.Now().After(deadline) {
					break
				}
			}
		}
		wg.Go(func() {
			resp, err := http.Post(s.URL+"/v1/chat/completions", "application/json",
				strings.NewReader(`{"model":"anything","stream":true,"messages":[{"role":"user","content":"one two three"}]}`))
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				line, ok := strings.CutPrefix(sc.Text(), "data: ")
				if !ok || line == "[DONE]" {
					continue
				}
				var c struct{ Model string }
				if err := json.Unmarshal([]byte(line), &c); err != nil {
					t.Errorf("chunk %q: %v", line, err)
					return
				}
				if first[i] == 0 {
					first[i] = time.Since(start)
				}
				last[i] = time.Since(start)
				models[i] = c.Model
			}
		})
	}
	wg.Wait()
	if done := min(last[0], last[1]); first[2] < done {
		t.Errorf("third request's first token at %v, before either other finished (%v): it should wait for a slot", first[2], done)
	}
	for i, m := range models {
		if m != "anything" {
			t.Errorf("request %d answered as model %q, want the name it gave", i, m)
		}
	}
	get := func(path string) string {
		resp, err := http.Get(s.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if p := get("/props"); !strings.Contains(p, `"total_slots":2`) || !strings.Contains(p, `"model_path":"model/rand-1024x8.gguf"`) {
		t.Errorf("/props = %s", p)
	}
	if sl := get("/slots"); strings.Count(sl, `"id":`) != 2 {
		t.Errorf("/slots = %s, want 2 slots", sl)
	}
	m := get("/metrics")
	for _, want := range []string{"llamacpp:tokens_predicted_total 15\n", "llamacpp:prompt_tokens_total 9\n", "llamacpp:requests_deferred 0\n"} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, m)
		}
	}
	if n, busy := s.Steps(); n < 10 || busy <= 1 {
		t.Errorf("%d steps, %.2f busy slots a step; want 10 or more, more than 1", n, busy)
	}
}
