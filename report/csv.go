package report

import (
	"encoding/csv"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/tokbench/tokbench/metrics"
)

// LevelColumns is the column names of CSV, in order. They are a contract:
// spreadsheets and scripts refer to them by name. After the level's load,
// counts and tokens come the metrics of metrics.Registry, each statistic
// its Metric.CSV names, the aggregates first: times are milliseconds
// (named _ms), rates per second; a percentile with no samples is an empty
// cell.
func LevelColumns() []string {
	return append([]string{
		"load", "concurrency", "rate_rps", "arrival",
		"sent", "completed", "failed", "duration_s",
		"input_tokens", "output_tokens", "token_source",
	}, metricColumns()...)
}

// csvMetrics are the registry's metrics in CSV's order: the level
// aggregates, then the distributions; those only some levels have
// (embeddings, tool calls: Metric.Has) come after all the others, so the
// columns every run has keep their places.
func csvMetrics() []metrics.Metric {
	var agg, dist, some []metrics.Metric
	for _, m := range metrics.Registry {
		switch {
		case m.Has != nil:
			some = append(some, m)
		case m.Aggregate():
			agg = append(agg, m)
		default:
			dist = append(dist, m)
		}
	}
	return append(append(agg, dist...), some...)
}

func metricColumns() []string {
	var out []string
	for _, m := range csvMetrics() {
		for _, stat := range m.CSV {
			name := m.StatName(stat)
			if m.Unit == "ms" {
				name += "_ms"
			}
			out = append(out, name)
		}
	}
	return out
}

// CSV writes one row per level of s under a header of LevelColumns.
func CSV(w io.Writer, s metrics.Summary) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(LevelColumns()); err != nil {
		return err
	}
	for i := range s.Levels {
		lv := &s.Levels[i]
		row := []string{
			lv.Load.String(), itoaIf(lv.Load.Concurrency), fmtIf(lv.Load.RateRPS, lv.Load.Mode == metrics.ModeRate), string(lv.Load.Arrival),
			strconv.Itoa(lv.Requests.Sent), strconv.Itoa(lv.Requests.Completed), strconv.Itoa(lv.Requests.Failed), fmtF(lv.DurationS),
			strconv.Itoa(lv.InputTokens), strconv.Itoa(lv.OutputTokens), lv.TokenSource,
		}
		for _, m := range csvMetrics() {
			for _, stat := range m.CSV {
				row = append(row, fmtIf(m.Of(lv, stat)))
			}
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// RequestColumns are the column names of RequestsCSV, in order.
var RequestColumns = []string{
	"id", "level", "start", "offset_ms", "ok", "error_class", "http_status", "finish_reason",
	"ttft_ms", "ttfvt_ms", "e2e_ms", "done_ms", "queue_ms",
	"input_tokens", "output_tokens", "reasoning_tokens", "token_source",
	"chunks", "decode_tps", "tpot_ms", "e2e_tps",
}

// RequestsCSV writes one row per request record. Measurements that a failed
// or too-short request does not define (decode TPS of a one-token answer)
// are empty cells, never zeros.
func RequestsCSV(w io.Writer, recs []metrics.Record) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(RequestColumns); err != nil {
		return err
	}
	for i := range recs {
		r := &recs[i]
		dtps, okD := r.DecodeTPS()
		tpot, okT := r.TPOTMs()
		etps, okE := r.E2ETPS()
		start := ""
		if !r.Start.IsZero() {
			start = r.Start.UTC().Format(time.RFC3339Nano)
		}
		row := []string{
			strconv.Itoa(r.ID), strconv.Itoa(r.Level), start, fmtF(r.OffsetMs),
			strconv.FormatBool(r.OK), r.ErrorClass, itoaIf(r.HTTPStatus), r.FinishReason,
			fmtIf(r.TTFTMs, r.OK), fmtIf(r.TTFVTMs, r.OK && r.TTFVTMs > 0), fmtIf(r.E2EMs, r.OK), fmtF(r.DoneMs), fmtF(r.QueueMs),
			strconv.Itoa(r.InputTokens), strconv.Itoa(r.OutputTokens), strconv.Itoa(r.ReasoningTokens), r.TokenSource,
			strconv.Itoa(len(r.ChunkMs)), fmtIf(dtps, okD), fmtIf(tpot, okT), fmtIf(etps, okE),
		}
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// fmtF rounds to 4 decimals (0.1 µs for milliseconds) and prints the
// fewest digits that read back as that value, so files stay readable.
func fmtF(v float64) string {
	return strconv.FormatFloat(math.Round(v*1e4)/1e4, 'f', -1, 64)
}

func fmtIf(v float64, ok bool) string {
	if !ok {
		return ""
	}
	return fmtF(v)
}

func itoaIf(v int) string {
	if v == 0 {
		return ""
	}
	return strconv.Itoa(v)
}
