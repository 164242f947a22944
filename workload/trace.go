package workload

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tokbench/tokbench/api"
)

// Trace formats (ReadTrace).
const (
	TraceMooncake = "mooncake" // JSONL: timestamp (ms), input_length, output_length, hash_ids
	TraceAzure    = "azure"    // CSV: TIMESTAMP, ContextTokens, GeneratedTokens
	TraceJSONL    = "jsonl"    // JSONL: t (s), input_tokens, output_tokens, prompt/messages, session
)

// MooncakeBlock is the tokens one Mooncake hash id stands for.
const MooncakeBlock = 512

// TraceRequest is one request of a production trace: when it was sent
// (from the trace's first request), its lengths, and what its prompt
// shares with others: Mooncake's hash ids (requests with a hash id in
// common share that block of their prompts) or a session (its requests
// start alike), or the prompt itself.
type TraceRequest struct {
	At                        time.Duration
	InputTokens, OutputTokens int
	HashIDs                   []int64
	Session                   string
	Prompt                    string
	Messages                  []api.Message
	Line                      int // in the trace file
}

// Trace is a production trace, its requests in send order.
type Trace struct {
	Path, Format string
	// Kept is the part of the file kept, as the caller asked for it
	// ("600:1200"), for the record; empty: all of it.
	Kept     string
	Requests []TraceRequest
	// Notes say what reading changed: requests whose timestamps went back
	// in time, put in time order.
	Notes []string
}

// Span is the trace's length: its last request's instant.
func (t *Trace) Span() time.Duration {
	if len(t.Requests) == 0 {
		return 0
	}
	return t.Requests[len(t.Requests)-1].At
}

// Window is the part of the trace sent in [from, to) (to 0: to the end),
// its instants from the window's start.
func (t *Trace) Window(from, to time.Duration) *Trace {
	out := &Trace{Path: t.Path, Format: t.Format, Notes: t.Notes}
	for _, r := range t.Requests {
		if r.At < from || to > 0 && r.At >= to {
			continue
		}
		r.At -= from
		out.Requests = append(out.Requests, r)
	}
	return out
}

// Offsets are the send instants at speed times the trace's pace (2: twice
// as fast, 0.5: half).
func (t *Trace) Offsets(speed float64) []time.Duration {
	out := make([]time.Duration, len(t.Requests))
	for i, r := range t.Requests {
		out[i] = time.Duration(math.Round(float64(r.At) / speed))
	}
	return out
}

// DetectTraceFormat names a trace file's format: .csv is Azure's; a JSONL
// file's first object with input_length is Mooncake's, else tokbench's.
func DetectTraceFormat(path string) (string, error) {
	if strings.HasSuffix(strings.ToLower(path), ".csv") {
		return TraceAzure, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	br := bufio.NewReader(f)
	for {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			var keys map[string]json.RawMessage
			if json.Unmarshal(line, &keys) != nil {
				return "", fmt.Errorf("%s:1: want a JSON object per line or a .csv file", path)
			}
			if _, ok := keys["input_length"]; ok {
				return TraceMooncake, nil
			}
			return TraceJSONL, nil
		}
		if err != nil {
			return "", fmt.Errorf("%s: no request in the trace", path)
		}
	}
}

// ReadTrace reads a trace in format ("" detects it). A bad line is a
// *RowError naming the file, line and field. Requests are put in send
// order (a stable sort: equal instants keep the file's order; Notes say
// when the file was not in it), and the first is sent at 0.
func ReadTrace(path, format string) (*Trace, error) {
	if format == "" {
		var err error
		if format, err = DetectTraceFormat(path); err != nil {
			return nil, err
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	t := &Trace{Path: path, Format: format}
	switch format {
	case TraceMooncake, TraceJSONL:
		err = readTraceJSONL(f, path, format, t)
	case TraceAzure:
		err = readAzure(f, path, t)
	default:
		return nil, fmt.Errorf("unknown trace format %q (known: mooncake, azure, jsonl)", format)
	}
	if err != nil {
		return nil, err
	}
	if len(t.Requests) == 0 {
		return nil, fmt.Errorf("%s: no request in the trace", path)
	}
	// A request stamped before the one above it is sent in time order,
	// and the trace says so: its file was not in the order it ran.
	back, at := 0, -1
	for i := 1; i < len(t.Requests); i++ {
		if t.Requests[i].At < t.Requests[i-1].At {
			if back++; at < 0 {
				at = i
			}
		}
	}
	if back > 0 {
		r, prev := t.Requests[at], t.Requests[at-1]
		t.Notes = append(t.Notes, fmt.Sprintf("trace %s: %d of %d requests are stamped before the one above them (the first at line %d, %s before line %d's); they are sent in time order",
			path, back, len(t.Requests), r.Line, prev.At-r.At, prev.Line))
	}
	slices.SortStableFunc(t.Requests, func(a, b TraceRequest) int { return int(a.At - b.At) })
	first := t.Requests[0].At
	for i := range t.Requests {
		t.Requests[i].At -= first
	}
	return t, nil
}

// traceLine is a JSONL trace line of either format.
type traceLine struct {
	// Mooncake
	Timestamp    *float64 `json:"timestamp"`
	InputLength  *int     `json:"input_length"`
	OutputLength *int     `json:"output_length"`
	HashIDs      []int64  `json:"hash_ids"`
	// tokbench's
	T            *float64        `json:"t"`
	InputTokens  *int            `json:"input_tokens"`
	OutputTokens *int            `json:"output_tokens"`
	Prompt       string          `json:"prompt"`
	Messages     []api.Message   `json:"messages"`
	Session      json.RawMessage `json:"session"`
}

func readTraceJSONL(r io.Reader, path, format string, t *Trace) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for line := 1; ; line++ {
		b, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(b)) > 0 {
			req, perr := parseTraceLine(b, path, format, line)
			if perr != nil {
				return perr
			}
			t.Requests = append(t.Requests, req)
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read trace %s: %w", path, err)
		}
	}
}

