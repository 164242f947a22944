package report

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

// TestWriteCompareHTML: the runs' curves on the loads either measured,
// each run's points with its values, the verdicts colored, the warnings
// escaped, and nothing loaded from elsewhere.
func TestWriteCompareHTML(t *testing.T) {
	a, _ := fixture()
	b, _ := fixture()
	b.Levels = b.Levels[:1] // B measured c=1 only
	b.Levels[0].DecodeTPS.P50 = 80
	var out bytes.Buffer
	rows := []VerdictTable{{Title: "B against A", Rows: [][]string{
		VerdictRow("c=1", "decode_tps_p50", 100, 80, -0.2, "worse"),
		VerdictRow("c=1", "ttft_p50", 250, 250, 0, "~"),
	}}}
	if err := WriteCompareHTML(&out, []CompareRun{{Name: "A", Summary: a}, {Name: "B", Summary: b}}, rows, []string{"<hardware> differs"}); err != nil {
		t.Fatal(err)
	}
	html := out.String()
	for _, want := range []string{
		"<title>c=1 A decode p50: 100.0 tok/s</title>", "<title>c=4 A decode p50: 50.00 tok/s</title>",
		"<title>c=1 B decode p50: 80.00 tok/s</title>",
		`<td class="worse">worse</td>`, "<td class=\"n\">-20.0%</td>", "&lt;hardware&gt; differs", "<h2>B against A</h2>",
	} {
		if !strings.Contains(html, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(html, "c=4 B decode") || strings.Count(html, "<svg") != 3 || strings.Contains(html, "<script") {
		t.Errorf("a level B did not measure is drawn, or the page has %d charts or a script", strings.Count(html, "<svg"))
	}
	if pct(math.NaN()) != "" {
		t.Error("an undefined change printed")
	}
}
