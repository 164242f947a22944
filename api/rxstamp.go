package api

import (
	"context"
	"net"
	"net/http/httptrace"
)

// traceConn records the connection a request got.
func traceConn(ctx context.Context, conn *net.Conn) context.Context {
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) { *conn = info.Conn },
	})
}
