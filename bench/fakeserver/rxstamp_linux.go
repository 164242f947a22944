package main

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// The server's own kernel receive stamps, the same mechanism as the
// client's (wire.ReceiveTimestampDialer), but on accepted connections:
// SO_TIMESTAMPING with software receive stamps, read with recvmsg(2), the
// stamp of each read kept. A request's arrival is the stamp of the read
// that delivered its last byte: the instant its last packet reached the
// machine (on loopback, the instant the client's write handed it over),
// whatever the server's own delay in reading it.
const (
	soTimestamping = 37 // SO_TIMESTAMPING (SCM_TIMESTAMPING): three timespecs, [0] the software stamp
	sofRxSoftware  = 1 << 3
	sofSoftware    = 1 << 4
)

// enableStamps asks the kernel for software receive stamps on c's socket.
// On a listening socket it also keeps the kernel stamping all received
// packets for as long as the server runs: the kernel turns stamping on for
// the whole stack only while some socket asks for it (and a moment after
// the first one does), so packets that arrive while no socket asks carry
// no stamp — the first requests of a fresh run would go unstamped.
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

// stampConn is an accepted TCP connection whose reads keep the kernel's
// receive stamp.
type stampConn struct {
	*net.TCPConn
	raw  syscall.RawConn
	last atomic.Int64 // the latest read's kernel stamp, unix ns; 0 when it carried none
	rmu  sync.Mutex
	oob  [128]byte
}

// stamped wraps an accepted connection so that its reads keep the kernel's
// receive stamps; c itself where the kernel refuses.
func stamped(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	raw, ok := enableStamps(tc)
	if !ok {
		return c
	}
	return &stampConn{TCPConn: tc, raw: raw}
}

// LastReceived is the kernel's receive instant of the data read last, in
// unix nanoseconds (realtime clock), 0 when that read carried no stamp.
func (c *stampConn) LastReceived() int64 { return c.last.Load() }

func (c *stampConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	var n, oobn int
	var rerr error
	err := c.raw.Read(func(fd uintptr) bool {
		for {
			n, oobn, _, _, rerr = syscall.Recvmsg(int(fd), p, c.oob[:], 0)
			if rerr != syscall.EINTR {
				return rerr != syscall.EAGAIN
			}
		}
	})
	if err == nil {
		err = rerr
	}
	if err != nil {
		return 0, &net.OpError{Op: "read", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
	}
	if n == 0 {
		return 0, io.EOF
	}
	c.last.Store(rxStamp(c.oob[:oobn]))
	return n, nil
}

// rxStamp finds the software receive stamp in control messages; 0 if none.
func rxStamp(oob []byte) int64 {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return 0
	}
	var ts [3]syscall.Timespec
	size := int(unsafe.Sizeof(ts))
	for _, m := range msgs {
		if m.Header.Level == syscall.SOL_SOCKET && m.Header.Type == soTimestamping && len(m.Data) >= size {
			copy(unsafe.Slice((*byte)(unsafe.Pointer(&ts[0])), size), m.Data)
			return ts[0].Nano()
		}
	}
	return 0
}

// keepStamping asks for receive stamps on the listening socket (see
// enableStamps), which the accepted sockets inherit.
func keepStamping(ln net.Listener) bool {
	sc, ok := ln.(syscall.Conn)
	if !ok {
		return false
	}
	_, ok = enableStamps(sc)
	return ok
}
