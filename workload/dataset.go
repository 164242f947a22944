package workload

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/valyala/fastjson"

	"github.com/tokbench/tokbench/api"
	"github.com/tokbench/tokbench/tokenize"
)

// Dataset formats.
const (
	FormatAuto     = "auto"
	FormatJSONL    = "jsonl"    // {"prompt": …} or {"messages": […]} per line, optional "max_tokens"
	FormatShareGPT = "sharegpt" // [{"conversations": [{"from": "human", "value": …}, …]}, …]
	FormatText     = "text"     // a plain-text corpus prompts are cut from
)

// Row is one request from a dataset.
type Row struct {
	// Prompt or Messages carries the input; Messages wins when both are set.
	Prompt   string
	Messages []api.Message
	// MaxTokens is the row's own output length (0: none). For ShareGPT it
	// is left 0 and Reply, the recorded answer, sets it by its token count.
	MaxTokens int
	Reply     string
	// Turns are a ShareGPT conversation's later human turns, and
	// TurnReplies the recorded answer to each ("" where none followed):
	// a chat workload's turns 2, 3, … send them in turn.
	Turns, TurnReplies []string
	// Line is where the row starts in its file (1-based).
	Line int
	// Media go with the row's first turn; MediaRefs are the files and
	// data: URLs they are read from (OpenDataset reads those of the rows
	// it keeps).
	Media     []api.Media
	MediaRefs []MediaRef
}

// Text is the row's input as one string.
func (r Row) Text() string {
	if len(r.Messages) == 0 {
		return r.Prompt
	}
	return (&api.Request{Messages: r.Messages}).Prompt()
}

// RowError is a bad row: the file, the line it starts on and the field.
// Err, when set, is the condition it is an instance of (ErrBudget).
type RowError struct {
	File  string
	Line  int
	Field string
	Msg   string
	Err   error
}

func (e *RowError) Unwrap() error { return e.Err }

func (e *RowError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s:%d: field %q: %s", e.File, e.Line, e.Field, e.Msg)
}

// Bounds on one dataset row, by default: far beyond any model's context
// (16 MiB holds some 4 million tokens of text), and small enough that
// reading, checking and counting a row takes a second and a few times its
// size in memory.
const (
	DefaultRowBytes  = 16 << 20
	DefaultRowTokens = 4 << 20
)

// DefaultBudget bounds, by default, the text a dataset's rows hold
// together with the copies of it a level's requests make (Config.MaxBytes
// is what the rows leave of it): 1 GiB. The ShareGPT files benchmarks use
// (hundreds of MB of JSON) fit, and a dataset then takes about that much
// of the machine's memory, not all of it.
const DefaultBudget = 1 << 30

// ErrBudget is the condition (wrapped) of a dataset whose rows, or the
// requests a level makes of them, would hold more text than their budget.
var ErrBudget = errors.New("over the dataset's budget")

// Limits bound what one dataset row, and all of a dataset's rows, may
// cost. A row past them is refused with its file and line, before
// anything is sent, and reading stops there: a file of one 2 GB line is
// refused after reading 16 MiB of it, and one of many large rows once the
// rows kept hold Budget bytes of text. The zero value is the defaults.
type Limits struct {
	// Budget bounds the bytes of text (prompts, messages, replies and
	// later turns) the rows kept hold together (default DefaultBudget).
	Budget int64
	// RowBytes bounds a row's bytes in the file: a JSONL line, a ShareGPT
	// entry (default DefaultRowBytes).
	RowBytes int
	// RowTokens bounds the tokens of a row's prompt and of each later turn
	// (default DefaultRowTokens), counted with Tokenizer; nil counts none.
	RowTokens int
	Tokenizer tokenize.Tokenizer
}

