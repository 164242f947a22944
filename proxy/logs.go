package proxy

import (
	"cmp"
	"fmt"
	"log"
	"net/http"
	"runtime/debug"
	"slices"
	"strings"
	"sync"

	"github.com/tokbench/tokbench/api"
)

// Every line the proxy logs — its own, the panics it recovers, and
// net/http's server's (ErrorLog) — has the credentials it may quote taken
// out first, by api.Scrub, in every encoding the records are scrubbed of:
// a panic's value or a header net/http complains of may hold what a client
// or the upstream sent.

// credentials finds the secrets a logged line may hold: those of the
// requests being handled, and of the last ones ended (net/http may log a
// line of a request once its handler has returned), besides the
// upstream's own. A request's are read from its head only when a line is
// logged, so a request that logs nothing pays a map insert and delete.
type credentials struct {
	mu       sync.Mutex
	live     map[*http.Request]struct{}
	recent   [recentRequests]*http.Request
	next     int
	upstream []string
}

// recentRequests is how many ended requests' credentials are still
// scrubbed from the lines logged.
const recentRequests = 64

func newCredentials(upstream []string) *credentials {
	return &credentials{live: map[*http.Request]struct{}{}, upstream: upstream}
}

// enter adds a request being handled; leave moves it to the recent ones.
func (c *credentials) enter(r *http.Request) {
	c.mu.Lock()
	c.live[r] = struct{}{}
	c.mu.Unlock()
}

func (c *credentials) leave(r *http.Request) {
	c.mu.Lock()
	delete(c.live, r)
	c.recent[c.next] = r
	c.next = (c.next + 1) % recentRequests
	c.mu.Unlock()
}

// secrets are every credential known now and those of extra, the longest
// first (as api.RequestSecrets orders them, so no secret is cut in two by
// a shorter one inside it).
func (c *credentials) secrets(extra []string) []string {
	out := append(slices.Clone(extra), c.upstream...)
	c.mu.Lock()
	for r := range c.live {
		out = append(out, requestSecrets(r)...)
	}
	for _, r := range c.recent {
		if r != nil {
			out = append(out, requestSecrets(r)...)
		}
	}
	c.mu.Unlock()
	slices.SortFunc(out, func(a, b string) int { return cmp.Or(cmp.Compare(len(b), len(a)), strings.Compare(a, b)) })
	return slices.Compact(out)
}

// requestSecrets are the credentials a client's request carries: its
// head's and its URL's.
func requestSecrets(r *http.Request) []string {
	return api.RequestSecrets(r.Header, r.URL)
}

// logf logs one line through the standard logger, scrubbed of extra and
// of every credential known now.
func (p *Proxy) logf(extra []string, format string, args ...any) {
	log.Print(api.Scrub(fmt.Sprintf(format, args...), p.creds.secrets(extra)))
}

// ErrorLog is the logger for the http.Server that serves the proxy
// (http.Server.ErrorLog): net/http's lines — a handler's panic, a header
// it refuses ("invalid Content-Length of …", the upstream's value) — go to
// the standard logger's output scrubbed of every credential known.
func (p *Proxy) ErrorLog() *log.Logger {
	return log.New(scrubbed{p}, log.Prefix(), log.Flags())
}

// scrubbed writes a logger's lines to the standard logger's output less
// the credentials the proxy knows.
type scrubbed struct{ p *Proxy }

func (s scrubbed) Write(b []byte) (int, error) {
	_, err := log.Writer().Write([]byte(api.Scrub(string(b), s.p.creds.secrets(nil))))
	return len(b), err
}

// abortOnPanic is ServeHTTP's: a panic serving r is logged here, scrubbed
// (net/http's server would log its value as it is), and the connection is
// then cut as net/http cuts it, by http.ErrAbortHandler, which it does
// not log again.
func (p *Proxy) abortOnPanic(r *http.Request) {
	v := recover()
	if v == nil {
		return
	}
	if v != http.ErrAbortHandler {
		p.logf(requestSecrets(r), "tokbench proxy: panic serving %s %s from %s: %v\n%s", r.Method, r.URL.Path, r.RemoteAddr, v, debug.Stack())
	}
	panic(http.ErrAbortHandler)
}

// recordPanic is a record's making's: a panic is logged, scrubbed of the
// request's credentials, and the proxy goes on.
func (p *Proxy) recordPanic(secrets func() []string) {
	if v := recover(); v != nil {
		p.logf(secrets(), "tokbench proxy: making a record panicked: %v\n%s", v, debug.Stack())
	}
}
