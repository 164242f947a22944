package report

import (
	"encoding/csv"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/tokbench/tokbench/metrics"
)

// LevelColumns are the column names of CSV, in order. They are a contract:
// spreadsheets and scripts refer to them by name. Times are milliseconds,
// rates per second; a percentile with no samples is an empty cell.
var LevelColumns = []string{
	"load", "concurrency", "rate_rps", "arrival",
	"sent", "completed", "failed", "error_rate", "duration_s",
	"input_tokens", "output_tokens", "token_source",
	"output_tps", "steady_output_tps", "request_rps", "goodput_rps",
	"ttft_p50_ms", "ttft_p95_ms", "ttft_p99_ms", "ttft_mean_ms",
	"decode_tps_p50", "decode_tps_p5", "decode_tps_mean",
	"tpot_p50_ms", "tpot_p95_ms",
	"itl_p50_ms", "itl_p99_ms",
	"e2e_p50_ms", "e2e_p95_ms",
}

// CSV writes one row per level of s under a header of LevelColumns.
func CSV(w io.Writer, s metrics.Summary) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(LevelColumns); err != nil {
		return err
	}
	for _, lv := range s.Levels {
		row := []string{
			lv.Load.String(), itoaIf(lv.Load.Concurrency), fmtIf(lv.Load.RateRPS, lv.Load.Mode == metrics.ModeRate), string(lv.Load.Arrival),
			strconv.Itoa(lv.Requests.Sent), strconv.Itoa(lv.Requests.Completed), strconv.Itoa(lv.Requests.Failed),
			fmtF(lv.ErrorRate), fmtF(lv.DurationS),
			strconv.Itoa(lv.InputTokens), strconv.Itoa(lv.OutputTokens), lv.TokenSource,
			fmtF(lv.OutputTPS), fmtF(lv.SteadyOutputTPS), fmtF(lv.RequestRPS), fmtF(lv.GoodputRPS),
			stat(lv.TTFT, lv.TTFT.P50), stat(lv.TTFT, lv.TTFT.P95), stat(lv.TTFT, lv.TTFT.P99), stat(lv.TTFT, lv.TTFT.Mean),
			stat(lv.DecodeTPS, lv.DecodeTPS.P50), stat(lv.DecodeTPS, lv.DecodeTPS.P5), stat(lv.DecodeTPS, lv.DecodeTPS.Mean),
			stat(lv.TPOT, lv.TPOT.P50), stat(lv.TPOT, lv.TPOT.P95),
			stat(lv.ITL, lv.ITL.P50), stat(lv.ITL, lv.ITL.P99),
			stat(lv.E2E, lv.E2E.P50), stat(lv.E2E, lv.E2E.P95),
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

func stat(s metrics.Stats, v float64) string {
	return fmtIf(v, s.Count > 0)
}