func (l Limits) withDefaults() Limits {
	if l.RowBytes <= 0 {
		l.RowBytes = DefaultRowBytes
	}
	if l.RowTokens <= 0 {
		l.RowTokens = DefaultRowTokens
	}
	if l.Budget <= 0 {
		l.Budget = DefaultBudget
	}
	return l
}

// Bytes is the text a row holds: its prompt or messages, its reply, its
// later turns and their replies.
func (r Row) Bytes() int64 {
	n := len(r.Prompt) + len(r.Reply)
	for _, m := range r.Messages {
		n += len(m.Content)
	}
	for i := range r.Turns {
		n += len(r.Turns[i]) + len(r.TurnReplies[i])
	}
	for _, ref := range r.MediaRefs {
		n += len(ref.Ref)
	}
	return int64(n) + mediaBytes(r.Media)
}

// RowsBytes is the text rows hold together.
func RowsBytes(rows []Row) int64 {
	var n int64
	for _, r := range rows {
		n += r.Bytes()
	}
	return n
}

// overBudget is the row with which the rows kept came to hold held bytes,
// past Budget.
func (l Limits) overBudget(name string, line int, held int64) error {
	return &RowError{File: name, Line: line, Err: ErrBudget,
		Msg: fmt.Sprintf("with this row the rows kept hold %d bytes of text, more than the %d a dataset may hold (its budget)", held, l.Budget)}
}

// checkTokens refuses a row with a prompt or turn of more than RowTokens
// tokens. A token of a byte-level BPE is at least one byte, so only a text
// longer than RowTokens bytes is counted: the bound costs nothing for the
// rows of an ordinary dataset.
func (l Limits) checkTokens(name string, r Row) error {
	if l.Tokenizer == nil {
		return nil
	}
	texts := append([]string{r.Text()}, r.Turns...)
	for i, text := range texts {
		if len(text) <= l.RowTokens {
			continue
		}
		if n := l.Tokenizer.Count(text); n > l.RowTokens {
			what := "the prompt"
			if i > 0 {
				what = fmt.Sprintf("turn %d", i+1)
			}
			return &RowError{File: name, Line: r.Line, Msg: fmt.Sprintf("%s has %d tokens (%s), more than the %d a row may have",
				what, n, l.Tokenizer.Name(), l.RowTokens)}
		}
	}
	return nil
}

// tooBig is a row past RowBytes.
func (l Limits) tooBig(name string, line int) error {
	return &RowError{File: name, Line: line, Msg: fmt.Sprintf("the row is more than %d bytes, the most a row may hold", l.RowBytes)}
}

// DetectFormat names the format of a dataset file: .jsonl/.ndjson files are
// JSONL; otherwise the first non-blank byte decides ('[' ShareGPT, '{'
// JSONL, anything else plain text).
func DetectFormat(path string) (string, error) {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".jsonl", ".ndjson":
		return FormatJSONL, nil
	case ".txt", ".md":
		return FormatText, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	br := bufio.NewReader(f)
	for {
		b, err := br.ReadByte()
		if err != nil {
			return FormatText, nil
		}
		switch b {
		case ' ', '\t', '\r', '\n', 0xEF, 0xBB, 0xBF: // whitespace, UTF-8 BOM
			continue
		case '[':
			return FormatShareGPT, nil
		case '{':
			return FormatJSONL, nil
		}
		return FormatText, nil
	}
}

// Sample reads the rows of a JSONL or ShareGPT file and keeps k of them,
// chosen uniformly with the seed (reservoir sampling: the file is streamed,
// never held whole). Every row is checked, so a bad row anywhere is an
// error before anything is sent, and held to lim: the row with which the
// rows kept pass lim.Budget stops the reading, named by its line. Fewer
// than k rows are all kept. The rows come back in a seeded random order.
func Sample(path, format string, k int, seed uint64, lim Limits) ([]Row, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read dataset %s: %w", path, err)
	}
	defer f.Close()
	rows, err := sample(f, filepath.Base(path), format, k, seed, lim)
	switch {
	case errors.Is(err, errNoRows):
		return nil, fmt.Errorf("dataset %s: no rows", path)
	case errors.Is(err, errNotRows):
		return nil, fmt.Errorf("dataset %s: format %q has no rows", path, format)
	}
	return rows, err
}

