package deploy

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestDashboardAgainstPrometheus runs where .ci/real has started a real
// Prometheus (TOKBENCH_PROMETHEUS, its base URL) scraping a running bench
// and a running proxy (TOKBENCH_EXPOSITIONS, their /metrics URLs, comma
// separated): promtool passes both expositions, and every query of the
// Grafana dashboard, its variables' too, returns data through Prometheus's
// HTTP API, with the labels the dashboard groups by.
func TestDashboardAgainstPrometheus(t *testing.T) {
	prom, expo := os.Getenv("TOKBENCH_PROMETHEUS"), os.Getenv("TOKBENCH_EXPOSITIONS")
	if prom == "" || expo == "" {
		t.Skip("set TOKBENCH_PROMETHEUS and TOKBENCH_EXPOSITIONS (.ci/real does)")
	}
	client := &http.Client{Timeout: 10 * time.Second}
	for _, u := range strings.Split(expo, ",") {
		body := get(t, client, u)
		cmd := exec.Command("promtool", "check", "metrics")
		cmd.Stdin = bytes.NewReader(body)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool check metrics on %s: %v\n%s", u, err, out)
		}
	}
	raw, err := os.ReadFile("grafana/tokbench-proxy.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	labelValues := regexp.MustCompile(`^label_values\((\w+),\s*(\w+)\)$`)
	vars := 0
	for _, v := range dash.Templating.List {
		q, _ := v.Query.(string)
		m := labelValues.FindStringSubmatch(q)
		if m == nil {
			continue
		}
		vars++
		var res struct {
			Status string   `json:"status"`
			Data   []string `json:"data"`
		}
		query(t, client, prom+"/api/v1/label/"+m[2]+"/values?"+url.Values{"match[]": {m[1]}}.Encode(), &res, func() bool { return len(res.Data) > 0 })
		if len(res.Data) == 0 {
			t.Errorf("variable %s (%s): no values", v.Name, q)
		}
	}
	by := regexp.MustCompile(`by \(([^)]*)\)`)
	exprs := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			expr := strings.NewReplacer(`$model`, `.+`, `$api`, `.+`).Replace(tg.Expr)
			exprs++
			var res struct {
				Status string `json:"status"`
				Data   struct {
					Result []struct {
						Metric map[string]string `json:"metric"`
					} `json:"result"`
				} `json:"data"`
			}
			query(t, client, prom+"/api/v1/query?"+url.Values{"query": {expr}}.Encode(), &res, func() bool { return len(res.Data.Result) > 0 })
			if res.Status != "success" || len(res.Data.Result) == 0 {
				t.Errorf("panel %q: %s: status %q, %d series", p.Title, expr, res.Status, len(res.Data.Result))
				continue
			}
			if m := by.FindStringSubmatch(expr); m != nil {
				for _, l := range strings.Split(m[1], ",") {
					if l = strings.TrimSpace(l); l == "le" {
						continue
					}
					found := false
					for _, sr := range res.Data.Result {
						_, ok := sr.Metric[l]
						found = found || ok
					}
					if !found {
						t.Errorf("panel %q: %s: no series has the label %s it groups by", p.Title, expr, l)
					}
				}
			}
		}
	}
	if vars < 2 || exprs < 10 {
		t.Errorf("%d variables and %d queries evaluated; the dashboard has more", vars, exprs)
	}
	t.Logf("%d variables and %d dashboard queries returned data through Prometheus; promtool passed %s", vars, exprs, expo)
}

func get(t *testing.T, c *http.Client, u string) []byte {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %v %s", u, err, resp.Status)
	}
	return b
}

// query asks Prometheus until ok says the answer has data (rates need two
// scrapes), for at most 20 s.
func query(t *testing.T, c *http.Client, u string, v any, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		if err := json.Unmarshal(get(t, c, u), v); err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		if ok() || time.Now().After(deadline) {
			return
		}
	}
}
