package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tokbench/tokbench/internal/busy"
	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/wire"
)

// TestHarnessPacedAndRequests runs the harness itself, small: the fake
// server is built and started as its own process, 10 paced streams and 10
// users of one-token answers run against it, and the figures come back
// whole. Every chunk carries the server's send instant, so a recorded
// arrival earlier than it would be a broken stamp: the smallest error must
// not be negative beyond clock-reading noise.
func TestHarnessPacedAndRequests(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the fake server")
	}
	out := filepath.Join(t.TempDir(), "results.json")
	var stdout bytes.Buffer
	for _, only := range []string{"paced", "stress", "requests"} {
		watch := busy.Start()
		if err := run([]string{"-only", only, "-levels", "10", "-stress-levels", "10", "-request-levels", "10", "-json", out}, &stdout); err != nil {
			t.Fatalf("harness -only %s: %v\n%s", only, err, stdout.String())
		}
		lag := watch.Stop()
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		var res []Result
		if err := json.Unmarshal(b, &res); err != nil || len(res) != 1 {
			t.Fatalf("results: %v %s", err, b)
		}
		r := res[0]
		var client struct {
			KernelStamps bool `json:"kernel_receive_stamps"`
		}
		if err := json.Unmarshal(r.Client, &client); err != nil || !client.KernelStamps && kernelStamps(t) {
			t.Errorf("%s: client block %s: want kernel receive stamps, as tokbench bench measures (%v)", only, r.Client, err)
		}
		r.Client = nil
		t.Logf("%s: %+v", only, r)
		if r.Failed != 0 {
			t.Errorf("%s: %d requests failed: %q", only, r.Failed, r.Warnings)
		}
		switch only {
		case "paced", "stress": // 10 streams × 2 rounds (at least 20 requests) × 64 tokens
			if r.Requests != 20 || r.Tokens != 20*64 {
				t.Errorf("%s: %d requests, %d tokens; want 20 and 1280", only, r.Requests, r.Tokens)
			}
			if r.ErrMinMs < -0.05 {
				t.Errorf("%s: a chunk stamped %.3f ms before the server wrote it", only, -r.ErrMinMs)
			}
			// How late the client reads is the machine's as much as its own.
			if r.ErrP50Ms <= r.ErrMinMs || (r.ErrP50Ms > 5 && lag.Judge(t, only+": chunk error p50 within 5 ms")) {
				t.Errorf("%s: chunk error p50 %.3f ms (min %.3f); want a small positive delay", only, r.ErrP50Ms, r.ErrMinMs)
			}
			if want := map[string]float64{"paced": 25000, "stress": 50000}[only]; r.Offered != want || r.SteadyFrom != 16 {
				t.Errorf("%s: offered %g tokens/s, steady figures from chunk %d; want %g and 16", only, r.Offered, r.SteadyFrom, want)
			}
		case "requests": // max(20 × 10, 2000) one-token answers
			if r.Requests != 2000 || r.Tokens != 2000 || r.ReqPerS <= 0 || r.CPUUsPerReq <= 0 {
				t.Errorf("requests: %+v", r)
			}
		}
	}
}