var errNoRows, errNotRows = errors.New("no rows"), errors.New("not rows")

// sample is Sample of the dataset r, named name.
func sample(r io.Reader, name, format string, k int, seed uint64, lim Limits) ([]Row, error) {
	rng := rand.New(rand.NewPCG(seed, seed^0xda7a5e7))
	budget := lim.withDefaults()
	var kept []Row
	var held int64 // the text the rows kept hold
	seen := 0
	keep := func(r Row) error {
		seen++
		if len(kept) < k {
			kept = append(kept, r)
			held += r.Bytes()
		} else if j := rng.IntN(seen); j < k {
			held += r.Bytes() - kept[j].Bytes()
			kept[j] = r
		}
		if held > budget.Budget {
			return budget.overBudget(name, r.Line, held)
		}
		return nil
	}
	var err error
	switch format {
	case FormatJSONL:
		err = ReadJSONL(r, name, lim, keep)
	case FormatShareGPT:
		err = ReadShareGPT(r, name, lim, keep)
	default:
		return nil, errNotRows
	}
	if err != nil {
		return nil, err
	}
	if seen == 0 {
		return nil, errNoRows
	}
	// Only the kept rows are sent, so only they are counted; in the order
	// of the file, so the first long row is the one named.
	byLine := slices.SortedFunc(slices.Values(kept), func(a, b Row) int { return a.Line - b.Line })
	lim = lim.withDefaults()
	for _, r := range byLine {
		if err := lim.checkTokens(name, r); err != nil {
			return nil, err
		}
	}
	rng.Shuffle(len(kept), func(i, j int) { kept[i], kept[j] = kept[j], kept[i] })
	return kept, nil
}

