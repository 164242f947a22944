package benchmark

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tokbench/tokbench/internal/fakellm"
	"github.com/tokbench/tokbench/workload"
)

// TestChatConversation: a 5-turn chat sends, at turn k, the whole
// conversation so far — every earlier prompt and the answer as it was
// streamed — and a new message; prompts grow turn by turn, and the level
// reports each turn.
func TestChatConversation(t *testing.T) {
	const tokens = 6
	srv := fakellm.New(fakellm.Script{TTFT: time.Millisecond, Gap: time.Millisecond, Tokens: tokens, Usage: true})
	defer srv.Close()
	p := DefaultPlan()
	p.URL, p.Model = srv.URL+"/v1", "m"
	p.Load = LevelSpec{Concurrency: []int{1}, Requests: 1, Steps: 5}
	p.Workload.Chat = true
	p.Workload.Inputs, p.Workload.Output = []workload.Dist{workload.Fixed(20)}, workload.Fixed(tokens)
	res, err := Run(context.Background(), p, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	answer := strings.Join(fakellm.Words[:tokens], "") // what the server streams
	bodies := srv.Bodies()
	if len(bodies) != 5 {
		t.Fatalf("%d requests, want 5 turns", len(bodies))
	}
	var prev []any
	size := 0
	for k, b := range bodies {
		msgs := b["messages"].([]any)
		if len(msgs) != 2*k+1 {
			t.Fatalf("turn %d sends %d messages, want %d", k+1, len(msgs), 2*k+1)
		}
		if k > 0 {
			if !reflect.DeepEqual(msgs[:2*k-1], prev) {
				t.Errorf("turn %d does not start with turn %d's messages", k+1, k)
			}
			a := msgs[2*k-1].(map[string]any)
			if a["role"] != "assistant" || strings.TrimSpace(a["content"].(string)) != strings.TrimSpace(answer) {
				t.Errorf("turn %d carries answer %v, want the streamed %q", k+1, a, answer)
			}
		}
		prev = msgs
		n := 0
		for _, m := range msgs {
			n += len(strings.Fields(m.(map[string]any)["content"].(string)))
		}
		if n <= size {
			t.Errorf("turn %d's prompt has %d words, turn %d's %d: it does not grow", k+1, n, k, size)
		}
		size = n
	}
	turns := res.Summary.Levels[0].Turns
	if len(turns) != 5 {
		t.Fatalf("%d turns reported", len(turns))
	}
	for i, tu := range turns {
		if tu.Turn != i+1 || tu.Completed != 1 || tu.TTFT.Count != 1 {
			t.Errorf("turn %d reported as %+v", i+1, tu)
		}
	}
}