func parseTraceLine(b []byte, path, format string, line int) (TraceRequest, error) {
	bad := func(field, msg string, args ...any) (TraceRequest, error) {
		return TraceRequest{}, &RowError{File: path, Line: line, Field: field, Msg: fmt.Sprintf(msg, args...)}
	}
	var l traceLine
	if err := json.Unmarshal(b, &l); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) && ute.Field != "" {
			return bad(ute.Field, "want a %s, got a JSON %s", ute.Type, ute.Value)
		}
		return bad("", "invalid JSON: %v", err)
	}
	req := TraceRequest{Line: line}
	at, in, out := l.T, l.InputTokens, l.OutputTokens
	atName, inName, outName := "t", "input_tokens", "output_tokens"
	scale := float64(time.Second)
	if format == TraceMooncake {
		at, in, out = l.Timestamp, l.InputLength, l.OutputLength
		atName, inName, outName = "timestamp", "input_length", "output_length"
		scale = float64(time.Millisecond)
	}
	switch {
	case at == nil:
		return bad(atName, "missing")
	case *at < 0 || math.IsNaN(*at) || math.IsInf(*at, 0) || *at*scale > math.MaxInt64/2:
		return bad(atName, "want an instant ≥ 0, got %g", *at)
	case out == nil:
		return bad(outName, "missing")
	case *out < 1:
		return bad(outName, "want a whole number ≥ 1, got %d", *out)
	}
	req.At, req.OutputTokens = time.Duration(*at*scale), *out
	switch {
	case len(l.Messages) > 0:
		for i, m := range l.Messages {
			if m.Role == "" {
				return bad(fmt.Sprintf("messages[%d].role", i), "missing")
			}
		}
		req.Messages = l.Messages
	case l.Prompt != "":
		req.Prompt = l.Prompt
	case in == nil:
		return bad(inName, "missing (or give prompt or messages)")
	}
	if in != nil {
		if *in < 1 {
			return bad(inName, "want a whole number ≥ 1, got %d", *in)
		}
		req.InputTokens = *in
	}
	if format == TraceMooncake {
		if len(l.HashIDs) > 0 && req.InputTokens > MooncakeBlock*len(l.HashIDs) {
			return bad("hash_ids", "%d blocks of %d tokens hold fewer than input_length %d", len(l.HashIDs), MooncakeBlock, req.InputTokens)
		}
		req.HashIDs = l.HashIDs
	}
	if len(l.Session) > 0 && string(l.Session) != "null" {
		var s any
		_ = json.Unmarshal(l.Session, &s)
		switch v := s.(type) {
		case string:
			req.Session = v
		case float64:
			req.Session = strconv.FormatFloat(v, 'f', -1, 64)
		default:
			return bad("session", "want a string or a number")
		}
	}
	return req, nil
}

// azureTime is the Azure trace's TIMESTAMP layout (fractions of any
// length).
const azureTime = "2006-01-02 15:04:05.999999999"

func readAzure(r io.Reader, path string, t *Trace) error {
	cr := csv.NewReader(r)
	cr.ReuseRecord = true
	head, err := cr.Read()
	if err != nil {
		return fmt.Errorf("%s:1: want a CSV header (TIMESTAMP,ContextTokens,GeneratedTokens): %v", path, err)
	}
	col := map[string]int{}
	for i, h := range head {
		col[strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))] = i
	}
	for _, want := range []string{"TIMESTAMP", "ContextTokens", "GeneratedTokens"} {
		if _, ok := col[want]; !ok {
			return &RowError{File: path, Line: 1, Field: want, Msg: "missing from the header"}
		}
	}
	var first time.Time
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s:%d: %v", path, line, err)
		}
		bad := func(field, msg string, args ...any) error {
			return &RowError{File: path, Line: line, Field: field, Msg: fmt.Sprintf(msg, args...)}
		}
		ts, err := time.Parse(azureTime, strings.TrimSpace(rec[col["TIMESTAMP"]]))
		if err != nil {
			return bad("TIMESTAMP", "want YYYY-MM-DD hh:mm:ss.fffffff, got %q", rec[col["TIMESTAMP"]])
		}
		in, err1 := strconv.Atoi(strings.TrimSpace(rec[col["ContextTokens"]]))
		out, err2 := strconv.Atoi(strings.TrimSpace(rec[col["GeneratedTokens"]]))
		switch {
		case err1 != nil || in < 1:
			return bad("ContextTokens", "want a whole number ≥ 1, got %q", rec[col["ContextTokens"]])
		case err2 != nil || out < 1:
			return bad("GeneratedTokens", "want a whole number ≥ 1, got %q", rec[col["GeneratedTokens"]])
		}
		if first.IsZero() {
			first = ts // an origin; ReadTrace makes the earliest 0
		}
		t.Requests = append(t.Requests, TraceRequest{At: ts.Sub(first), InputTokens: in, OutputTokens: out, Line: line})
	}
}
