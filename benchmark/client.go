package benchmark

import (
	"context"
	"net"
	"net/http"

	"github.com/tokbench/tokbench/api"
	"github.com/tokbench/tokbench/load"
	"github.com/tokbench/tokbench/tokenize"
	"github.com/tokbench/tokbench/wire"
)

// Client is what measures, as Run builds it: tokbench's transport, the
// HTTP client with the redirect policy, the API client and the load runner
// over them. The bench harness builds its clients here too, so it measures
// the code path bench measures with.
type Client struct {
	Transport *wire.Transport
	HTTP      *http.Client
	API       *api.Client
	Runner    *load.Runner
}

// NewTransport is the transport and HTTP client of o: tokbench's HTTP/1.1
// connections with kernel receive stamps (o.Dial replacing the dialer when
// set), HTTP/2 through net/http with o.HTTP2, o.TLS, and redirects refused
// or followed to the same origin.
func NewTransport(o ClientOptions) (*wire.Transport, *http.Client) {
	t := wire.NewTransport()
	if o.Dial != nil {
		t.Fallback.DialContext = o.Dial
	}
	if o.TLS != nil {
		// A copy: net/http's HTTP/2 set-up rewrites NextProtos in place.
		t.Fallback.TLSClientConfig = o.TLS.Clone()
	}
	t.HTTP2 = o.HTTP2
	// Redirects are not followed unless asked, and then only to the same
	// origin: a POST would become a GET, and the API key would go
	// wherever the server points (see api's "redirect").
	c := &http.Client{Transport: t, CheckRedirect: api.RefuseRedirects}
	if o.FollowRedirects {
		c.CheckRedirect = api.FollowSameOrigin
	}
	return t, c
}

// NewClient is the whole measuring client of o for adapter at base; header
// goes with every request, secrets are scrubbed from what it records, tok
// counts output tokens a server does not report.
func NewClient(o ClientOptions, adapter api.Adapter, base string, header http.Header, secrets []string, tok tokenize.Tokenizer) *Client {
	t, h := NewTransport(o)
	return newClient(o, t, h, adapter, base, header, secrets, tok)
}

func newClient(o ClientOptions, t *wire.Transport, h *http.Client, adapter api.Adapter, base string, header http.Header, secrets []string, tok tokenize.Tokenizer) *Client {
	a := &api.Client{
		HTTP: h, Adapter: adapter, BaseURL: base,
		Header: header, Secrets: secrets, StallTimeout: o.StallTimeout,
		CountSetup: o.Cold,
		// Refused redirects need nothing of http.Client (NewTransport).
		Direct: !o.FollowRedirects && h.Jar == nil && h.Timeout == 0,
	}
	r := &load.Runner{Client: a, Tokenizer: tok, Timeout: o.Timeout, Grace: o.Grace,
		Retry: o.Retry, MaxErrorRate: o.MaxErrorRate, Cold: o.Cold, KeepAwake: o.KeepAwake}
	return &Client{Transport: t, HTTP: h, API: a, Runner: r}
}

// dialFunc is a dialer's DialContext.
type dialFunc = func(ctx context.Context, network, addr string) (net.Conn, error)
