package wire

import (
	"bufio"
	"context"
	"io"
	"net"
	"testing"
	"time"
)

// TestReceiveStampIsArrivalNotRead: data that waits in the socket before it
// is read is stamped with its arrival, not with the late read.
func TestReceiveStampIsArrivalNotRead(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	sent := make(chan int64, 1)
	served := make(chan struct{})
	go func() {
		defer close(served)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		var b [1]byte
		c.Read(b[:]) // the client asked (its socket is set up)
		sent <- time.Now().UnixNano()
		c.Write([]byte("hello"))
		io.Copy(io.Discard, c) // held open until the client closes
	}()
	c, err := ReceiveTimestampDialer(nil)(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { c.Close(); <-served }()
	rs, ok := c.(ReceiveStamper)
	if !ok {
		t.Skip("kernel refused SO_TIMESTAMPING")
	}
	// The kernel turns receive stamping on a moment after the first socket
	// asks (deferred work); give it that moment before the data is sent.
	time.Sleep(100 * time.Millisecond)
	c.Write([]byte("?"))
	wrote := <-sent
	time.Sleep(200 * time.Millisecond) // the client is busy; the bytes wait
	buf := make([]byte, 16)
	n, err := c.Read(buf)
	read := time.Now().UnixNano()
	if err != nil || string(buf[:n]) != "hello" {
		t.Fatalf("Read = %q, %v", buf[:n], err)
	}
	got := rs.LastReceived()
	if got < wrote || got > read-100*int64(time.Millisecond) {
		t.Errorf("receive stamp %d: want between the write (%d) and well before the read (%d)", got, wrote, read)
	}
}

// TestReceiveReadAllocates nothing: a stamped read costs no heap
// allocation, whatever the number of chunks and streams.
func TestReceiveReadAllocatesNothing(t *testing.T) {
	srv := newRawServer(t, func(_ int, c net.Conn, br *bufio.Reader) {
		c.Write(make([]byte, 64<<10))
		io.Copy(io.Discard, br) // until the client hangs up
	})
	c, err := ReceiveTimestampDialer(nil)(context.Background(), "tcp", srv.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, ok := c.(ReceiveStamper); !ok {
		t.Skip("kernel refused SO_TIMESTAMPING")
	}
	buf := make([]byte, 16)
	if _, err := io.ReadFull(c, buf); err != nil { // the data is there
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := c.Read(buf); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("%.1f allocations per read, want 0", allocs)
	}
}

// jitterStamper's stamps go back and forth around a rising instant, as
// realtime-to-monotonic conversions do by a few nanoseconds.
type jitterStamper struct {
	net.Conn
	i int
	t []int64
}

func (j *jitterStamper) LastReceived() int64 {
	v := j.t[j.i%len(j.t)]
	j.i++
	return v
}

// TestArrivalClockNeverGoesBack: whatever the stamps do, the clock's
// instants never go back, and never precede the floor it was given.
func TestArrivalClockNeverGoesBack(t *testing.T) {
	now := time.Now().UnixNano()
	js := &jitterStamper{t: []int64{now - 3e6, now - 3e6 - 150, now - 2e6, now - 2e6 - 10, now - 5e6, now - 1e6}}
	floor := time.Now().Add(-4 * time.Millisecond)
	clock := ArrivalClock(js, floor)
	if clock == nil {
		t.Fatal("no clock for a stamping connection")
	}
	last := floor
	for i := range 12 {
		at := clock()
		if at.Before(last) {
			t.Fatalf("stamp %d at %v, before the one before it (%v)", i, at, last)
		}
		last = at
	}
}

// TestStampTime: a stamp 3 ms before now is the instant 3 ms before now on
// the monotonic clock; no stamp, or one from the future, is now.
func TestStampTime(t *testing.T) {
	now := time.Now()
	if got := now.Sub(StampTime(now, now.UnixNano()-3e6)); got != 3*time.Millisecond {
		t.Errorf("3 ms ago: %v before now", got)
	}
	if !StampTime(now, 0).Equal(now) || !StampTime(now, now.UnixNano()+5e6).Equal(now) {
		t.Error("no stamp, or a future one, is not now")
	}
}
