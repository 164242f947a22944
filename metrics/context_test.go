package metrics

import (
	"strings"
	"testing"
)

func TestKneeOnlyWhereLoadVaries(t *testing.T) {
	lv := func(c, in int, out, dec, ttft float64) Level {
		return Level{Load: Load{Mode: ModeConcurrency, Concurrency: c, InputTokens: in}, Requests: Requests{Completed: 10},
			OutputTPS: out, DecodeTPS: Stats{Count: 10, P50: dec}, TTFT: Stats{Count: 10, P50: ttft}}
	}
	// A context sweep at one load: no knee, a context effect.
	sweep := []Level{lv(4, 1024, 400, 100, 50), lv(4, 8192, 320, 80, 300), lv(4, 32768, 200, 50, 1500)}
	if k := FindKnee(sweep); k != nil {
		t.Fatalf("a knee for a context sweep at c=4: %+v", k)
	}
	c := FindContextEffect(sweep)
	if c == nil || len(c.Points) != 3 || c.Load.InputTokens != 0 {
		t.Fatalf("context effect %+v", c)
	}
	if want := "context at c=4: from 1024 to 32768 input tokens decode p50 goes from 100.0 to 50.0 tok/s (-50%) and TTFT p50 from 50 to 1500 ms"; c.Statement != want {
		t.Errorf("statement %q\nwant      %q", c.Statement, want)
	}
	// Loads × lengths: the knee over the first length's loads, the context
	// effect at the first load.
	grid := []Level{lv(1, 1024, 100, 100, 50), lv(4, 1024, 360, 90, 60), lv(16, 1024, 400, 25, 90),
		lv(1, 8192, 80, 80, 300), lv(4, 8192, 280, 70, 350), lv(16, 8192, 300, 19, 500)}
	k := FindKnee(grid)
	if k == nil || !k.Reached || k.Value != 4 {
		t.Fatalf("knee %+v, want one at c=4 of the 1024-token levels", k)
	}
	if c := FindContextEffect(grid); c == nil || !strings.HasPrefix(c.Statement, "context at c=1: from 1024 to 8192") {
		t.Fatalf("context effect %+v", c)
	}
	if FindContextEffect(grid[:3]) != nil {
		t.Fatal("a context effect without a second input length")
	}
}
