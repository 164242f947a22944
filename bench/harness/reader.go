package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"time"
)

// reader: the client's CPU per chunk beside the floor, from one run: the
// paced load at c streams through tokbench, then the same load read by
// the cheapest Go client possible — a goroutine per connection that writes
// the request and reads the answer's bytes, parsing nothing but its end.
// The ratio of the two CPU costs per chunk is tokbench's overhead.
func (h *harness) reader(c int, emit func(Result, error) error) error {
	tb, err := h.paced(c)
	if err := emit(tb, err); err != nil {
		return err
	}
	bare, err := h.bareReader(c)
	if err != nil {
		return err
	}
	if tb.CPUSPerMTok > 0 && bare.CPUSPerMTok > 0 {
		bare.Warnings = append(bare.Warnings, fmt.Sprintf("tokbench's CPU per chunk is %.2f× the bare reader's (%.2f against %.2f s per million chunks)",
			tb.CPUSPerMTok/bare.CPUSPerMTok, tb.CPUSPerMTok, bare.CPUSPerMTok))
	}
	return emit(bare, nil)
}

// bareReader reads the paced scenario's load (c streams, two answers
// each of 64 one-token chunks at its gap, starts spread over one answer)
// with a bare reader and measures its CPU per chunk.
func (h *harness) bareReader(c int) (Result, error) {
	const tokens, rounds = 64, 2
	gap := max(2*time.Millisecond, time.Duration(float64(c)/h.offered*float64(time.Second)))
	body, err := json.Marshal(map[string]any{"model": "fake", "stream": true, "max_tokens": tokens,
		"messages": []map[string]string{{"role": "user", "content": "hello there"}},
		"bench":    map[string]any{"ttft_us": 5000, "gap_us": gap.Microseconds(), "burst": 1}})
	if err != nil {
		return Result{}, err
	}
	addr := strings.TrimSuffix(strings.TrimPrefix(h.base, "http://"), "/v1")
	req := fmt.Appendf(nil, "POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", addr, len(body), body)
	conns := make([]net.Conn, c)
	for i := range conns {
		if conns[i], err = net.Dial("tcp", addr); err != nil {
			return Result{}, err
		}
		defer conns[i].Close()
	}
	answer := 5*time.Millisecond + tokens*gap
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed error
	cpu0, t0 := cpuTime(), time.Now()
	for i, conn := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(int64(answer) * int64(i) / int64(c)))
			buf := make([]byte, 2048)
			for range rounds {
				if _, err := conn.Write(req); err != nil {
					mu.Lock()
					failed = err
					mu.Unlock()
					return
				}
				var tail []byte
				for !bytes.HasSuffix(tail, []byte("0\r\n\r\n")) {
					n, err := conn.Read(buf)
					if err != nil {
						mu.Lock()
						failed = err
						mu.Unlock()
						return
					}
					tail = append(tail[:0], buf[max(0, n-5):n]...)
				}
			}
		}()
	}
	wg.Wait()
	wall, cpu := time.Since(t0), cpuTime()-cpu0
	if failed != nil {
		return Result{}, fmt.Errorf("bare reader: %w", failed)
	}
	n := c * rounds * tokens
	return Result{Scenario: "reader", Streams: c, Requests: c * rounds, Tokens: n, WallS: wall.Seconds(),
		TokensPerS: float64(n) / wall.Seconds(), CPUSPerMTok: cpu.Seconds() / float64(n) * 1e6,
		CPUUtil: cpu.Seconds() / (wall.Seconds() * float64(runtime.GOMAXPROCS(0)))}, nil
}
