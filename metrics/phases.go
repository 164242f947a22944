package metrics

import (
	"fmt"
	"sort"
	"strings"
)

// Phases are a request's way to the server, in milliseconds, in the
// vocabulary of Go's httptrace (k6's names in brackets): waiting for a
// connection, set-up included when one was opened [blocked]; DNS
// [looking_up], TCP connect [connecting], TLS handshake
// [tls_handshaking], each only when this request opened its connection;
// writing the request, from t0 to its last byte handed to the kernel
// [sending]; the answer's first byte, from t0 [waiting]. The first and
// last token are the record's TTFT and E2E. Measured before t0 (the
// default), ConnWaitMs and the set-up phases are not in TTFT; with
// --connections cold they are.
type Phases struct {
	ConnWaitMs  float64 `json:"conn_wait_ms"`
	DNSMs       float64 `json:"dns_ms,omitempty"`
	ConnectMs   float64 `json:"connect_ms,omitempty"`
	TLSMs       float64 `json:"tls_ms,omitempty"`
	WriteMs     float64 `json:"write_ms"`
	FirstByteMs float64 `json:"first_byte_ms"`
	// Reused is true when the request went on a connection an earlier
	// request (or the level's set-up) had opened.
	Reused bool `json:"reused"`
	// Reconnects counts sends on a new connection after a kept one turned
	// out closed before any byte of the answer.
	Reconnects int `json:"reconnects,omitempty"`
	// Redirects counts same-origin redirects followed (bench --redirects
	// same-origin); the phases are then the first hop's, and TTFT counts
	// every hop.
	Redirects int `json:"redirects,omitempty"`
	// HTTP and TLS are the protocol versions the request ran over.
	HTTP string `json:"http,omitempty"`
	TLS  string `json:"tls,omitempty"`
	// KernelStamps is true when the answer's instants are the kernel's
	// receive stamps, false when they are the instants tokbench read them
	// (HTTP/2, whose streams share a connection's reads; a kernel or
	// platform without SO_TIMESTAMPING).
	KernelStamps bool `json:"kernel_stamps"`
}

// Connections summarises a level's connections: how many the level opened
// before its clock started (Preopened) and while it ran (Opened: requests
// that did not find one open), the phases' distributions, and the
// protocols the requests ran over ("HTTP/1.1", "TLS 1.3"; several joined
// by commas).
type Connections struct {
	Preopened  int `json:"preopened"`
	Opened     int `json:"opened"`
	Reconnects int `json:"reconnects,omitempty"`
	// Redirected counts requests that followed a redirect.
	Redirected int `json:"redirected,omitempty"`
	// SetupInTTFT is true when the requests' clocks started before their
	// connection set-up (--connections cold).
	SetupInTTFT bool   `json:"setup_in_ttft,omitempty"`
	HTTP        string `json:"http,omitempty"`
	TLS         string `json:"tls,omitempty"`
	// ConnWaitMs, WriteMs and FirstByteMs are over every request that got
	// a connection; SetupMs (connection wait of the requests that opened
	// one), ConnectMs and TLSMs over those that opened one.
	ConnWaitMs  Stats  `json:"conn_wait_ms"`
	SetupMs     *Stats `json:"setup_ms,omitempty"`
	ConnectMs   *Stats `json:"connect_ms,omitempty"`
	TLSMs       *Stats `json:"tls_ms,omitempty"`
	WriteMs     Stats  `json:"write_ms"`
	FirstByteMs Stats  `json:"first_byte_ms"`
}

// slowWriteMs: a request whose bytes took longer than this to reach the
// kernel may carry the client's own delay in its TTFT.
const slowWriteMs = 1.0

// connAcc gathers the phases of the records that carry them; apply fills
// lv.Connections and warns when writing requests took long enough to
// reach the numbers.
type connAcc struct {
	wait, setup, connect, tlsHS, write, first Sample
	opened, reconnects, redirected            int
	httpV, tlsV                               map[string]bool
}

