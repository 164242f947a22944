package proxy

import (
	"io"
	"sync"
	"time"
)

// stampPipe hands the bytes the proxy forwards to a protocol decoder
// with the instant each read of them arrived: its ArrivalClock is what
// the sse decoders stamp events with. A send blocks only while the
// decoder is more than a few reads behind.
type stampPipe struct {
	ch   chan piece
	once sync.Once
	cur  piece // being read
	at   time.Time
}

type piece struct {
	b  []byte
	at time.Time
}

func newStampPipe() *stampPipe { return &stampPipe{ch: make(chan piece, 16)} }

// send queues a copy of b, read at at.
func (p *stampPipe) send(b []byte, at time.Time) {
	p.ch <- piece{b: append([]byte(nil), b...), at: at}
}

func (p *stampPipe) close() { p.once.Do(func() { close(p.ch) }) }

func (p *stampPipe) Read(b []byte) (int, error) {
	if len(p.cur.b) == 0 {
		pc, ok := <-p.ch
		if !ok {
			return 0, io.EOF
		}
		p.cur = pc
	}
	n := copy(b, p.cur.b)
	p.cur.b = p.cur.b[n:]
	p.at = p.cur.at
	return n, nil
}

// ArrivalClock stamps what was just read with the instant it reached the
// proxy.
func (p *stampPipe) ArrivalClock() func() time.Time { return func() time.Time { return p.at } }
