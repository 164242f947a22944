// Package deploy holds the container and Kubernetes definitions; its test
// checks that the manifests parse and that their shard arithmetic matches
// what `tokbench bench --shard` and `tokbench merge` do.
package deploy

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/tokbench/tokbench/live"
	"github.com/tokbench/tokbench/load"
	"github.com/tokbench/tokbench/metrics"
)

type job struct {
	Kind string `yaml:"kind"`
	Spec struct {
		CompletionMode string `yaml:"completionMode"`
		Completions    int    `yaml:"completions"`
		Parallelism    int    `yaml:"parallelism"`
		Template       struct {
			Spec struct {
				Containers []struct {
					Args []string `yaml:"args"`
				} `yaml:"containers"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

func readJob(t *testing.T, path string) job {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var j job
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	if err := dec.Decode(&j); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if j.Kind != "Job" || len(j.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("%s: not a one-container Job", path)
	}
	return j
}

func arg(args []string, name string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

func TestShardJobMatchesShardArithmetic(t *testing.T) {
	j := readJob(t, "k8s/bench-job.yaml")
	n := j.Spec.Completions
	if j.Spec.CompletionMode != "Indexed" || n < 2 || j.Spec.Parallelism != n {
		t.Fatalf("bench job: mode %q, completions %d, parallelism %d", j.Spec.CompletionMode, n, j.Spec.Parallelism)
	}
	args := j.Spec.Template.Spec.Containers[0].Args
	shard := arg(args, "--shard")
	if shard != "$(JOB_COMPLETION_INDEX)/"+strconv.Itoa(n) {
		t.Fatalf("--shard=%q, want $(JOB_COMPLETION_INDEX)/%d", shard, n)
	}
	if arg(args, "--start-at") == "" || !strings.Contains(arg(args, "--out"), "$(JOB_COMPLETION_INDEX)") {
		t.Errorf("shards need --start-at and a per-index --out: %v", args)
	}
	// Every index the Job hands out is a valid shard, and the shards' parts
	// of each level add up to the level.
	var levels []int
	for _, c := range strings.Split(arg(args, "--concurrency"), ",") {
		v, err := strconv.Atoi(c)
		if err != nil {
			t.Fatalf("--concurrency %q", arg(args, "--concurrency"))
		}
		levels = append(levels, v)
	}
	for _, c := range levels {
		sum := 0
		for i := 0; i < n; i++ {
			sh, err := load.ParseShard(strings.ReplaceAll(shard, "$(JOB_COMPLETION_INDEX)", strconv.Itoa(i)))
			if err != nil {
				t.Fatal(err)
			}
			sum += sh.Part(c)
			if sh.Part(c) == 0 {
				t.Errorf("shard %d of %d gets no user at concurrency %d", i, n, c)
			}
		}
		if sum != c {
			t.Errorf("shards of concurrency %d add up to %d", c, sum)
		}
	}
	// The merge job reads exactly the directories the shards write.
	m := readJob(t, "k8s/merge-job.yaml")
	margs := m.Spec.Template.Spec.Containers[0].Args
	out := arg(args, "--out")
	var dirs []string
	for _, a := range margs[1:] {
		if !strings.HasPrefix(a, "--") {
			dirs = append(dirs, a)
		}
	}
	if margs[0] != "merge" || len(dirs) != n {
		t.Fatalf("merge job args %v: want merge and %d directories", margs, n)
	}
	for i, d := range dirs {
		if want := strings.ReplaceAll(out, "$(JOB_COMPLETION_INDEX)", strconv.Itoa(i)); d != want {
			t.Errorf("merge reads %s, shard %d writes %s", d, i, want)
		}
	}
}

func TestDockerfileBuildsStaticBinary(t *testing.T) {
	b, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	df := string(b)
	if !regexp.MustCompile(`CGO_ENABLED=0 go build .* \./cmd/tokbench`).MatchString(df) || !strings.Contains(df, "distroless/static") {
		t.Error("Dockerfile does not build a static tokbench into a distroless image")
	}
	if !strings.Contains(df, "USER nonroot") {
		t.Error("Dockerfile runs as root")
	}
}

// TestProxySidecar: the sidecar example runs tokbench proxy in front of
// vLLM on the pod's loopback, the Service sends traffic to the proxy's
// port, the pod outlives the proxy's grace, and every query of the
// Grafana dashboard names a series the proxy's exporter serves.
func TestProxySidecar(t *testing.T) {
	b, err := os.ReadFile("k8s/proxy-sidecar.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	var dep struct {
		Kind string `yaml:"kind"`
		Spec struct {
			Template struct {
				Spec struct {
					Grace      int `yaml:"terminationGracePeriodSeconds"`
					Containers []struct {
						Name  string   `yaml:"name"`
						Args  []string `yaml:"args"`
						Ports []struct {
							Name string `yaml:"name"`
							Port int    `yaml:"containerPort"`
						} `yaml:"ports"`
					} `yaml:"containers"`
				} `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	var svc struct {
		Kind string `yaml:"kind"`
		Spec struct {
			Ports []struct {
				TargetPort string `yaml:"targetPort"`
			} `yaml:"ports"`
		} `yaml:"spec"`
	}
	if err := dec.Decode(&dep); err != nil {
		t.Fatal(err)
	}
	if err := dec.Decode(&svc); err != nil {
		t.Fatal(err)
	}
	cs := dep.Spec.Template.Spec.Containers
	if dep.Kind != "Deployment" || len(cs) != 2 || cs[1].Args[0] != "proxy" {
		t.Fatalf("not a vLLM Deployment with a proxy sidecar: %+v", dep)
	}
	px := cs[1]
	if arg(px.Args, "--upstream") != "http://127.0.0.1:8000/v1" || arg(px.Args, "--listen") != "0.0.0.0:8080" {
		t.Errorf("proxy args %v", px.Args)
	}
	grace, err := time.ParseDuration(arg(px.Args, "--grace"))
	if err != nil || time.Duration(dep.Spec.Template.Spec.Grace)*time.Second <= grace {
		t.Errorf("pod grace %d s, proxy --grace %v: the pod must outlive the streams", dep.Spec.Template.Spec.Grace, grace)
	}
	if svc.Kind != "Service" || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort != px.Ports[0].Name || px.Ports[0].Port != 8080 {
		t.Errorf("the Service does not send traffic to the proxy: %+v", svc)
	}

	raw, err := os.ReadFile("grafana/tokbench-proxy.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	e := live.New(func() float64 { return 0 })
	e.Observe(metrics.Record{OK: true, TTFTMs: 10, E2EMs: 50, OutputTokens: 5, ChunkMs: []float64{10, 50}, ChunkTokens: []int{1, 4}})
	rec := httptest.NewRecorder()
	e.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	served := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^# TYPE (\S+)`).FindAllStringSubmatch(rec.Body.String(), -1) {
		served[m[1]] = true
	}
	series := regexp.MustCompile(`tokbench_[a-z0-9_]+`)
	n := 0
	for _, p := range dash.Panels {
		for _, q := range p.Targets {
			for _, s := range series.FindAllString(q.Expr, -1) {
				n++
				if name := strings.TrimSuffix(s, "_bucket"); !served[name] {
					t.Errorf("the dashboard queries %s, which the exporter does not serve", s)
				}
			}
		}
	}
	if n < 6 {
		t.Errorf("%d series in the dashboard", n)
	}
}
