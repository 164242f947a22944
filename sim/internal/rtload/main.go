// Command rtload is the load generator of sim's real-time benchmark: it
// opens N concurrent streaming chat completions against a tokbench
// simulated server and reads every stream to its end, so that the server's
// timing is measured with its clients in another process.
//
//	rtload -url http://127.0.0.1:8000/v1 -streams 500 -tokens 64
//
// On success it prints its own CPU time (user + system) as "cpu_us N", so
// the benchmark can charge the client's share of the machine; it exits 1
// naming the first errors when a stream fails.
package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
)

func main() {
	url := flag.String("url", "http://127.0.0.1:8000/v1", "base URL of the server")
	streams := flag.Int("streams", 100, "concurrent streams")
	tokens := flag.Int("tokens", 64, "max_tokens per request")
	words := flag.Int("prompt-words", 200, "prompt length in words")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *url, *streams, *tokens, *words); err != nil {
		fmt.Fprintln(os.Stderr, "rtload:", err)
		os.Exit(1)
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		fmt.Printf("cpu_us %d\n", (ru.Utime.Nano()+ru.Stime.Nano())/1000)
	}
}

func run(ctx context.Context, url string, streams, tokens, words int) error {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: streams, DisableCompression: true}}
	defer client.CloseIdleConnections()
	body := fmt.Sprintf(`{"messages":[{"role":"user","content":%q}],"max_tokens":%d,"stream":true}`,
		strings.TrimSpace(strings.Repeat("word ", words)), tokens)
	var mu sync.Mutex
	var errs []string
	var wg sync.WaitGroup
	for range streams {
		wg.Go(func() {
			if err := readStream(ctx, client, strings.TrimSuffix(url, "/")+"/chat/completions", body); err != nil {
				mu.Lock()
				errs = append(errs, err.Error())
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return fmt.Errorf("%d of %d streams failed: %s", len(errs), streams, strings.Join(errs[:min(len(errs), 3)], "; "))
	}
	return nil
}

var done = []byte("data: [DONE]")

func readStream(ctx context.Context, c *http.Client, url, body string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if bytes.Equal(sc.Bytes(), done) {
			return nil
		}
	}
	return fmt.Errorf("stream ended without [DONE]: %v", sc.Err())
}
