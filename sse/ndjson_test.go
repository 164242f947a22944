package sse

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

func lines(t *testing.T, r io.Reader) []string {
	t.Helper()
	d := NewLineDecoder(r)
	var out []string
	for {
		l, err := d.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(l.Data))
	}
}

func TestLineDecoder(t *testing.T) {
	in := "{\"a\":1}\n\n{\"b\":2}\r\n{\"c\":3}\r{\"d\":4}"
	want := []string{`{"a":1}`, `{"b":2}`, `{"c":3}`, `{"d":4}`}
	for _, got := range [][]string{lines(t, strings.NewReader(in)), lines(t, oneByteReader{strings.NewReader(in)})} {
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("lines = %q, want %q", got, want)
		}
	}
	base := time.Unix(0, 0)
	clock := base
	r := &timedReader{pieces: []string{"{\"a\":1}\n{\"b\"", ":2}\n"}, clock: &clock, step: 5 * time.Millisecond}
	d := NewLineDecoder(r)
	d.SetClock(func() time.Time { return clock })
	for i, want := range []time.Duration{5 * time.Millisecond, 10 * time.Millisecond} {
		l, err := d.Next()
		if err != nil || l.At.Sub(base) != want {
			t.Errorf("line %d at %v (%v), want %v", i, l.At.Sub(base), err, want)
		}
	}
}

func FuzzLineDecoder(f *testing.F) {
	f.Add([]byte("{\"model\":\"m\",\"response\":\" hi\",\"done\":false}\n{\"done\":true,\"eval_count\":2}\n"))
	f.Add([]byte("a\r\nb\rc\n\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		whole := lines(t, bytes.NewReader(in))
		bytewise := lines(t, oneByteReader{bytes.NewReader(in)})
		if strings.Join(whole, "\x00") != strings.Join(bytewise, "\x00") {
			t.Fatalf("%q: %q vs %q", in, whole, bytewise)
		}
	})
}
