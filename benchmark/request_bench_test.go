package benchmark

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/tokbench/tokbench/api"
	"github.com/tokbench/tokbench/load"
	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/tokenize"
)

// BenchmarkOpenLoopRequest sends open-loop requests of one output token, as
// fast as the pacer lets them go, through the client bench builds (tokbench's
// HTTP/1.1 transport, kernel receive stamps) to a loopback server that
// answers each with a prepared stream and allocates nothing per request. Its
// allocs/request and B/request are the client's: what a request costs the
// garbage collector, which at thousands of requests a second on one processor
// decides how late sends go.
//
//	go test -run '^$' -bench OpenLoopRequest -count 6 ./benchmark
func BenchmarkOpenLoopRequest(b *testing.B) {
	const requests = 2000
	addr, stop := rawStreamServer(b)
	defer stop()
	tok, err := tokenize.Get("cl100k_base")
	if err != nil {
		b.Fatal(err)
	}
	c := NewClient(ClientOptions{Timeout: 10 * time.Second}, api.OpenAI{Chat: true}, "http://"+addr+"/v1", nil, nil, tok)
	defer c.Transport.CloseIdleConnections()
	lv := load.Level{Load: metrics.Load{Mode: metrics.ModeRate, RateRPS: 1e6, Arrival: load.ArrivalConstant}, Requests: requests}
	src := oneTokenSource{}
	// A first level opens the connections the measured ones reuse.
	if _, err := c.Runner.RunLevel(context.Background(), 0, lv, src); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for b.Loop() {
		res, err := c.Runner.RunLevel(context.Background(), 0, lv, src)
		if err != nil || res.Level.Requests.Completed != requests {
			b.Fatalf("level: %v, %+v", err, res.Level.Requests)
		}
	}
	runtime.ReadMemStats(&m1)
	n := float64(b.N) * requests
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/request")
	b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/n, "allocs/request")
	b.ReportMetric(float64(m1.TotalAlloc-m0.TotalAlloc)/n, "B/request")
}

type oneTokenSource struct{}

func (oneTokenSource) Request(int) (*api.Request, int) {
	return &api.Request{Model: "m", MaxTokens: 1, Messages: []api.Message{{Role: "user", Content: "hello there"}}}, 2
}

// rawStreamServer listens on loopback and answers every request on a
// connection with the same chat stream of one token and usage, reading the
// request with a reused buffer: nothing it does per request allocates.
func rawStreamServer(b *testing.B) (string, func()) {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	const head = `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,`
	body := head + `"delta":{"content":" the"},"finish_reason":null}]}` + "\n\n" +
		head + `"delta":{},"finish_reason":"length"}]}` + "\n\n" +
		`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":2,"completion_tokens":1}}` + "\n\ndata: [DONE]\n\n"
	answer := []byte(fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n%s", len(body), body))
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				br := bufio.NewReaderSize(conn, 4<<10)
				for {
					length := 0
					for {
						line, err := br.ReadSlice('\n')
						if err != nil {
							return
						}
						if len(line) <= 2 {
							break
						}
						if k, v, ok := bytes.Cut(line, []byte(":")); ok && bytes.EqualFold(k, []byte("Content-Length")) {
							length, _ = strconv.Atoi(string(bytes.TrimSpace(v)))
						}
					}
					if _, err := br.Discard(length); err != nil {
						return
					}
					if _, err := conn.Write(answer); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String(), func() { ln.Close() }
}
