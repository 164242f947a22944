package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"testing"

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
		if err := run([]string{"-only", only, "-levels", "10", "-stress-levels", "10", "-request-levels", "10", "-json", out}, &stdout); err != nil {
			t.Fatalf("harness -only %s: %v\n%s", only, err, stdout.String())
		}
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
			if r.ErrP50Ms <= r.ErrMinMs || r.ErrP50Ms > 5 {
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