func (a *connAcc) add(r *Record) {
	p := r.Phases
	if p == nil {
		return
	}
	a.reconnects += p.Reconnects
	if p.Redirects > 0 {
		a.redirected++
	}
	if p.HTTP == "" { // no connection, or no answer on it
		return
	}
	if a.httpV == nil {
		a.httpV, a.tlsV = map[string]bool{}, map[string]bool{}
	}
	a.httpV[p.HTTP] = true
	if p.TLS != "" {
		a.tlsV[p.TLS] = true
	}
	a.wait.Add(p.ConnWaitMs)
	a.write.Add(p.WriteMs)
	a.first.Add(p.FirstByteMs)
	if !p.Reused {
		a.opened++
		a.setup.Add(p.ConnWaitMs)
		a.connect.Add(p.ConnectMs)
		if p.TLS != "" {
			a.tlsHS.Add(p.TLSMs)
		}
	}
}

// apply fills lv.Connections.
func (a *connAcc) apply(lv *Level) {
	if a.wait.Len() == 0 && lv.Connections == nil {
		return
	}
	c := lv.Connections
	if c == nil {
		c = &Connections{}
		lv.Connections = c
	}
	c.Opened, c.Reconnects, c.Redirected = a.opened, a.reconnects, a.redirected
	c.HTTP, c.TLS = joinKeys(a.httpV), joinKeys(a.tlsV)
	c.ConnWaitMs, c.WriteMs, c.FirstByteMs = a.wait.Stats(), a.write.Stats(), a.first.Stats()
	c.SetupMs, c.ConnectMs, c.TLSMs = a.setup.somePtr(), a.connect.somePtr(), a.tlsHS.somePtr()
	if c.WriteMs.P99 > slowWriteMs {
		lv.Warnings = append(lv.Warnings, fmt.Sprintf(
			"client self-check: writing a request took over %.0f ms for 1%% of requests or more (write_ms p99 %.2f ms, max %.2f ms): a busy client, or a server slow to take its requests; TTFT counts from the write's start",
			slowWriteMs, c.WriteMs.P99, c.WriteMs.Max))
	}
}

// Protocols are the HTTP and TLS versions the levels' answers came over,
// every level's together ("HTTP/1.1", "TLS 1.3"; several joined by commas).
func Protocols(levels []Level) (httpV, tlsV string) {
	h, t := map[string]bool{}, map[string]bool{}
	for _, lv := range levels {
		if c := lv.Connections; c != nil {
			for _, v := range strings.Split(c.HTTP, ", ") {
				h[v] = v != ""
			}
			for _, v := range strings.Split(c.TLS, ", ") {
				t[v] = v != ""
			}
		}
	}
	return joinKeys(h), joinKeys(t)
}

// joinKeys joins the keys set true, sorted.
func joinKeys(m map[string]bool) string {
	keys := make([]string, 0, len(m))
	for k, ok := range m {
		if ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return strings.Join(keys, ", ")
}

// Note is a one-line account of the connections a level opened while it
// ran, for the terminal; empty when it opened none.
func (c *Connections) Note() string {
	if c == nil {
		return ""
	}
	redir := ""
	if c.Redirected > 0 {
		redir = fmt.Sprintf("%d requests followed a same-origin redirect; their TTFT counts every hop", c.Redirected)
	}
	if c.Opened == 0 || c.SetupMs == nil {
		return redir
	}
	if redir != "" {
		redir = "; " + redir
	}
	where := "outside TTFT"
	if c.SetupInTTFT {
		where = "counted in TTFT (--connections cold)"
	}
	tlsPart := ""
	if c.TLSMs != nil {
		tlsPart = fmt.Sprintf(", TLS handshake p50 %s ms", Figure(c.TLSMs.P50))
	}
	re := ""
	if c.Reconnects > 0 {
		re = fmt.Sprintf("; %d requests sent again on a new connection", c.Reconnects)
	}
	return fmt.Sprintf("%d connections opened by requests during the level (set-up p50 %s ms, max %s ms%s), %s; %d opened before it%s%s",
		c.Opened, Figure(c.SetupMs.P50), Figure(c.SetupMs.Max), tlsPart, where, c.Preopened, re, redir)
}
