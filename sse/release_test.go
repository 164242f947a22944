package sse

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

// decodeAll reads every event of d, returning their data.
func decodeAll(t *testing.T, d *Decoder) []string {
	t.Helper()
	var got []string
	for _, ev := range events(t, d) {
		got = append(got, string(ev.Data))
	}
	return got
}

// A released decoder's buffer serves the next decoder, whose events are
// its own; the released decoder reads no more, and the last event it
// returned stays as it was.
func TestReleaseReusesBuffer(t *testing.T) {
	d1 := NewDecoder(strings.NewReader("data: one\n\ndata: two\n\n"))
	var last Event
	for {
		ev, err := d1.Next()
		if err != nil {
			break
		}
		last = ev
	}
	d1.Release()
	d1.Release() // twice is once
	if _, err := d1.Next(); err == nil || errors.Is(err, io.EOF) {
		t.Errorf("Next after Release: %v, want an error that is not EOF", err)
	}
	d2 := NewDecoder(strings.NewReader("data: three\n\ndata: four\n\n"))
	if got := decodeAll(t, d2); strings.Join(got, ",") != "three,four" {
		t.Errorf("events %q from a decoder after a release, want three,four", got)
	}
	if string(last.Data) != "two" {
		t.Errorf("the released decoder's last event reads %q, want two", last.Data)
	}
	d2.Release()
}

// A buffer that grew past its initial size is not pooled: a decoder
// starts at 1 KiB, whatever the streams before it needed, so idle streams
// stay cheap.
func TestReleaseKeepsInitialSize(t *testing.T) {
	long := "data: " + strings.Repeat("x", 8<<10) + "\n\n"
	for range 4 {
		d := NewDecoder(strings.NewReader(long))
		if got := decodeAll(t, d); len(got) != 1 || len(got[0]) != 8<<10 {
			t.Fatalf("decoded %d events, want one of 8 KiB", len(got))
		}
		if len(d.buf) <= initialBuffer {
			t.Fatalf("buffer %d bytes after an 8 KiB line, want it grown", len(d.buf))
		}
		d.Release()
		if d := NewDecoder(strings.NewReader("")); len(d.buf) != initialBuffer || cap(d.buf) != initialBuffer {
			t.Fatalf("a new decoder's buffer is %d bytes (cap %d), want %d", len(d.buf), cap(d.buf), initialBuffer)
		}
	}
}

// What Release saves: a stream's decoding allocates no buffer when the
// one before it was released.
func TestReleaseSavesAllocation(t *testing.T) {
	if raceBuild {
		t.Skip("the race detector makes sync.Pool drop buffers at random")
	}
	stream := []byte("data: {\"a\":1}\n\ndata: [DONE]\n\n")
	r := bytes.NewReader(stream)
	decode := func(release bool) func() {
		return func() {
			r.Reset(stream)
			d := NewDecoder(r)
			for {
				if _, err := d.Next(); err != nil {
					break
				}
			}
			if release {
				d.Release()
			}
		}
	}
	kept := testing.AllocsPerRun(200, decode(false))
	released := testing.AllocsPerRun(200, decode(true))
	if released > kept-1 {
		t.Errorf("%.1f allocations a stream with Release, %.1f without: want one fewer (the buffer)", released, kept)
	}
}