// TestHarnessFirst runs the first scenario small: 4 users on a fresh
// transport, two requests each, over plain HTTP and over HTTPS, each mode
// against a fake server process of its own. Every request must complete;
// the server must have accepted one connection per user (the second
// request of each user reuses its first one's), not one per request; and
// every TTFT error must be a finite number, with the true TTFT (the
// server's send instant of the first chunk − its receive stamp of the
// request) at least the 100 ms the server was told to wait.
func TestHarnessFirst(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the fake server")
	}
	out := filepath.Join(t.TempDir(), "results.json")
	var stdout bytes.Buffer
	if err := run([]string{"-only", "first", "-first-levels", "4", "-first-modes", "http,https", "-json", out}, &stdout); err != nil {
		t.Fatalf("harness -only first: %v\n%s", err, stdout.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var res []Result
	if err := json.Unmarshal(b, &res); err != nil || len(res) != 2 {
		t.Fatalf("results: %v %s", err, b)
	}
	for i, mode := range []string{"http", "https"} {
		r := res[i]
		r.Client = nil
		t.Logf("%s: %+v first %+v second %+v all %+v", mode, r, r.FirstReqErr, r.SecondReqErr, r.AllReqErr)
		if r.Scenario != "first" || r.Mode != mode || r.Streams != 4 {
			t.Errorf("result %d: scenario %q mode %q c=%d; want first, %s, 4", i, r.Scenario, r.Mode, r.Streams, mode)
		}
		if r.Requests != 8 || r.Failed != 0 || r.Tokens != 8*8 {
			t.Errorf("%s: %d requests, %d failed, %d tokens; want 8, 0, 64 (%q)", mode, r.Requests, r.Failed, r.Tokens, r.Warnings)
		}
		if r.Accepted != 4 {
			t.Errorf("%s: the server accepted %d connections for 4 users × 2 requests; want 4, one per user", mode, r.Accepted)
		}
		for _, g := range []struct {
			name string
			s    *Spread
			n    int
		}{{"first requests", r.FirstReqErr, 4}, {"second requests", r.SecondReqErr, 4}, {"all requests", r.AllReqErr, 8}} {
			if g.s == nil || g.s.N != g.n {
				t.Errorf("%s: TTFT error of %s: %+v; want %d requests", mode, g.name, g.s, g.n)
				continue
			}
			for _, v := range []float64{g.s.P50, g.s.P99, g.s.Max, g.s.Min} {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					t.Errorf("%s: TTFT error of %s: %+v is not finite", mode, g.name, g.s)
				}
			}
			// Recorded minus true is the request's way to the server and
			// the first chunk's way back: never negative beyond clock noise.
			if g.s.Min < -0.1 {
				t.Errorf("%s: TTFT error of %s: min %.3f ms; the client recorded a TTFT shorter than the server's", mode, g.name, g.s.Min)
			}
		}
		if r.TrueTTFTMinMs < 100 || r.TrueTTFTMaxMs < r.TrueTTFTMinMs {
			t.Errorf("%s: true TTFT %.3f–%.3f ms; want at least the server's 100 ms", mode, r.TrueTTFTMinMs, r.TrueTTFTMaxMs)
		}
		// The client's self-check may say a busy machine (the race
		// detector, other tests) made it late: that is a measurement of
		// this process, not a fault of the scenario. Any other warning is.
		for _, w := range r.Warnings {
			if !strings.HasPrefix(w, "client self-check:") {
				t.Errorf("%s: warning %q", mode, w)
			}
		}
	}
}

// TestParseStamp: the first chunk may carry the request's arrival, the
// others only their send instant.
func TestParseStamp(t *testing.T) {
	for _, c := range []struct {
		text          string
		first         bool
		sent, arrival int64
		ok            bool
	}{
		{" t1764444444123456789", false, 1764444444123456789, 0, true},
		{" t1764444444123456789", true, 1764444444123456789, 0, true},
		{" t1764444444123456789 r1764444444023456789", true, 1764444444123456789, 1764444444023456789, true},
		{" t1764444444123456789 r1764444444023456789", false, 0, 0, false},
		{" t1764444444123456789 rx", true, 0, 0, false},
		{" the", true, 0, 0, false},
	} {
		sent, arrival, err := parseStamp(c.text, c.first)
		if (err == nil) != c.ok || c.ok && (sent != c.sent || arrival != c.arrival) {
			t.Errorf("parseStamp(%q, %v) = %d, %d, %v; want %d, %d, ok %v", c.text, c.first, sent, arrival, err, c.sent, c.arrival, c.ok)
		}
	}
}

