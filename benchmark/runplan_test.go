package benchmark

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunScrubsHeaderSecrets: a library caller's credential in a header
// is a secret though it is not in Plan.Secrets: a server that echoes it
// in its 401 leaves no trace of it in requests.jsonl or the summary.
func TestRunScrubsHeaderSecrets(t *testing.T) {
	const secret = "sk-library-caller-0123456789"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error":"bad key %s"}`, r.Header.Get("Authorization"))
	}))
	defer srv.Close()
	p := fakePlan(srv.URL, 8, 4)
	p.API = "openai-chat"
	p.Load.Concurrency, p.Load.Requests = []int{1}, 2
	p.Header = http.Header{"Authorization": {"Bearer " + secret}}
	out := filepath.Join(t.TempDir(), "run")
	s := runPlan(t, p, out)
	if s.Levels[0].Requests.Failed != 2 {
		t.Fatalf("%d of 2 failed, want both (401)", s.Levels[0].Requests.Failed)
	}
	entries, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(out, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), secret) {
			t.Errorf("%s holds the header's credential", e.Name())
		}
		if e.Name() == "requests.jsonl" && strings.Contains(string(b), "bad key") {
			seen++
		}
	}
	if seen == 0 {
		t.Error("requests.jsonl lacks the server's answer: the test saw nothing to scrub")
	}
}

// TestRunLeavesThePlan: the run completes its deployment with what the
// server says (its slots) on a copy: the plan's Physics is as given, so
// the plan can be run again against another server.
func TestRunLeavesThePlan(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/props":
			fmt.Fprint(w, `{"total_slots":4,"default_generation_settings":{"n_ctx":4096}}`)
		case "/completion":
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: {\"content\":\"a\",\"stop\":false}\n\n")
			fmt.Fprint(w, "data: {\"content\":\"\",\"stop\":true,\"tokens_predicted\":1,\"tokens_evaluated\":8}\n\n")
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	p := fakePlan(srv.URL, 8, 1)
	p.API = "auto"
	p.Load.Concurrency, p.Load.Requests = []int{1}, 1
	ph, _, err := ResolvePhysics(PhysicsInput{Model: "llama-3.1-8b", Quant: "bf16", Hardware: "a100-80gb"})
	if err != nil || ph == nil {
		t.Fatalf("ResolvePhysics: %v, %v", ph, err)
	}
	p.Physics = ph
	before := *ph
	runPlan(t, p, "")
	if *p.Physics != before {
		t.Errorf("the run changed the plan's physics: %+v, was %+v", *p.Physics, before)
	}
}
