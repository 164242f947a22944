package proxy

import (
	"io"
	"sync"
	"time"
	"unsafe"
)

// stampLog keeps the bytes of an answer the proxy forwarded with the
// instant each read of them arrived, for a protocol decoder to read once
// the answer has ended: decoding costs the client's path nothing (no
// goroutine woken per chunk), and the decoder's ArrivalClock stamps each
// event with its read's instant, as the sse decoders stamp a live stream.
type stampLog struct {
	buf   []byte
	reads []logRead
	// end is how reading the answer ended, which Read returns after the
	// kept bytes (nil: io.EOF), so the decoder classifies it as it would
	// the live read's.
	end error
	// reading
	off  int // in buf
	next int // the read holding off
	at   time.Time
}

// logRead is one read: its bytes end at end in buf.
type logRead struct {
	end int
	at  time.Time
}

// logs are stampLogs to reuse: a stream's log is garbage once decoded,
// and 100 streams of a few KB each would make the collector run often.
var logs = sync.Pool{New: func() any { return new(stampLog) }}

// maxPooledLog: a log whose bytes, or whose reads' entries, take more
// than this is left to the collector.
const maxPooledLog = 256 << 10

// getLog is an empty log.
func getLog() *stampLog {
	l := logs.Get().(*stampLog)
	*l = stampLog{buf: l.buf[:0], reads: l.reads[:0]}
	return l
}

// release gives the log back once nothing reads it.
func (l *stampLog) release() {
	if cap(l.buf) <= maxPooledLog && int64(cap(l.reads)) <= maxPooledLog/logReadBytes {
		logs.Put(l)
	}
}

// add keeps a copy of b, read at at.
func (l *stampLog) add(b []byte, at time.Time) {
	l.buf = append(l.buf, b...)
	l.reads = append(l.reads, logRead{end: len(l.buf), at: at})
}

// keep keeps a copy of b without its instant (an answer read whole,
// whose last read's instant its reader keeps), in a buffer that grows
// to limit at most when what it keeps stays within limit.
func (l *stampLog) keep(b []byte, limit int64) {
	if need := len(l.buf) + len(b); need > cap(l.buf) {
		grown := make([]byte, len(l.buf), max(min(2*int64(cap(l.buf)), limit), int64(need)))
		copy(grown, l.buf)
		l.buf = grown
	}
	l.buf = append(l.buf, b...)
}

// size is the memory the log holds.
func (l *stampLog) size() int64 { return int64(cap(l.buf)) + int64(cap(l.reads))*logReadBytes }

const logReadBytes = int64(unsafe.Sizeof(logRead{}))

// Read reads the kept bytes up to the end of one read at a time, so the
// clock says when what it returns arrived.
func (l *stampLog) Read(b []byte) (int, error) {
	if l.next == len(l.reads) {
		if l.end != nil {
			return 0, l.end
		}
		return 0, io.EOF
	}
	r := l.reads[l.next]
	n := copy(b, l.buf[l.off:r.end])
	l.off += n
	l.at = r.at
	if l.off == r.end {
		l.next++
	}
	return n, nil
}

// ArrivalClock stamps what was just read with the instant it reached the
// proxy.
func (l *stampLog) ArrivalClock() func() time.Time { return func() time.Time { return l.at } }
