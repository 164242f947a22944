package sim

import (
	"context"
	"reflect"
	"testing"
	"time"
)

// TestFrontEndInstants: with 10 ms steps, two requests arriving together
// are parsed (3 ms) and tokenized one after the other (10 tokens at
// 100 µs), each step schedules its sequences (1 ms each), and one worker
// writes every step's chunks out (0.5 ms each) after the step.
func TestFrontEndInstants(t *testing.T) {
	fe := FrontEnd{RequestMs: 3, TokenizeUsPerToken: 100, ScheduleUsPerSeq: 1000, ChunkUs: 500}
	traces, err := RunClosedLoop(context.Background(), EngineConfig{FrontEnd: fe}, fixedCost(10*ms, 1<<20),
		ClosedLoop{Users: 2, Requests: 2, PromptTokens: 10, MaxTokens: 2, Starts: []time.Duration{0, 0}})
	if err != nil {
		t.Fatal(err)
	}
	// A is the engine's at 3 + 1 = 4 ms, B at max(3, 4) + 1 = 5 ms. Step
	// 4–15 ms (10 + 1 scheduling) prefills A alone; its chunk is out at
	// 15.5. Step 15–27 (two sequences) decodes A and prefills B; the two
	// chunks are out at 27 + 2 × 0.5 = 28. Step 27–38 decodes B: 38.5.
	want := map[uint64][]time.Duration{0: {15500 * time.Microsecond, 28 * ms}, 1: {28 * ms, 38500 * time.Microsecond}}
	for _, tr := range traces {
		if !reflect.DeepEqual(tr.ChunkAt, want[tr.ID]) {
			t.Errorf("request %d: chunks at %v, want %v", tr.ID, tr.ChunkAt, want[tr.ID])
		}
	}
}

// TestFrontEndMissesTheStep: a closed-loop user's next request, 3 ms in
// the front end, reaches the engine after the step it would have joined
// has begun, and waits for it: TTFT 3 + 7 (the rest of that step) + 10
// (its prefill) = 20 ms, where the engine alone gives 10.
func TestFrontEndMissesTheStep(t *testing.T) {
	load := ClosedLoop{Users: 2, Requests: 3, PromptTokens: 10, MaxTokens: 2, Starts: []time.Duration{0, 5 * ms}}
	for _, c := range []struct {
		fe   FrontEnd
		want [][]time.Duration
	}{
		// A (0 → 3 ms) prefills 3–13, decodes 13–23 beside B's prefill
		// (B: 5 → 8 ms); A's next request (23 → 26 ms) waits for B's
		// decode 23–33 and prefills 33–43.
		{FrontEnd{RequestMs: 3}, [][]time.Duration{{13 * ms, 23 * ms}, {23 * ms, 33 * ms}, {43 * ms, 53 * ms}}},
		// Alone: A 0–10, 10–20 with B's prefill; A's next joins B's decode 20–30.
		{FrontEnd{}, [][]time.Duration{{10 * ms, 20 * ms}, {20 * ms, 30 * ms}, {30 * ms, 40 * ms}}},
	} {
		traces, err := RunClosedLoop(context.Background(), EngineConfig{FrontEnd: c.fe}, fixedCost(10*ms, 1<<20), load)
		if err != nil {
			t.Fatal(err)
		}
		for i, tr := range traces {
			if !reflect.DeepEqual(tr.ChunkAt, c.want[i]) {
				t.Errorf("front end %+v, request %d (arrived %v): chunks at %v, want %v", c.fe, tr.ID, tr.Arrival, tr.ChunkAt, c.want[i])
			}
		}
	}
}

func TestFrontEndValidate(t *testing.T) {
	if err := VLLMFrontEnd.Validate(); err != nil {
		t.Errorf("VLLMFrontEnd: %v", err)
	}
	if _, err := NewEngine(EngineConfig{FrontEnd: FrontEnd{ChunkUs: -1}}, fixedCost(ms, 100)); err == nil {
		t.Error("a negative chunk cost was accepted")
	}
}

// TestFrontEndOutputBackPressure: ten sequences decode in 1 ms steps but
// their ten chunks take the output worker 10 ms a step. Delivery overlaps
// only the next step, so a step starts once the step before the last is
// written out: the engine runs at the worker's pace, each step's chunks
// out 19 ms after it ends, instead of stepping on while ever more chunks
// queue.
func TestFrontEndOutputBackPressure(t *testing.T) {
	e := mustEngine(t, EngineConfig{FrontEnd: FrontEnd{ChunkUs: 1000}}, fixedCost(ms, 1<<20))
	for id := range uint64(10) {
		if err := e.Submit(Request{ID: id, PromptTokens: 1, MaxTokens: 6}); err != nil {
			t.Fatal(err)
		}
	}
	_, _, steps := runAll(t, e)
	if len(steps) != 6 {
		t.Fatalf("%d steps, want 6", len(steps))
	}
	// Steps 0–1 and 1–2 (delivered 11 and 21); then step n starts when
	// step n−2 is delivered: 11–12 (31), 21–22 (41), 31–32 (51), 41–42 (61).
	starts := []time.Duration{0, 1 * ms, 11 * ms, 21 * ms, 31 * ms, 41 * ms}
	for i, st := range steps {
		want := StepResult{Start: starts[i], End: starts[i] + ms, Delivered: time.Duration(11+10*i) * ms}
		if st.Start != want.Start || st.End != want.End || st.Delivered != want.Delivered {
			t.Errorf("step %d: %v–%v delivered %v, want %v–%v delivered %v",
				i, st.Start, st.End, st.Delivered, want.Start, want.End, want.Delivered)
		}
	}
}
