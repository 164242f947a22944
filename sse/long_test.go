package sse

import (
	"io"
	"strings"
	"testing"
)

// countingReader hands out at most n bytes per Read, as net/http's 4 KiB
// buffered body does, and counts the reads.
type countingReader struct {
	r     io.Reader
	n     int
	reads int
}

func (c *countingReader) Read(p []byte) (int, error) {
	c.reads++
	return c.r.Read(p[:min(len(p), c.n)])
}

// TestMegabyteLineIsLinear: a 1 MiB line is read in one pass of 4 KiB
// reads, with the buffer doubling to hold it (not a limit, not a buffer
// re-scanned from the start on every read), and the stream carries on.
func TestMegabyteLineIsLinear(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	in := "data: " + big + "\n\ndata: after\n\n"
	cr := &countingReader{r: strings.NewReader(in), n: 4 << 10}
	d := NewDecoder(cr)
	ev, err := d.Next()
	if err != nil || len(ev.Data) != len(big) {
		t.Fatalf("Next = %d bytes, %v; want %d", len(ev.Data), err, len(big))
	}
	if ev, err = d.Next(); err != nil || string(ev.Data) != "after" {
		t.Fatalf("event after the long line = %q, %v", ev.Data, err)
	}
	if max := len(in)/(4<<10) + 3; cr.reads > max {
		t.Errorf("%d reads for %d bytes in 4 KiB pieces, want at most %d", cr.reads, len(in), max)
	}
	if c := cap(d.buf); c > 4<<20 {
		t.Errorf("buffer grew to %d bytes for a 1 MiB line", c)
	}
	// Scanning for the line end resumes where the last read ended: count
	// the bytes indexEOL looks at by replaying the decoder's steps.
	if scanned := scannedBytes(in, 4<<10); scanned > 2*len(in) {
		t.Errorf("line scanning looked at %d bytes for a %d-byte stream: quadratic", scanned, len(in))
	}
}

// scannedBytes decodes in with reads of n bytes and sums the lengths of the
// slices handed to indexEOL, through the same code path as Next.
func scannedBytes(in string, n int) int {
	total := 0
	scanHook = func(b []byte) { total += len(b) }
	defer func() { scanHook = nil }()
	d := NewDecoder(&countingReader{r: strings.NewReader(in), n: n})
	for {
		if _, err := d.Next(); err != nil {
			return total
		}
	}
}

// BenchmarkLongLine decodes 1 MiB lines, read in 4 KiB pieces: throughput
// should match that of short lines (BenchmarkDecoderChunk).
//
//	go test -run '^$' -bench LongLine -benchmem ./sse
func BenchmarkLongLine(b *testing.B) {
	line := "data: " + strings.Repeat("x", 1<<20) + "\n\n"
	d := NewDecoder(&loopReader{b: []byte(line), n: 4 << 10})
	b.ReportAllocs()
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		if _, err := d.Next(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestBufferFollowsThePace: a stream of one event per read (a token every
// few milliseconds) keeps the 1 KiB buffer, so idle and slow streams stay
// small; a stream whose reads keep filling the buffer grows it until reads
// no longer fill it, so a fast stream is read in the transport's pieces.
func TestBufferFollowsThePace(t *testing.T) {
	ev := "data: " + strings.Repeat("y", 190) + "\n\n"
	slow := &countingReader{r: strings.NewReader(strings.Repeat(ev, 500)), n: len(ev)}
	d := NewDecoder(slow)
	for range 500 {
		if _, err := d.Next(); err != nil {
			t.Fatal(err)
		}
	}
	if len(d.buf) != initialBuffer {
		t.Errorf("slow stream: buffer %d bytes, want %d", len(d.buf), initialBuffer)
	}

	in := strings.Repeat(ev, 5000) // 1 MB of events in 4 KiB reads
	fast := &countingReader{r: strings.NewReader(in), n: 4 << 10}
	d = NewDecoder(fast)
	for range 5000 {
		if _, err := d.Next(); err != nil {
			t.Fatal(err)
		}
	}
	if len(d.buf) < 4<<10 || len(d.buf) > readAhead {
		t.Errorf("fast stream: buffer %d bytes, want between 4 KiB and %d", len(d.buf), readAhead)
	}
	if max := len(in)/(4<<10) + 8; fast.reads > max {
		t.Errorf("fast stream: %d reads for %d bytes offered 4 KiB at a time, want at most %d", fast.reads, len(in), max)
	}
}
