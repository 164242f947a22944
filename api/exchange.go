package api

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/tokbench/tokbench/wire"
)

// Exchange is one measured request's way from its hand-over to the
// transport to its answer's end: t0, the phases on one clock, the clock
// its body's bytes are stamped by, and the failure class at each step.
// Client.DoPrepared runs one for each request it sends, and tokbench
// proxy one for each completion it forwards, so the two cannot disagree
// on an instant or a class. The steps, in order:
//
//	x, ctx := NewExchange(ctx, resp) // send the request on ctx
//	x.Answered(handed, countSetup, hresp, err)
//	err != nil:            x.FailTransport(ctx, err)
//	not 2xx:               x.FailHTTP(hresp, method, path, body)
//	2xx:                   clock := x.Clock(); if x.Plain(hresp) { decode; x.Ended(…) }
//
// An Exchange is used by one goroutine at a time.
type Exchange struct {
	resp   *Response
	trace  requestTrace
	conn   net.Conn
	kernel bool
}

// NewExchange follows a request sent on the returned context, whose
// outcome resp records.
func NewExchange(ctx context.Context, resp *Response) (*Exchange, context.Context) {
	x := &Exchange{resp: resp}
	return x, x.trace.context(ctx)
}

// Answered records the transport's answer to the request (hresp, or
// err when none came), handed to the transport at handed: t0 is the
// instant its bytes went to an open connection (handed with countSetup,
// or when no write was seen), the phases on one clock that never goes
// back from t0 to the write and the first byte, and the status. An
// HTTP/1.1 answer's first byte is the kernel's receive stamp (HTTP/2
// streams share their connection's reads).
func (x *Exchange) Answered(handed time.Time, countSetup bool, hresp *http.Response, err error) {
	resp := x.resp
	x.kernel = err == nil && hresp.ProtoMajor == 1
	p, conn := x.trace.finish(x.kernel)
	x.conn = conn
	resp.Start = p.Sent()
	if countSetup || resp.Start.IsZero() {
		resp.Start = handed
	}
	if err == nil {
		p.Settle(hresp, resp.Start)
		resp.Status = hresp.StatusCode
	}
	resp.Phases = p
}

// FailTransport fails a request that got no answer (see
// ClassifyTransport), ending it now.
func (x *Exchange) FailTransport(ctx context.Context, err error) {
	x.done()
	x.resp.fail(ClassifyTransport(ctx, err), "%s", err)
}

// FailHTTP fails an answer that is not a 2xx, sent to method and path,
// ending it now unless its end was set: a redirect (3xx: not followed,
// a POST would turn into a GET and the key go along to wherever it
// points) is its own class, an error HTTPClass(status) with the message
// of body, the first bytes of the answer. The path says which endpoint
// refused (a 404 is most often a wrong base URL or --api); the query,
// which may hold a key, stays out.
func (x *Exchange) FailHTTP(hresp *http.Response, method, path string, body []byte) {
	resp := x.resp
	x.done()
	if hresp.StatusCode >= 300 && hresp.StatusCode < 400 {
		why := x.trace.refusal()
		if why == "" {
			why = "not followed"
		}
		resp.fail(ClassRedirect, "HTTP %d: redirected to %s, %s (use the URL it points at)", hresp.StatusCode,
			RedactURL(hresp.Header.Get("Location")), why)
		return
	}
	resp.RetryAfter = hresp.Header.Get("Retry-After")
	resp.fail(HTTPClass(hresp.StatusCode), "HTTP %d from %s %s: %s", hresp.StatusCode, method, path, ErrorMessage(body))
}

// Clock is how the arrivals of a 2xx answer's bytes are stamped: the
// kernel's receive stamps where the connection keeps them (the answer
// came over HTTP/1.1), else nil (the instant they were read).
func (x *Exchange) Clock() func() time.Time {
	var clock func() time.Time
	if x.kernel {
		clock = wire.ArrivalClock(x.conn, x.resp.Phases.FirstByte)
	}
	x.resp.KernelStamps = clock != nil
	return clock
}

// Plain reports whether a 2xx answer's body is the protocol's plain
// events; an encoded one (Content-Encoding: a proxy on the way that
// compresses streams although tokbench asks for none) no decoder can
// read, and fails the request now.
func (x *Exchange) Plain(hresp *http.Response) bool {
	enc := hresp.Header.Get("Content-Encoding")
	if enc == "" || strings.EqualFold(enc, "identity") || hresp.Uncompressed {
		return true
	}
	x.done()
	x.resp.fail(ClassEncodedStream, "the answer is %s-encoded (Content-Encoding), not a plain stream: a proxy compressing it?", enc)
	return false
}

// Ended classifies the end of an answer whose body was decoded into the
// response. When the decoder failed, cut (a cause only the caller knows:
// the request's context ended, a stall timer closed the body) is the
// class, with why; else an answer without an output token is
// empty_response. contentType, the answer's, says what came instead of a
// stream when it carried no token ("" for an answer that is one JSON
// document on purpose). The answer ends now unless its end was set.
func (x *Exchange) Ended(cut Class, why, contentType string) {
	resp := x.resp
	x.done()
	if resp.ErrorClass != "" {
		if cut != "" {
			resp.ErrorClass = ""
			resp.fail(cut, "%s", why)
		} else if len(resp.Chunks) == 0 && resp.Embedding == nil {
			resp.Error += notAStream(contentType)
		}
		return
	}
	if len(resp.Chunks) == 0 && resp.Embedding == nil {
		resp.fail(ClassEmptyResponse, "the stream carried no output tokens%s", notAStream(contentType))
	}
	cachedFromTimings(resp)
}

// CtxCut is the cut Ended takes when ctx, the request's, has ended: a
// timeout at its deadline, else an interruption; "" while it runs.
func CtxCut(ctx context.Context) (Class, string) {
	if c := ctxClass(ctx); c != "" {
		return c, fmt.Sprintf("%s while streaming", ctx.Err())
	}
	return "", ""
}

func (x *Exchange) done() {
	if x.resp.Done.IsZero() {
		x.resp.Done = time.Now()
	}
}

// ClassError is a read error that names its failure class: a reader
// that ends a body with one (a stream cut for going on too long) has the
// decoder fail the request with Class and the error's text.
type ClassError struct {
	Class Class
	Msg   string
}

func (e *ClassError) Error() string { return e.Msg }

// classOf is the class a ClassError in err's chain names, or "".
func classOf(err error) Class {
	if ce, ok := errors.AsType[*ClassError](err); ok {
		return ce.Class
	}
	return ""
}