// TestSentRate: 5 sends 2 ms apart, recorded out of order, kept 500 req/s.
func TestSentRate(t *testing.T) {
	var recs []metrics.Record
	for _, off := range []float64{4, 0, 8, 2, 6} {
		recs = append(recs, metrics.Record{OffsetMs: 10 + off})
	}
	if got := sentRate(recs); got != 500 {
		t.Errorf("sentRate = %g, want 500", got)
	}
	if got := sentRate(recs[:1]); got != 0 {
		t.Errorf("one send: sentRate = %g, want 0", got)
	}
}

// kernelStamps reports whether this kernel grants software receive stamps:
// wire.ReceiveTimestampDialer returns a connection that keeps them only
// then; elsewhere bench falls back to read instants.
func kernelStamps(t *testing.T) bool {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := wire.ReceiveTimestampDialer(nil)(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, ok := c.(wire.ReceiveStamper)
	return ok
}

// TestHarnessSends runs the send scenario small (100 req/s, 400 requests)
// and checks that every request's wire lateness was found from the
// server's kernel receive stamp: each send matched, none reaching the
// server before its instant beyond clock-reading noise.
func TestHarnessSends(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the fake server")
	}
	res, stdout := runHarness(t, 1, "-only", "send", "-send-rates", "100", "-send-traces=false")
	s := res[0].Sends
	if s == nil || s.WireLate == nil {
		t.Fatalf("send 100/s: no wire lateness in %+v", res[0])
	}
	if s.WireLate.N != 400 || s.Unmatched != 0 {
		t.Errorf("send 100/s: %d sends matched to the server's stamps, %d not; want 400 and 0", s.WireLate.N, s.Unmatched)
	}
	if s.WireLate.Min < -0.05 {
		t.Errorf("send 100/s: a request reached the server %.3f ms before its instant", -s.WireLate.Min)
	}
	if s.LeadMs <= 0 || s.PacerShare <= 0 {
		t.Errorf("send 100/s: pacer lead %.3f ms, CPU share %.4f; want both above 0", s.LeadMs, s.PacerShare)
	}
	// The floor beside it: the bare sender's 400 sends, each matched, none
	// before its instant.
	if b := s.BareLate; b == nil || b.N != 400 || b.Min < -0.05 {
		t.Errorf("send 100/s: the bare sender's floor = %+v, want 400 sends, none early", b)
	}
	if b := s.SleepLate; b == nil || b.N != 400 || b.Min < -0.05 {
		t.Errorf("send 100/s: the sleeping floor = %+v, want 400 sends, none early", b)
	}
	t.Logf("%s", stdout)
}

// TestHarnessReader runs the reader scenario small: tokbench's paced level
// and the bare reader read the same 10 streams, and both report every
// chunk and a CPU cost per chunk to compare.
func TestHarnessReader(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the fake server")
	}
	res, stdout := runHarness(t, 2, "-only", "reader", "-reader-levels", "10")
	for _, r := range res {
		if r.Tokens != 10*2*64 || r.Failed != 0 || !(r.CPUSPerMTok > 0) {
			t.Errorf("%s: %d tokens, %d failed, %.2f CPU s per million; want 1280, 0 and a cost", r.Scenario, r.Tokens, r.Failed, r.CPUSPerMTok)
		}
	}
	if !strings.Contains(stdout, "the bare reader's") {
		t.Errorf("no ratio to the bare reader printed:\n%s", stdout)
	}
}

// runHarness runs the harness with args (-json added) and returns its
// results, which must number want.
func runHarness(t *testing.T, want int, args ...string) ([]Result, string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "results.json")
	var stdout bytes.Buffer
	if err := run(append(args, "-json", out), &stdout); err != nil {
		t.Fatalf("harness %v: %v\n%s", args, err, stdout.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var res []Result
	if err := json.Unmarshal(b, &res); err != nil || len(res) != want {
		t.Fatalf("results: %v %s", err, b)
	}
	return res, stdout.String()
}
