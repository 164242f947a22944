package sse

import "time"

// Line is one newline-delimited record (NDJSON, as Ollama streams) with the
// arrival of the read that completed it. Data aliases the decoder's buffer
// and is valid until the next call.
type Line struct {
	Data []byte
	At   time.Time
}

// LineDecoder reads newline-delimited records with the same buffering,
// timestamps and line-length limit as Decoder. Blank lines are skipped; LF,
// CRLF and CR all end a line. Not safe for concurrent use.
type LineDecoder struct{ d *Decoder }

// NewLineDecoder returns a decoder of newline-delimited records.
func NewLineDecoder(r interface{ Read([]byte) (int, error) }) *LineDecoder {
	return &LineDecoder{d: NewDecoder(r)}
}

// SetClock replaces time.Now, for tests.
func (l *LineDecoder) SetClock(now func() time.Time) { l.d.SetClock(now) }

// Next returns the next non-blank line, or io.EOF at the end.
func (l *LineDecoder) Next() (Line, error) {
	for {
		b, ok, err := l.d.line()
		if err != nil {
			return Line{}, err
		}
		if !ok || len(b) == 0 {
			continue
		}
		return Line{Data: b, At: l.d.readAt}, nil
	}
}
