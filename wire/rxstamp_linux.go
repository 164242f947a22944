package wire

import (
	"context"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// ReceiveTimestampDialer returns a DialContext for http.Transport whose TCP
// connections ask the kernel to timestamp received data (SO_TIMESTAMPING,
// software receive stamps) and read with recvmsg(2) to keep the stamp of
// the latest data read. A stream read through such a connection is stamped
// with the instant its bytes reached the machine rather than the instant
// the client got round to reading them, so a busy client (thousands of
// streams, a GC pause, a slow core) does not add its own delay to TTFT and
// inter-token gaps. Where the kernel refuses, the connection works as usual
// and stamps fall back to the read instant.
func ReceiveTimestampDialer(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if d == nil {
		d = &net.Dialer{}
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return StampConn(c), nil
	}
}

// StampConn asks the kernel to timestamp the data c receives (as
// ReceiveTimestampDialer's connections do) and returns c wrapped so that
// its reads keep the stamp of the latest data read (ReceiveStamper): for
// connections a listener accepted, as a server that measures its own
// requests' arrival needs. It returns c itself where the kernel refuses
// or c is no TCP connection.
func StampConn(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	raw, ok := enableStamps(tc)
	if !ok {
		return c
	}
	return newRxConn(tc, raw)
}

// KeepStamping asks for receive stamps on a listening socket, which the
// connections it accepts inherit. It also keeps the kernel stamping: it
// turns stamping on for the whole stack only while some socket asks (and
// a moment after the first one does), so without it the first packets of
// a fresh run may come unstamped.
func KeepStamping(ln net.Listener) bool {
	sc, ok := ln.(syscall.Conn)
	if !ok {
		return false
	}
	_, ok = enableStamps(sc)
	return ok
}

// enableStamps asks the kernel for software receive stamps on c's socket.
func enableStamps(c syscall.Conn) (syscall.RawConn, bool) {
	raw, err := c.SyscallConn()
	if err != nil {
		return nil, false
	}
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, soTimestamping, sofRxSoftware|sofSoftware)
	}); err != nil || serr != nil {
		return nil, false
	}
	return raw, true
}

const (
	soTimestamping = 37 // SO_TIMESTAMPING (SCM_TIMESTAMPING): three timespecs, [0] the software stamp
	sofRxSoftware  = 1 << 3
	sofSoftware    = 1 << 4
)

type rxConn struct {
	*net.TCPConn
	raw  syscall.RawConn
	last atomic.Int64
	// The reading goroutine's state: read, built once, is what raw.Read
	// calls; it reads into p and leaves its results in n, oobn and rerr.
	// A closure made per Read would move its captures to the heap, three
	// allocations for every chunk of every stream. rmu keeps concurrent
	// Reads (net.Conn allows them) from sharing that state.
	rmu     sync.Mutex
	read    func(fd uintptr) bool
	p       []byte
	n, oobn int
	rerr    error
	oob     [128]byte
}

func newRxConn(tc *net.TCPConn, raw syscall.RawConn) *rxConn {
	c := &rxConn{TCPConn: tc, raw: raw}
	c.read = func(fd uintptr) bool {
		for {
			c.n, c.oobn, c.rerr = recvmsg(fd, c.p, c.oob[:])
			if c.rerr != syscall.EINTR {
				return c.rerr != syscall.EAGAIN
			}
		}
	}
	return c
}

func (c *rxConn) LastReceived() int64 { return c.last.Load() }

func (c *rxConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.rmu.Lock()
	c.p = p
	err := c.raw.Read(c.read)
	c.p = nil
	n, oobn, rerr := c.n, c.oobn, c.rerr
	ns := int64(0)
	if err == nil && rerr == nil && n > 0 {
		ns = rxStamp(c.oob[:oobn])
	}
	c.rmu.Unlock()
	if err != nil {
		return 0, &net.OpError{Op: "read", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
	}
	if rerr != nil {
		return 0, &net.OpError{Op: "read", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: rerr}
	}
	if n == 0 {
		return 0, io.EOF
	}
	// Data without a stamp (the kernel turns stamping on for the whole
	// stack a moment after the first socket asks) is stamped as read, so
	// an older stamp never stands for newer bytes.
	if ns <= 0 {
		ns = time.Now().UnixNano()
	}
	c.last.Store(ns)
	return n, nil
}

// rxStamp finds the software receive stamp in control messages.
func rxStamp(oob []byte) int64 {
	hdr := syscall.CmsgLen(0)
	for len(oob) >= hdr {
		h := (*syscall.Cmsghdr)(unsafe.Pointer(&oob[0]))
		l := int(h.Len)
		if l < hdr || l > len(oob) {
			return 0
		}
		if h.Level == syscall.SOL_SOCKET && h.Type == soTimestamping && l >= hdr+3*int(unsafe.Sizeof(syscall.Timespec{})) {
			ts := (*syscall.Timespec)(unsafe.Pointer(&oob[hdr]))
			return ts.Nano()
		}
		oob = oob[min(syscall.CmsgSpace(l-hdr), len(oob)):]
	}
	return 0
}

// tcp is the connection under the stamps, for a vectored write (tcpOf).
func (c *rxConn) tcp() *net.TCPConn { return c.TCPConn }
