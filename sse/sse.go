// Package sse decodes Server-Sent Events as LLM servers stream them, and
// stamps each event with the instant its bytes arrived.
//
// The decoder reads the body itself, in whatever pieces the transport hands
// over, and takes one monotonic timestamp per read; every event completed by
// that read carries it. It accepts LF, CRLF and CR line endings, skips
// comment lines (": keep-alive"), joins multi-line data fields with "\n",
// and has no fixed line-length limit: a line may be as long as MaxLineBytes (4 MiB).
//
// A Decoder is not safe for concurrent use.
package sse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// MaxLineBytes bounds one line, so a broken server cannot exhaust memory.
// 4 MiB holds an event that repeats a whole answer of about a million
// tokens (a Responses API response.completed event, some 4 bytes a
// token); with the buffer's doubling and the garbage it leaves, a stream at
// the limit costs the client about 15 MB, so 16 hostile streams stay under
// 256 MB.
const MaxLineBytes = 4 << 20

// ErrLineTooLong reports a line longer than MaxLineBytes.
var ErrLineTooLong = errors.New("sse: line longer than 4 MiB")

// MaxEventBytes bounds one event's data, however many data: lines carry
// it: a server splitting one event over a gigabyte of lines must not take
// the client's memory.
const MaxEventBytes = 4 << 20

// maxEventBytes is MaxEventBytes, smaller in tests.
var maxEventBytes = MaxEventBytes

// ErrEventTooLarge reports an event whose data passed MaxEventBytes.
var ErrEventTooLarge = errors.New("sse: event data longer than 4 MiB")

// Event is one dispatched event. Data is a slice the decoder reuses for
// the next event: it is valid until the next call to Next.
type Event struct {
	Name string // the "event:" field; empty means "message"
	Data []byte
	// At is the arrival of the bytes that completed the event's first data line.
	At time.Time
}

// Decoder reads events from a stream.
type Decoder struct {
	r          io.Reader
	now        func() time.Time
	buf        []byte  // unread bytes are buf[start:end]
	pooled     *[]byte // the initial buffer, from buffers, until it is given back
	start, end int
	readAt     time.Time
	err        error
	filled     bool // the last read filled all the free space: more is likely waiting

	data    []byte
	name    string
	hasData bool
	at      time.Time
	skipLF  bool // the previous line ended in CR: a following LF belongs to it
}

// initialBuffer is small so that thousands of idle streams stay cheap (a
// token chunk's event is about 200 bytes); it doubles as lines require (a
// 1 MiB line takes 10 doublings), and while reads keep filling it, up to
// readAhead, so a fast stream is read in large pieces.
const (
	initialBuffer = 1 << 10
	readAhead     = 16 << 10
)

// NewDecoder returns a decoder reading from r with a 1 KiB initial buffer
// that grows as lines and the stream's pace require.
//
// When r has a method ArrivalClock() func() time.Time returning non-nil
// (api's body of a connection that keeps kernel receive stamps), that
// function stamps reads instead of time.Now.
func NewDecoder(r io.Reader) *Decoder {
	d := &Decoder{r: r, now: time.Now, pooled: buffers.Get().(*[]byte)}
	d.buf = *d.pooled
	if c, ok := r.(interface{ ArrivalClock() func() time.Time }); ok {
		if f := c.ArrivalClock(); f != nil {
			d.now = f
		}
	}
	return d
}

// buffers holds initial buffers of decoders released, for new ones: at
// thousands of requests a second a buffer each is a good part of what the
// client allocates, and of how often its garbage collector runs.
var buffers = sync.Pool{New: func() any {
	b := make([]byte, initialBuffer)
	return &b
}}

// recycle gives the decoder's initial buffer back to buffers, once.
func (d *Decoder) recycle() {
	if d.pooled != nil {
		buffers.Put(d.pooled)
		d.pooled = nil
	}
}

// Release ends the decoder's use, giving its initial buffer back for
// later decoders (one that grew was given back then). The decoder must not
// be used after it; Events it returned stay valid (their data is the
// decoder's own, not the buffer's).
func (d *Decoder) Release() {
	d.recycle()
	d.buf = nil
	d.start, d.end = 0, 0
	d.err = errReleased
}