// ReadJSONL calls fn with every row of a JSONL stream, in order. Blank
// lines are skipped; a line longer than lim.RowBytes is an error, and no
// more of the stream is read. name labels errors.
func ReadJSONL(r io.Reader, name string, lim Limits, fn func(Row) error) error {
	lim = lim.withDefaults()
	br := bufio.NewReaderSize(r, 64<<10)
	var buf []byte
	var p fastjson.Parser
	for line := 1; ; line++ {
		var err error
		var long bool
		buf, long, err = readLine(br, buf[:0], lim.RowBytes)
		if long {
			return lim.tooBig(name, line)
		}
		if len(bytes.TrimSpace(buf)) > 0 {
			row, rerr := parseJSONLRow(&p, buf, name, line)
			if rerr != nil {
				return rerr
			}
			if ferr := fn(row); ferr != nil {
				return ferr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read dataset %s: %w", name, err)
		}
	}
}

// readLine appends the next line of br to buf, without its line ending;
// long reports a line of more than max bytes, of which no more than that
// (and a buffer) was read.
func readLine(br *bufio.Reader, buf []byte, max int) (line []byte, long bool, err error) {
	for {
		frag, err := br.ReadSlice('\n')
		buf = append(buf, frag...)
		if len(buf) > max+2 { // room for "\r\n"
			return nil, true, nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			buf = bytes.TrimSuffix(bytes.TrimSuffix(buf, []byte("\n")), []byte("\r"))
			if len(buf) > max {
				return nil, true, nil
			}
			return buf, false, err
		}
	}
}

// parseJSONLRow reads one JSONL line as encoding/json would read it into
// {"prompt", "messages", "max_tokens"} — a key matched whatever its case,
// the last of a key given twice winning — but with fastjson: a dataset
// of a gigabyte of long rows is read in a few seconds, not the twenty
// encoding/json's two passes over every string take.
func parseJSONLRow(p *fastjson.Parser, b []byte, name string, line int) (Row, error) {
	bad := func(field, format string, args ...any) (Row, error) {
		return Row{}, &RowError{File: name, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	if surrogateEscape.Match(b) {
		// fastjson reads a lone UTF-16 surrogate escape differently from
		// encoding/json (U+FFFD): such a rare line goes through
		// encoding/json first, and its re-encoding is read.
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		var a any
		if err := d.Decode(&a); err == nil {
			if nb, err := json.Marshal(a); err == nil {
				b = nb
			}
		}
	}
	v, err := p.ParseBytes(b)
	if err != nil {
		return bad("", "invalid JSON: %v", err)
	}
	o, err := v.Object()
	if err != nil {
		return bad("", "want a JSON object per line")
	}
	var prompt, messages, maxTokens, images, audio *fastjson.Value
	o.Visit(func(k []byte, v *fastjson.Value) {
		switch {
		case strings.EqualFold(string(k), "images"), strings.EqualFold(string(k), "image"):
			images = v
		case strings.EqualFold(string(k), "audio"):
			audio = v
		case strings.EqualFold(string(k), "prompt"):
			prompt = v
		case strings.EqualFold(string(k), "messages"):
			messages = v
		case strings.EqualFold(string(k), "max_tokens"):
			maxTokens = v
		}
	})
	given := func(v *fastjson.Value) bool { return v != nil && v.Type() != fastjson.TypeNull }
	row := Row{Line: line}
	switch {
	case given(messages):
		const want = `want [{"role": …, "content": "…"}, …]`
		list, err := messages.Array()
		if err != nil {
			return bad("messages", want)
		}
		if len(list) == 0 {
			return bad("messages", "is empty")
		}
		row.Messages = make([]api.Message, len(list))
		for i, m := range list {
			if m.Type() == fastjson.TypeNull {
				continue // a zero message, as encoding/json leaves it
			}
			mo, err := m.Object()
			if err != nil {
				return bad("messages", want)
			}
			var role, content *fastjson.Value
			mo.Visit(func(k []byte, v *fastjson.Value) {
				switch {
				case strings.EqualFold(string(k), "role"):
					role = v
				case strings.EqualFold(string(k), "content"):
					content = v
				}
			})
			if given(content) && content.Type() == fastjson.TypeArray {
				field := fmt.Sprintf("messages[%d].content", i)
				text, refs, err := contentParts(content, field)
				if err != nil {
					return bad(field, "%v", err)
				}
				row.Messages[i].Content, content = text, nil
				row.MediaRefs = append(row.MediaRefs, refs...)
			}
			for _, f := range []struct {
				v   *fastjson.Value
				dst *string
			}{{role, &row.Messages[i].Role}, {content, &row.Messages[i].Content}} {
				if !given(f.v) {
					continue
				}
				sb, err := f.v.StringBytes()
				if err != nil {
					return bad("messages", want)
				}
				*f.dst = jsonText(sb)
			}
		}
		for i, m := range row.Messages {
			if m.Role == "" {
				return bad(fmt.Sprintf("messages[%d].role", i), "missing")
			}
		}
	case given(prompt):
		sb, err := prompt.StringBytes()
		if err != nil {
			return bad("prompt", "want a string")
		}
		row.Prompt = jsonText(sb)
		if strings.TrimSpace(row.Prompt) == "" {
			return bad("prompt", "is empty")
		}
	default:
		return bad("prompt", `missing (want "prompt" or "messages")`)
	}
	for _, f := range []struct {
		v           *fastjson.Value
		field, kind string
	}{{images, "images", api.KindImage}, {audio, "audio", api.KindAudio}} {
		if !given(f.v) {
			continue
		}
		refs, err := jsonRefs(f.v, f.field, f.kind)
		if err != nil {
			return bad(f.field, "%v", err)
		}
		row.MediaRefs = append(row.MediaRefs, refs...)
	}
	if given(maxTokens) {
		raw := maxTokens.MarshalTo(nil)
		n, err := strconv.Atoi(string(raw))
		if maxTokens.Type() != fastjson.TypeNumber || err != nil || n < 1 {
			return bad("max_tokens", "want a whole number ≥ 1, got %s", raw)
		}
		row.MaxTokens = n
	}
	return row, nil
}

// surrogateEscape finds a UTF-16 surrogate's \u escape in a line.
var surrogateEscape = regexp.MustCompile(`\\u[dD][89a-fA-F]`)

// jsonText is a JSON string's bytes as encoding/json gives them: each
// byte that is not UTF-8 becomes U+FFFD (fastjson keeps it as it was).
func jsonText(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	out := make([]byte, 0, len(b)+8)
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n == 1 {
			out = utf8.AppendRune(out, utf8.RuneError)
		} else {
			out = append(out, b[:n]...)
		}
		b = b[n:]
	}
	return string(out)
}

// lineCounter remembers where the newlines of a stream are, so an offset
// the JSON decoder reports can be turned into a line number. Past limit
// (when set) it reads no more; it reads at most 64 KiB at a time, so the
// decoder, which reads only to finish the value at hand, holds no more
// than that past it.
type lineCounter struct {
	r     io.Reader
	off   int64
	nl    []int64
	limit int64
}

// errRowTooBig is lineCounter's error past its limit.
var errRowTooBig = errors.New("row too big")

func (c *lineCounter) Read(p []byte) (int, error) {
	if c.limit > 0 && c.off >= c.limit {
		return 0, errRowTooBig
	}
	if len(p) > 64<<10 {
		p = p[:64<<10]
	}
	n, err := c.r.Read(p)
	for i := 0; i < n; {
		j := bytes.IndexByte(p[i:n], '\n')
		if j < 0 {
			break
		}
		c.nl = append(c.nl, c.off+int64(i+j))
		i += j + 1
	}
	c.off += int64(n)
	return n, err
}

// line is the 1-based line holding byte offset off.
func (c *lineCounter) line(off int64) int {
	return sort.Search(len(c.nl), func(i int) bool { return c.nl[i] >= off }) + 1
}

type shareGPTEntry struct {
	Conversations []struct {
		From  string `json:"from"`
		Value string `json:"value"`
	} `json:"conversations"`
	// Image or Images (LLaVA's rows) go with the first human turn, whose
	// "<image>" placeholders are dropped.
	Image  json.RawMessage `json:"image"`
	Images json.RawMessage `json:"images"`
}

// ReadShareGPT calls fn with every entry of a ShareGPT JSON array: the
// first human turn is the prompt, the next assistant turn the reply. The
// array is decoded one entry at a time; an entry of more than lim.RowBytes
// is an error, and no more of the stream is read.
func ReadShareGPT(r io.Reader, name string, lim Limits, fn func(Row) error) error {
	lim = lim.withDefaults()
	lc := &lineCounter{r: r}
	dec := json.NewDecoder(lc)
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('[') {
		return &RowError{File: name, Line: 1, Msg: "want a JSON array of {\"conversations\": […]}"}
	}
	for i := 0; dec.More(); i++ {
		start := dec.InputOffset()
		lc.limit = start + int64(lim.RowBytes) + 64<<10 + 1
		var e shareGPTEntry
		err := dec.Decode(&e)
		if errors.Is(err, errRowTooBig) || err == nil && dec.InputOffset()-start > int64(lim.RowBytes)+1 { // +1: the comma before it
			return lim.tooBig(name, lc.line(skipSpace(lc, start)))
		}
		if err != nil {
			line := lc.line(start + 1)
			var ute *json.UnmarshalTypeError
			if errors.As(err, &ute) {
				return &RowError{File: name, Line: line, Field: fmt.Sprintf("[%d].%s", i, ute.Field), Msg: "want " + ute.Type.String()}
			}
			return &RowError{File: name, Line: line, Field: fmt.Sprintf("[%d]", i), Msg: "invalid JSON: " + err.Error()}
		}
		line := lc.line(skipSpace(lc, start))
		row := Row{Line: line}
		for j, c := range e.Conversations {
			switch strings.ToLower(c.From) {
			case "human", "user":
				switch {
				case row.Prompt == "":
					if strings.TrimSpace(c.Value) == "" {
						return &RowError{File: name, Line: line, Field: fmt.Sprintf("[%d].conversations[%d].value", i, j), Msg: "is empty"}
					}
					row.Prompt = c.Value
				case strings.TrimSpace(c.Value) != "":
					row.Turns = append(row.Turns, c.Value)
					row.TurnReplies = append(row.TurnReplies, "")
				}
			case "gpt", "assistant", "chatgpt", "bard", "bing":
				switch {
				case len(row.Turns) > 0 && row.TurnReplies[len(row.Turns)-1] == "":
					row.TurnReplies[len(row.Turns)-1] = c.Value
				case row.Prompt != "" && row.Reply == "":
					row.Reply = c.Value
				}
			}
		}
		if row.Prompt == "" {
			return &RowError{File: name, Line: line, Field: fmt.Sprintf("[%d].conversations", i), Msg: "no human turn"}
		}
		if err := shareGPTMedia(&row, e.Image, e.Images, i); err != nil {
			err.File = name
			return err
		}
		if err := fn(row); err != nil {
			return err
		}
	}
	lc.limit = 0
	if _, err := dec.Token(); err != nil {
		return &RowError{File: name, Line: lc.line(dec.InputOffset()), Msg: "the array is not closed: " + err.Error()}
	}
	return nil
}

// skipSpace returns the offset where an entry's text begins: InputOffset
// points before the separating comma, and an entry usually starts on the
// line after it. Only used for line numbers.
func skipSpace(lc *lineCounter, start int64) int64 {
	i := sort.Search(len(lc.nl), func(i int) bool { return lc.nl[i] >= start })
	if i < len(lc.nl) && lc.nl[i] <= start+1 {
		return lc.nl[i] + 1
	}
	return start
}

// Dataset is a prompt file ready for a run: its format, and its sampled
// rows (JSONL, ShareGPT) or its path (a text corpus, cut as it is read).
type Dataset struct {
	Format string
	Rows   []Row
	Corpus string
}

// ErrFormat is the error (wrapped) of a format name OpenDataset does not
// know.
var ErrFormat = errors.New("unknown dataset format")

// OpenDataset checks path as a dataset of format (FormatAuto detects it)
// and samples up to k rows with seed: a directory, a binary file, a bad
// row anywhere or a row past lim is an error before anything is sent.
func OpenDataset(path, format string, k int, seed uint64, lim Limits) (Dataset, error) {
	if fi, err := os.Stat(path); err != nil {
		return Dataset{}, err
	} else if fi.IsDir() {
		return Dataset{}, fmt.Errorf("%s is a directory; give a JSONL, ShareGPT or text file", path)
	}
	d := Dataset{Format: format}
	switch format {
	case FormatAuto:
		var err error
		if d.Format, err = DetectFormat(path); err != nil {
			return Dataset{}, err
		}
	case FormatJSONL, FormatShareGPT, FormatText:
	default:
		return Dataset{}, fmt.Errorf("%w %q (known: auto, jsonl, sharegpt, text)", ErrFormat, format)
	}
	if d.Format == FormatText {
		d.Corpus = path
		return d, CheckText(path)
	}
	var err error
	if d.Rows, err = Sample(path, d.Format, k, seed, lim); err != nil {
		return d, err
	}
	return d, loadRowMedia(d.Rows, filepath.Base(path), datasetDir(path), lim, RowsBytes(d.Rows))
}
