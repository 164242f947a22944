package sse

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

func collect(t *testing.T, r io.Reader) []Event {
	t.Helper()
	return events(t, NewDecoder(r))
}

// events reads every event from d, to its end, each with its own data.
func events(t *testing.T, d *Decoder) []Event {
	t.Helper()
	var out []Event
	for {
		ev, err := d.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		ev.Data = append([]byte(nil), ev.Data...)
		out = append(out, ev)
	}
}

func TestDecodeFraming(t *testing.T) {
	cases := []struct {
		name string
		in   string
		want []string
	}{
		{"lf", "data: a\n\ndata: b\n\n", []string{"a", "b"}},
		{"crlf", "data: a\r\n\r\ndata: b\r\n\r\n", []string{"a", "b"}},
		{"cr", "data: a\r\rdata: b\r\r", []string{"a", "b"}},
		{"comments", ": keep-alive\n\ndata: a\n\n: ping\ndata: b\n\n", []string{"a", "b"}},
		{"multiline", "data: a\ndata: b\n\n", []string{"a\nb"}},
		{"no space", "data:a\n\n", []string{"a"}},
		{"event name", "event: error\ndata: x\n\n", []string{"x"}},
		{"unterminated last", "data: a\n\ndata: b", []string{"a", "b"}},
		{"other fields", "id: 3\nretry: 10\ndata: a\n\n", []string{"a"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			evs := collect(t, strings.NewReader(c.in))
			if len(evs) != len(c.want) {
				t.Fatalf("Decode(%q) = %d events, want %d", c.in, len(evs), len(c.want))
			}
			for i, ev := range evs {
				if string(ev.Data) != c.want[i] {
					t.Errorf("event %d = %q, want %q", i, ev.Data, c.want[i])
				}
			}
		})
	}
	evs := collect(t, strings.NewReader("event: error\ndata: x\n\n"))
	if evs[0].Name != "error" {
		t.Errorf("event name = %q, want error", evs[0].Name)
	}
}

// oneByteReader hands out one byte per Read, the worst case for framing.
type oneByteReader struct{ r io.Reader }

func (o oneByteReader) Read(p []byte) (int, error) { return o.r.Read(p[:1]) }

func TestCaptureAnyChunking(t *testing.T) {
	raw, err := os.ReadFile("testdata/llamacpp-openai-chat-usage.sse")
	if err != nil {
		t.Fatal(err)
	}
	whole := collect(t, bytes.NewReader(raw))
	bytewise := collect(t, oneByteReader{bytes.NewReader(raw)})
	crlf := collect(t, bytes.NewReader(bytes.ReplaceAll(raw, []byte("\n"), []byte("\r\n"))))
	if len(whole) != 14 { // 12 tokens, the finish chunk with usage, [DONE]
		t.Fatalf("capture has %d events, want 14", len(whole))
	}
	for i := range whole {
		if !bytes.Equal(whole[i].Data, bytewise[i].Data) || !bytes.Equal(whole[i].Data, crlf[i].Data) {
			t.Fatalf("event %d differs between chunkings", i)
		}
	}
	if string(whole[13].Data) != "[DONE]" {
		t.Errorf("last event = %q", whole[13].Data)
	}
}

func TestLongLine(t *testing.T) {
	big := strings.Repeat("x", 3<<20)
	evs := collect(t, strings.NewReader("data: "+big+"\n\ndata: y\n\n"))
	if len(evs) != 2 || len(evs[0].Data) != len(big) || string(evs[1].Data) != "y" {
		t.Fatalf("long line: got %d events", len(evs))
	}
}

// timedReader delivers pieces with a fake clock that advances per Read.
type timedReader struct {
	pieces []string
	clock  *time.Time
	step   time.Duration
}

func (r *timedReader) Read(p []byte) (int, error) {
	if len(r.pieces) == 0 {
		return 0, io.EOF
	}
	*r.clock = r.clock.Add(r.step)
	n := copy(p, r.pieces[0])
	r.pieces = r.pieces[1:]
	return n, nil
}

func TestTimestampIsArrivalOfDataLine(t *testing.T) {
	base := time.Unix(1000, 0)
	clock := base
	r := &timedReader{pieces: []string{"data: a\n\ndata: b", "\n\n", ": ka\n\n", "data: c\n\ndata: d\n\n"}, clock: &clock, step: 10 * time.Millisecond}
	d := NewDecoder(r)
	d.SetClock(func() time.Time { return clock })
	want := []time.Duration{10, 20, 40, 40} // ms after base
	for i, w := range want {
		ev, err := d.Next()
		if err != nil {
			t.Fatal(err)
		}
		if got := ev.At.Sub(base); got != w*time.Millisecond {
			t.Errorf("event %d (%s) at %v, want %v", i, ev.Data, got, w*time.Millisecond)
		}
	}
}

func FuzzDecoder(f *testing.F) {
	raw, _ := os.ReadFile("testdata/llamacpp-openai-chat-usage.sse")
	f.Add(raw)
	f.Add([]byte("data: a\r\n\r\n: c\r\ndata: b\rdata: c\n\n"))
	f.Add([]byte("event: error\ndata: {\"error\":1}\n\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		whole := collect(t, bytes.NewReader(in))
		bytewise := collect(t, oneByteReader{bytes.NewReader(in)})
		if len(whole) != len(bytewise) {
			t.Fatalf("%d events whole, %d byte by byte", len(whole), len(bytewise))
		}
		for i := range whole {
			if !bytes.Equal(whole[i].Data, bytewise[i].Data) {
				t.Fatalf("event %d: %q vs %q", i, whole[i].Data, bytewise[i].Data)
			}
		}
	})
}

// endlessLines is an event that never ends: data: line after data: line.
type endlessLines struct{ line []byte }

func (e endlessLines) Read(p []byte) (int, error) {
	n := 0
	for n+len(e.line) <= len(p) {
		n += copy(p[n:], e.line)
	}
	if n == 0 {
		n = copy(p, e.line)
	}
	return n, nil
}

// TestEventBounded: one event split over endless data: lines fails as
// too large once its data passes the bound, instead of growing for ever.
func TestEventBounded(t *testing.T) {
	defer func(v int) { maxEventBytes = v }(maxEventBytes)
	maxEventBytes = 1 << 20
	d := NewDecoder(endlessLines{line: []byte("data: " + strings.Repeat("x", 1000) + "\n")})
	if _, err := d.Next(); !errors.Is(err, ErrEventTooLarge) {
		t.Fatalf("Next = %v, want ErrEventTooLarge", err)
	}
}
