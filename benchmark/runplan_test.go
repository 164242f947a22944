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
