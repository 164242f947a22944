package metrics

import (
	"strings"
	"testing"
)

// TestConnectionsCountRedirects: requests that followed a redirect are
// counted in the level's connections and said in its note, with or
// without connections opened during the level.
func TestConnectionsCountRedirects(t *testing.T) {
	recs := []Record{
		{OK: true, Phases: &Phases{HTTP: "HTTP/1.1", Reused: true, Redirects: 1}},
		{OK: true, Phases: &Phases{HTTP: "HTTP/1.1", Reused: true, Redirects: 2}},
		{OK: true, Phases: &Phases{HTTP: "HTTP/1.1", Reused: true}},
	}
	lv := Summarize(Load{Mode: ModeConcurrency, Concurrency: 1}, recs, 1)
	c := lv.Connections
	if c == nil || c.Redirected != 2 || c.Opened != 0 {
		t.Fatalf("connections %+v, want 2 redirected, none opened", c)
	}
	if n := c.Note(); !strings.HasPrefix(n, "2 requests followed a same-origin redirect") {
		t.Errorf("note %q", n)
	}
	recs[2].Phases.Reused = false // one connection opened by a request
	lv = Summarize(Load{Mode: ModeConcurrency, Concurrency: 1}, recs, 1)
	if n := lv.Connections.Note(); !strings.Contains(n, "1 connections opened by requests") || !strings.HasSuffix(n, "2 requests followed a same-origin redirect; their TTFT counts every hop") {
		t.Errorf("note %q", n)
	}
}
