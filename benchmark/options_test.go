package benchmark

import (
	"strings"
	"testing"
	"time"

	"github.com/tokbench/tokbench/metrics"
)

func TestDefaultOptionsPlan(t *testing.T) {
	o := DefaultOptions()
	o.Getenv = func(string) string { return "" }
	p, err := o.Plan()
	if err != nil {
		t.Fatal(err)
	}
	var users []int
	for _, lv := range p.Levels {
		users = append(users, lv.Load.Concurrency)
	}
	if len(users) != 3 || users[0] != 1 || users[1] != 4 || users[2] != 16 {
		t.Fatalf("levels %v, want users 1, 4, 16", users)
	}
	if p.Levels[2].Requests != 64 || p.Workload.InputTokens != 512 || p.Workload.OutputTokens != 128 {
		t.Fatalf("level 16 sends %d requests of %d/%d tokens, want 64 of 512/128",
			p.Levels[2].Requests, p.Workload.InputTokens, p.Workload.OutputTokens)
	}
	if p.Config.Concurrency[2] != 16 || p.Config.Load.Workload != "synthetic" || p.Meta["input_tokens"] != "512" {
		t.Fatalf("config %+v meta %v", p.Config, p.Meta)
	}
}

func TestOptionsPlanNamesTheFlag(t *testing.T) {
	for _, tc := range []struct {
		name  string
		set   func(*Options)
		given []string
		want  string
	}{
		{"rate and concurrency", func(o *Options) { o.Rate = "2" }, []string{"concurrency"}, "--rate:"},
		{"burstiness without rate", func(o *Options) {}, []string{"burstiness"}, "--burstiness: applies to open-loop"},
		{"bad list", func(o *Options) { o.Concurrency = "1,x" }, nil, `--concurrency: "x" is not a whole number`},
		{"bad rate", func(o *Options) { o.Rate = "0" }, nil, `--rate: "0" is not a positive number`},
		{"header", func(o *Options) { o.Headers = []string{"Authorization Bearer sk-secret-123"} }, nil, "--header: want 'Name: value'"},
		{"unset key env", func(o *Options) { o.APIKeyEnv = "NOPE" }, []string{"api-key-env"}, "--api-key-env: $NOPE is not set"},
		{"sweep and rate", func(o *Options) { o.Sweep, o.Rate = "auto", "1" }, nil, "--sweep: auto sweeps concurrency"},
		{"lockstep and ramp", func(o *Options) { o.Lockstep, o.RampUp = true, 1e9 }, nil, "--lockstep:"},
		{"start-at", func(o *Options) { o.StartAt = "tomorrow" }, nil, "--start-at: want an RFC 3339"},
		{"tiny windows", func(o *Options) { o.SummaryEvery = time.Millisecond }, nil, "--summary-every: want 1s or more"},
		{"local without a server", func(o *Options) { o.Hardware = "local" }, nil, "--hardware local: judges a server"},
		{"gguf without hardware", func(o *Options) { o.URL, o.GGUF = "http://127.0.0.1:1/v1", "m.gguf" }, nil, "--gguf: gives the model"},
		{"trace speed without trace", func(o *Options) {}, []string{"trace-speed"}, "--trace-speed: applies to a replayed trace"},
		{"trace and concurrency", func(o *Options) { o.Trace = "t.jsonl" }, []string{"concurrency"}, "--concurrency: a --trace run"},
		{"missing trace", func(o *Options) { o.Trace = "/nonexistent/t.jsonl" }, nil, "--trace: open /nonexistent/t.jsonl"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := DefaultOptions()
			o.Getenv = func(string) string { return "" }
			tc.set(&o)
			o.Given = func(f string) bool {
				for _, g := range tc.given {
					if g == f {
						return true
					}
				}
				return false
			}
			_, err := o.Plan()
			if !IsInputError(err) || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("err %v, want an InputError starting %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "sk-secret") {
				t.Fatalf("the error shows the secret: %v", err)
			}
		})
	}
}

func TestOptionsProfileFillsWhatIsNotGiven(t *testing.T) {
	o := DefaultOptions()
	o.Profile, o.OutputTokens = "agent", "64"
	o.Getenv = func(k string) string { return map[string]string{"OPENAI_API_KEY": " k-1 "}[k] }
	o.Given = func(f string) bool { return f == "output-tokens" }
	p, err := o.Plan()
	if err != nil {
		t.Fatal(err)
	}
	if p.Levels[0].Steps < 2 || len(p.SLOs) == 0 || p.Profile != "agent" {
		t.Fatalf("agent profile: steps %d, %d SLOs, profile %q", p.Levels[0].Steps, len(p.SLOs), p.Profile)
	}
	if p.Workload.OutputTokens != 64 {
		t.Fatalf("output tokens %d: the given --output-tokens 64 must win over the profile", p.Workload.OutputTokens)
	}
	if p.APIKey != "k-1" || p.Levels[0].Load.Mode != metrics.ModeConcurrency {
		t.Fatalf("key %q mode %s", p.APIKey, p.Levels[0].Load.Mode)
	}
}
