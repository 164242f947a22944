package wire

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// FuzzTransportAnswer: whatever bytes a server answers with, the transport
// gives an answer or an error, never a panic or a hang; and an answer that
// net/http reads whole (status 200 and up) reads the same here, status and
// body to the byte.
func FuzzTransportAnswer(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nhello world",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 204 No Content\r\n\r\n",
		"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end",
		"HTTP/1.0 200 OK\r\n\r\nold",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nabc",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nz\r\n",
		"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 7\r\nContent-Length: 4\r\n\r\nslow",
		"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n1c\r\ndata: {\"choices\":[]}\n\n\r\n0\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, answer []byte) {
		status, body, err := answerThroughTransport(t, answer)
		wantStatus, wantBody, wantErr := answerThroughNetHTTP(answer)
		if wantErr != nil || wantStatus < 200 {
			return // net/http refuses it (or stops at an interim answer): ours may do either
		}
		if err != nil {
			t.Fatalf("net/http reads %d %q; the transport fails: %v\nanswer %q", wantStatus, wantBody, err, answer)
		}
		if status != wantStatus || !bytes.Equal(body, wantBody) {
			t.Fatalf("transport %d %q, net/http %d %q\nanswer %q", status, body, wantStatus, wantBody, answer)
		}
	})
}

// answerThroughTransport sends a GET over an in-memory connection whose
// server reads the request, writes answer and hangs up.
func answerThroughTransport(t *testing.T, answer []byte) (int, []byte, error) {
	client, server := net.Pipe()
	defer client.Close()
	go func() {
		defer server.Close()
		if _, err := http.ReadRequest(bufio.NewReader(server)); err != nil {
			return
		}
		server.Write(answer)
	}()
	client.SetDeadline(time.Now().Add(5 * time.Second)) // a hang fails, not stalls
	tr := NewTransport()
	c := &h1conn{t: tr, key: "http://pipe:80", conn: client, br: bufio.NewReaderSize(client, h1Buffer)}
	req, _ := http.NewRequest("GET", "http://pipe/v1/models", nil)
	resp, err := c.roundTrip(context.Background(), req, nil)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the body hung: %v\nanswer %q", err, answer)
	}
	return resp.StatusCode, body, err
}

func answerThroughNetHTTP(answer []byte) (int, []byte, error) {
	req, _ := http.NewRequest("GET", "http://pipe/v1/models", nil)
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(answer)), req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}