// errReleased is what a released decoder's Next returns.
var errReleased = errors.New("sse: decoder used after Release")

// SetClock replaces time.Now, for tests.
func (d *Decoder) SetClock(now func() time.Time) { d.now = now }

// Next returns the next event. It returns io.EOF at a clean end of stream;
// an event cut off by the end of the stream is dispatched first if it has data.
func (d *Decoder) Next() (Event, error) {
	d.data = d.data[:0]
	d.name = ""
	d.hasData = false
	for {
		line, ok, err := d.line()
		if err != nil {
			if err == io.EOF && d.hasData {
				return d.event(), nil
			}
			return Event{}, err
		}
		if !ok {
			continue
		}
		if len(line) == 0 {
			if d.hasData {
				return d.event(), nil
			}
			d.name = ""
			continue
		}
		d.field(line)
		if len(d.data) > maxEventBytes {
			return Event{}, ErrEventTooLarge
		}
	}
}

func (d *Decoder) event() Event {
	return Event{Name: d.name, Data: d.data, At: d.at}
}

func (d *Decoder) field(line []byte) {
	if line[0] == ':' {
		return // comment, e.g. ": keep-alive"
	}
	name, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		name, value = line[:i], line[i+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(name) {
	case "data":
		if d.hasData {
			d.data = append(d.data, '\n')
		} else {
			d.at = d.readAt
		}
		d.data = append(d.data, value...)
		d.hasData = true
	case "event":
		d.name = string(value)
	}
}

// line returns the next complete line without its terminator. ok is false
// when the bytes consumed were only the LF of a CRLF pair.
func (d *Decoder) line() ([]byte, bool, error) {
	scanFrom := d.start
	for {
		if d.skipLF && d.start < d.end {
			d.skipLF = false
			if d.buf[d.start] == '\n' {
				d.start++
				return nil, false, nil
			}
		}
		if scanHook != nil {
			scanHook(d.buf[scanFrom:d.end])
		}
		if i := indexEOL(d.buf[scanFrom:d.end]); i >= 0 {
			i += scanFrom
			line := d.buf[d.start:i]
			if d.buf[i] == '\r' {
				d.skipLF = true
			}
			d.start = i + 1
			return line, true, nil
		}
		scanFrom = d.end
		if d.err != nil {
			if d.start < d.end { // last line without terminator
				line := d.buf[d.start:d.end]
				d.start = d.end
				return line, true, nil
			}
			return nil, false, d.err
		}
		scanFrom -= d.start
		if err := d.fill(); err != nil {
			return nil, false, err
		}
		scanFrom += d.start
	}
}

// scanHook, when set (by tests), sees every slice searched for a line end.
var scanHook func([]byte)

// indexEOL finds the first LF or CR with two vectorized scans instead of a
// byte loop: lines are long (a JSON chunk is ~200 bytes) and CR is rare.
func indexEOL(b []byte) int {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return bytes.IndexByte(b, '\r')
	}
	if j := bytes.IndexByte(b[:i], '\r'); j >= 0 {
		return j
	}
	return i
}

// fill reads more bytes, compacting or growing the buffer first.
func (d *Decoder) fill() error {
	if d.start > 0 {
		n := copy(d.buf, d.buf[d.start:d.end])
		d.start, d.end = 0, n
	}
	if d.end == len(d.buf) || (d.filled && len(d.buf) < readAhead) {
		if len(d.buf) >= MaxLineBytes {
			return ErrLineTooLong
		}
		nb := make([]byte, min(2*len(d.buf), MaxLineBytes))
		copy(nb, d.buf[:d.end])
		d.recycle() // no line returned from it is in use between calls to Next
		d.buf = nb
	}
	free := len(d.buf) - d.end
	n, err := d.r.Read(d.buf[d.end:])
	d.filled = n == free
	if n > 0 {
		d.readAt = d.now()
		d.end += n
	}
	if err != nil {
		d.err = err
		if err != io.EOF {
			d.err = fmt.Errorf("sse: read: %w", err)
		}
	}
	return nil
}
