package report

import (
	"bytes"
	"encoding/csv"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tokbench/tokbench/metrics"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// record makes a completed request whose first token arrives at ttft ms and
// whose n tokens then arrive one per gap ms: decode TPS is exactly 1000/gap.
func record(id, level int, ttft, gap float64, n int) metrics.Record {
	r := metrics.Record{ID: id, Level: level, OK: true, TTFTMs: ttft, TTFVTMs: ttft,
		InputTokens: 64, OutputTokens: n, OutputTokensRequested: n, TokenSource: metrics.SourceUsage,
		Start: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), OffsetMs: float64(id) * 10}
	for i := range n {
		r.ChunkMs = append(r.ChunkMs, ttft+float64(i)*gap)
		r.ChunkTokens = append(r.ChunkTokens, 1)
	}
	r.E2EMs = r.ChunkMs[n-1]
	r.DoneMs = r.E2EMs + 1
	return r
}

// fixture is two levels with known numbers: at c=1 TTFT 100..400 ms (p50
// 250) and decode 100 tok/s (10 ms gaps); at c=4 TTFT 1000 ms, decode 50
// tok/s, and one HTTP 429.
func fixture() (metrics.Summary, []metrics.Record) {
	var l0, l1 []metrics.Record
	for i, ttft := range []float64{100, 200, 300, 400} {
		l0 = append(l0, record(i, 0, ttft, 10, 11))
	}
	for i := range 3 {
		l1 = append(l1, record(4+i, 1, 1000, 20, 11))
	}
	l1 = append(l1, metrics.Record{ID: 7, Level: 1, ErrorClass: "http_429", HTTPStatus: 429, DoneMs: 3})
	s := metrics.Summary{
		Schema: metrics.Schema,
		Target: metrics.Target{URL: "http://127.0.0.1:8000/v1", API: "openai-chat", Model: "llama-3.1-8b", Simulated: true},
		Levels: []metrics.Level{
			metrics.Summarize(metrics.Load{Mode: "concurrency", Concurrency: 1}, l0, 2),
			metrics.Summarize(metrics.Load{Mode: "concurrency", Concurrency: 4}, l1, 1.5),
		},
	}
	return s, append(l0, l1...)
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./report -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func TestMarkdownGolden(t *testing.T) {
	s, _ := fixture()
	var b bytes.Buffer
	if err := Markdown(&b, s); err != nil {
		t.Fatal(err)
	}
	golden(t, "summary.md", b.Bytes())
}

func TestCSVGolden(t *testing.T) {
	s, recs := fixture()
	var b bytes.Buffer
	if err := CSV(&b, s); err != nil {
		t.Fatal(err)
	}
	golden(t, "summary.csv", b.Bytes())
	b.Reset()
	if err := RequestsCSV(&b, recs); err != nil {
		t.Fatal(err)
	}
	golden(t, "requests.csv", b.Bytes())
}

// csvCell reads the cell of column col in data row row (0-based).
func csvCell(t *testing.T, data []byte, row int, col string) string {
	t.Helper()
	rows, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range rows[0] {
		if name == col {
			return rows[row+1][i]
		}
	}
	t.Fatalf("no column %q in %v", col, rows[0])
	return ""
}

func TestCSVNumbers(t *testing.T) {
	s, recs := fixture()
	var b bytes.Buffer
	if err := CSV(&b, s); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		row       int
		col, want string
	}{
		{0, "load", "c=1"}, {0, "concurrency", "1"}, {0, "rate_rps", ""},
		{0, "sent", "4"}, {0, "completed", "4"}, {0, "failed", "0"},
		{0, "ttft_p50_ms", "250"}, {0, "ttft_p95_ms", "385"}, {0, "decode_tps_p50", "100"},
		{0, "output_tps", "22"}, // 44 tokens / 2 s
		{1, "concurrency", "4"}, {1, "sent", "4"}, {1, "completed", "3"}, {1, "failed", "1"},
		{1, "error_rate", "0.25"}, {1, "decode_tps_p5", "50"}, {1, "tpot_p50_ms", "20"}, {1, "ttft_p99_ms", "1000"},
	} {
		if got := csvCell(t, b.Bytes(), c.row, c.col); got != c.want {
			t.Errorf("CSV row %d %s = %q, want %q", c.row, c.col, got, c.want)
		}
	}
	b.Reset()
	if err := RequestsCSV(&b, recs); err != nil {
		t.Fatal(err)
	}
	if got := csvCell(t, b.Bytes(), 2, "ttft_ms"); got != "300" {
		t.Errorf("requests row 2 ttft_ms = %q, want 300", got)
	}
	if got := csvCell(t, b.Bytes(), 4, "decode_tps"); got != "50" {
		t.Errorf("requests row 4 decode_tps = %q, want 50", got)
	}
	// The failed request defines no latency: empty cells, not zeros.
	for _, col := range []string{"ttft_ms", "decode_tps", "e2e_ms"} {
		if got := csvCell(t, b.Bytes(), 7, col); got != "" {
			t.Errorf("failed request %s = %q, want empty", col, got)
		}
	}
	if got := csvCell(t, b.Bytes(), 7, "http_status"); got != strconv.Itoa(429) {
		t.Errorf("failed request http_status = %q", got)
	}
}

// TestTableShowsTTFTFromSchedule: with an open-loop level, the table leads
// with TTFT from the scheduled send, then TTFT from the actual send; a
// closed loop has no such figure ("-"), and a run of closed loops no such
// column.
func TestTableShowsTTFTFromSchedule(t *testing.T) {
	open := metrics.Level{Load: metrics.Load{Mode: metrics.ModeRate, RateRPS: 5, Arrival: metrics.ArrivalPoisson},
		TTFT:      metrics.Stats{Count: 10, P50: 90, P95: 700.9, P99: 750},
		TTFTSched: &metrics.Stats{Count: 10, P50: 300, P95: 1816, P99: 1900}}
	closed := metrics.Level{Load: metrics.Load{Mode: metrics.ModeConcurrency, Concurrency: 4},
		TTFT: metrics.Stats{Count: 10, P50: 20, P95: 25, P99: 26}}
	var b strings.Builder
	if err := Table(&b, metrics.Summary{Levels: []metrics.Level{open, closed}}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	var head, rate, conc string
	for _, l := range lines {
		switch {
		case head == "" && strings.Contains(l, "load") && strings.Contains(l, "fail"):
			head = l
		case rate == "" && strings.Contains(l, "req/s poisson"):
			rate = l
		case conc == "" && strings.Contains(l, "c=4"):
			conc = l
		}
	}
	// Led by the schedule's figures, then the send's.
	if !strings.Contains(head, "TTFT from schedule p50") || !strings.Contains(head, "from send p50") ||
		!strings.Contains(rate, "300.0") || strings.Index(rate, "1816") > strings.Index(rate, "700.9") ||
		!strings.Contains(rate, "1900") || !strings.Contains(conc, " - ") {
		t.Errorf("table:\n%s", b.String())
	}
	b.Reset()
	if err := Table(&b, metrics.Summary{Levels: []metrics.Level{closed}}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "from schedule") {
		t.Errorf("a closed-loop run shows a schedule column:\n%s", b.String())
	}
}
