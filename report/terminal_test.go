package report

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tokbench/tokbench/metrics"
)

func TestBar(t *testing.T) {
	for _, c := range []struct {
		v, top float64
		cells  int
		want   string
	}{
		{100, 100, 4, "████"},
		{50, 100, 4, "██  "},
		{1, 8, 1, "▏"},   // one eighth of one cell
		{3, 16, 2, "▍ "}, // 3/16 of 2 cells = 3 eighths
		{11, 16, 2, "█▍"},
		{0, 100, 3, "   "},
		{0.001, 100, 3, "▏  "}, // above zero shows
		{200, 100, 2, "██"},    // clamped at the top
		{5, 0, 2, "  "},
	} {
		if got := bar(c.v, c.top, c.cells); got != c.want {
			t.Errorf("bar(%g, %g, %d) = %q, want %q", c.v, c.top, c.cells, got, c.want)
		}
	}
}

// threeLevels is fixture() plus c=8 with TTFT 100, 200, … 900 ms (9
// requests: the most) and 5 tokens 10 ms apart (decode 100 tok/s) in 1 s.
func threeLevels() (metrics.Summary, []metrics.Record) {
	s, recs := fixture()
	var l2 []metrics.Record
	for i := range 9 {
		l2 = append(l2, record(10+i, 2, 100*float64(i+1), 10, 5))
	}
	s.Levels = append(s.Levels, metrics.Summarize(metrics.Load{Mode: "concurrency", Concurrency: 8}, l2, 1))
	return s, append(recs, l2...)
}

func TestTerminalChartsGolden(t *testing.T) {
	s, recs := threeLevels()
	s.Levels[0].Physics = &metrics.Physics{DecodeTPSCeiling: 240, Deployment: "llama-3.1-8b bf16 on 1× h100-sxm"}
	s.Levels[1].OutputTPS = 66 // as if c=4 had lasted 0.5 s: bars of 1/3 and 3/3
	var b bytes.Buffer
	if err := TerminalCharts(&b, s, recs, 80); err != nil {
		t.Fatal(err)
	}
	golden(t, "terminal.txt", b.Bytes())
	for i, line := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
		if n := utf8.RuneCountInString(line); n > 80 {
			t.Errorf("line %d is %d columns, want at most 80: %q", i, n, line)
		}
	}
}

// TestTerminalChartsWideNumbers: a figure wider than the column's six
// characters (a decode rate of millions of tokens/s, as chunks a starved
// client reads together give) widens the column; the rows stay within
// the width.
func TestTerminalChartsWideNumbers(t *testing.T) {
	s, recs := threeLevels()
	s.Levels[1].DecodeTPS.P50 = 2_345_678
	s.Levels[2].OutputTPS = 12_345_678
	var b bytes.Buffer
	if err := TerminalCharts(&b, s, recs, 90); err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
		if n := utf8.RuneCountInString(line); n > 90 {
			t.Errorf("line %d is %d columns, want at most 90: %q", i, n, line)
		}
	}
	if !strings.Contains(b.String(), "2345678") || !strings.Contains(b.String(), "12345678") {
		t.Errorf("the wide figures are not shown whole:\n%s", b.String())
	}
}

func TestTerminalChartsNumbers(t *testing.T) {
	s, recs := threeLevels()
	var b bytes.Buffer
	if err := TerminalCharts(&b, s, recs, 100); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	lines := strings.Split(out, "\n")
	// Output TPS: 22, 22 and 45 tok/s; the highest fills its column, 22 is
	// 22/45 of it. Decode p50: 100, 50, 100.
	row := func(prefix string) string {
		for _, l := range lines {
			if strings.HasPrefix(strings.TrimLeft(l, " "), prefix) {
				return l
			}
		}
		t.Fatalf("no row %q in:\n%s", prefix, out)
		return ""
	}
	c8, c4 := row("c=8"), row("c=4")
	full := strings.Count(c8, "█")
	if !strings.Contains(c8, "45.00") || !strings.Contains(c8, "100.0") {
		t.Errorf("c=8 row lacks its values: %q", c8)
	}
	// c=4: output 22/45 of the cells, decode exactly half of them.
	cells := (100 - 4 - 2 - 2*7 - 3) / 2
	if full != 2*cells {
		t.Errorf("c=8 row has %d full blocks, want %d (both bars full)", full, 2*cells)
	}
	if got, want := strings.Count(c4, "█"), int(22.0/45*float64(cells*8))/8+cells/2; got != want {
		t.Errorf("c=4 row has %d full blocks, want %d: %q", got, want, c4)
	}
	// TTFT histogram of c=8: 9 values in 3 bins of 266.7 ms, 3 each.
	if !strings.Contains(out, "TTFT at c=8 (9 requests)") {
		t.Errorf("histogram title missing:\n%s", out)
	}
	for _, want := range []string{"100.0–366.7 ms", "366.7–633.3 ms", "633.3–900.0 ms"} {
		l := row(want)
		if !strings.HasSuffix(l, " 3") {
			t.Errorf("bin %s: %q, want a count of 3", want, l)
		}
	}
	// Without records: the curve only; with one level and no records: nothing.
	b.Reset()
	if err := TerminalCharts(&b, s, nil, 80); err != nil || strings.Contains(b.String(), "TTFT") || !strings.Contains(b.String(), "c=8") {
		t.Errorf("no records: %v\n%s", err, b.String())
	}
	b.Reset()
	s.Levels = s.Levels[:1]
	if err := TerminalCharts(&b, s, nil, 80); err != nil || b.Len() != 0 {
		t.Errorf("one level, no records: %v, %q, want nothing", err, b.String())
	}
}
