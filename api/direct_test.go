package api

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tokbench/tokbench/wire"
)

// TestDirectSameOutcome: a Direct client (its transport called itself)
// and the same client through http.Client with RefuseRedirects give each
// request the same outcome: an answer, a redirect of each kind (with and
// without Location), an error status, a refused connection, a URL with a
// password; class, message, phases and chunks alike.
func TestDirectSameOutcome(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/ok/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n")
	})
	for _, code := range []int{301, 302, 303, 307, 308} {
		mux.HandleFunc(fmt.Sprintf("/r%d/chat/completions", code), func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/ok/chat/completions?k=s3cr3t", code)
		})
	}
	mux.HandleFunc("/bare307/chat/completions", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(307) })
	mux.HandleFunc("/busy/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":"overloaded"}`, http.StatusServiceUnavailable)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()

	bases := []string{srv.URL + "/ok", srv.URL + "/bare307", srv.URL + "/busy", closed + "/v1",
		"http://user:pa55word@" + ln.Addr().String() + "/v1"}
	for _, code := range []int{301, 302, 303, 307, 308} {
		bases = append(bases, fmt.Sprintf("%s/r%d", srv.URL, code))
	}
	for _, base := range bases {
		var got [2]*Response
		for i, direct := range []bool{false, true} {
			tr := wire.NewTransport()
			cl := &Client{HTTP: &http.Client{Transport: tr, CheckRedirect: RefuseRedirects}, Direct: direct,
				Adapter: OpenAI{Chat: true}, BaseURL: base}
			got[i] = cl.Do(context.Background(), &Request{Model: "m", MaxTokens: 4, Messages: []Message{{Role: "user", Content: "hi"}}})
			tr.CloseIdleConnections()
		}
		a, b := got[0], got[1]
		switch {
		case strings.Contains(base, "/r3") && (b.ErrorClass != ClassRedirect || !strings.Contains(b.Error, "/ok/chat/completions")):
			t.Errorf("%s: direct class %q (%s), want a redirect naming where it pointed", base, b.ErrorClass, b.Error)
		case strings.HasSuffix(base, "/ok") && (b.Failed() || len(b.Chunks) != 1):
			t.Errorf("%s: direct %q %s, %d chunks; want the answer's one chunk", base, b.ErrorClass, b.Error, len(b.Chunks))
		}
		if a.ErrorClass != b.ErrorClass || a.Error != b.Error || a.Status != b.Status || len(a.Chunks) != len(b.Chunks) {
			t.Errorf("%s: through http.Client %q %q status %d, %d chunks; direct %q %q status %d, %d chunks",
				base, a.ErrorClass, a.Error, a.Status, len(a.Chunks), b.ErrorClass, b.Error, b.Status, len(b.Chunks))
		}
		if a.Phases.Redirects != b.Phases.Redirects || a.Phases.Reconnects != b.Phases.Reconnects || a.Phases.Reused != b.Phases.Reused {
			t.Errorf("%s: phases differ: %+v and %+v", base, a.Phases, b.Phases)
		}
	}
}
