package sse

import (
	"fmt"
	"testing"
)

// loopReader serves the same bytes forever, in reads of at most n bytes.
type loopReader struct {
	b   []byte
	off int
	n   int
}

func (l *loopReader) Read(p []byte) (int, error) {
	if len(p) > l.n {
		p = p[:l.n]
	}
	k := copy(p, l.b[l.off:])
	l.off = (l.off + k) % len(l.b)
	return k, nil
}

// benchChunk is a typical OpenAI chat chunk as vLLM streams it.
const benchChunk = `data: {"id":"chatcmpl-0123456789abcdef","object":"chat.completion.chunk","created":1700000000,"model":"llama-3.1-8b","choices":[{"index":0,"delta":{"content":" world"},"logprobs":null,"finish_reason":null}]}` + "\n\n"

// BenchmarkDecoderChunk decodes one event per op from an endless stream,
// read in 4 KiB pieces as net/http hands them over.
//
//	go test -run '^$' -bench . -benchmem ./sse
func BenchmarkDecoderChunk(b *testing.B) {
	for _, read := range []int{4 << 10, 64} {
		b.Run(fmt.Sprintf("read=%d", read), func(b *testing.B) {
			var stream []byte
			for range 64 {
				stream = append(stream, benchChunk...)
			}
			d := NewDecoder(&loopReader{b: stream, n: read})
			b.ReportAllocs()
			b.SetBytes(int64(len(benchChunk)))
			for b.Loop() {
				if _, err := d.Next(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/token")
		})
	}
}

// benchLine is a typical Ollama /api/chat NDJSON line.
const benchLine = `{"model":"llama3.1:8b","created_at":"2026-11-29T20:00:00.123456789Z","message":{"role":"assistant","content":" world"},"done":false}` + "\n"

// BenchmarkLineDecoderChunk decodes one NDJSON line per op, as Ollama
// streams them, read in 4 KiB and in 64-byte pieces.
func BenchmarkLineDecoderChunk(b *testing.B) {
	for _, read := range []int{4 << 10, 64} {
		b.Run(fmt.Sprintf("read=%d", read), func(b *testing.B) {
			var stream []byte
			for range 64 {
				stream = append(stream, benchLine...)
			}
			d := NewLineDecoder(&loopReader{b: stream, n: read})
			b.ReportAllocs()
			b.SetBytes(int64(len(benchLine)))
			for b.Loop() {
				if _, err := d.Next(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/token")
		})
	}
}
