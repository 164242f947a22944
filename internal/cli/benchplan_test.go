package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/tokbench/tokbench/metrics"
)

// said is err as bench tells the user: its stderr line and exit code.
func said(err error) (string, int) {
	var b bytes.Buffer
	code := exitCode(&b, err)
	return strings.TrimSuffix(strings.TrimPrefix(b.String(), "tokbench: "), "\n"), code
}

func quietEnv(given ...string) planEnv {
	return planEnv{
		Getenv: func(string) string { return "" },
		Given: func(f string) bool {
			for _, g := range given {
				if g == f {
					return true
				}
			}
			return false
		},
	}
}

func TestDefaultOptionsPlan(t *testing.T) {
	p, err := defaultBenchOptions().plan(quietEnv())
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Load.Concurrency; len(got) != 3 || got[0] != 1 || got[1] != 4 || got[2] != 16 {
		t.Fatalf("levels %v, want users 1, 4, 16", got)
	}
	in, out := p.Workload.Lengths()
	if lv := p.Load.Levels(); lv[2].Requests != 64 || in != 512 || out != 128 {
		t.Fatalf("level 16 sends %d requests of %d/%d tokens, want 64 of 512/128", lv[2].Requests, in, out)
	}
	if c := p.Config(); c.Concurrency[2] != 16 || c.Load.Workload != "synthetic" || c.InputTokens != 512 {
		t.Fatalf("config %+v", c)
	}
}

func TestOptionsPlanNamesTheFlag(t *testing.T) {
	for _, tc := range []struct {
		name  string
		set   func(*benchOptions)
		given []string
		want  string
	}{
		{"rate and concurrency", func(o *benchOptions) { o.Rate = "2" }, []string{"concurrency"}, "--rate:"},
		{"burstiness without rate", func(o *benchOptions) {}, []string{"burstiness"}, "--burstiness: applies to open-loop"},
		{"bad list", func(o *benchOptions) { o.Concurrency = "1,x" }, nil, `--concurrency: "x" is not a whole number`},
		{"bad rate", func(o *benchOptions) { o.Rate = "0" }, nil, `--rate: "0" is not a positive number`},
		{"header", func(o *benchOptions) { o.Headers = []string{"Authorization Bearer sk-secret-123"} }, nil, "--header: want 'Name: value'"},
		{"unset key env", func(o *benchOptions) { o.APIKeyEnv = "NOPE" }, []string{"api-key-env"}, "--api-key-env: $NOPE is not set"},
		{"sweep and rate", func(o *benchOptions) { o.Sweep, o.Rate = "auto", "1" }, nil, "--sweep: auto sweeps concurrency"},
		{"lockstep and ramp", func(o *benchOptions) { o.Lockstep, o.RampUp = true, 1e9 }, nil, "--lockstep:"},
		{"start-at", func(o *benchOptions) { o.StartAt = "tomorrow" }, nil, "--start-at: want an RFC 3339"},
		{"tiny windows", func(o *benchOptions) { o.SummaryEvery = time.Millisecond }, nil, "--summary-every: want 1s or more"},
		{"local without a server", func(o *benchOptions) { o.Hardware = "local" }, nil, "--hardware local: judges a server"},
		{"gguf without hardware", func(o *benchOptions) { o.URL, o.GGUF = "http://127.0.0.1:1/v1", "m.gguf" }, nil, "--gguf: gives the model"},
		{"trace speed without trace", func(o *benchOptions) {}, []string{"trace-speed"}, "--trace-speed: applies to a replayed trace"},
		{"trace and concurrency", func(o *benchOptions) { o.Trace = "t.jsonl" }, []string{"concurrency"}, "--concurrency: a --trace run"},
		{"missing trace", func(o *benchOptions) { o.Trace = "/nonexistent/t.jsonl" }, nil, "--trace: open /nonexistent/t.jsonl"},
		{"negative retry", func(o *benchOptions) { o.Retry = -1 }, nil, "--retry: must be 0 or more"},
		{"negative grace", func(o *benchOptions) { o.Grace = -time.Second }, nil, "--grace: must not be negative"},
		{"bad energy price", func(o *benchOptions) { o.EnergyPrice = "0.1/MWh" }, nil, `--energy-price: unit "MWh"`},
		{"unknown hardware", func(o *benchOptions) { o.URL, o.Hardware = "http://127.0.0.1:1/v1", "h999" }, nil, `--hardware: unknown "h999"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := defaultBenchOptions()
			tc.set(&o)
			_, err := o.plan(quietEnv(tc.given...))
			msg, code := said(err)
			if code != ExitUsage || !strings.HasPrefix(msg, tc.want) {
				t.Fatalf("said %q, exit %d; want exit 2 and a line starting %q", msg, code, tc.want)
			}
			if strings.Contains(msg, "sk-secret") {
				t.Fatalf("the error shows the secret: %v", msg)
			}
		})
	}
}

func TestOptionsProfileFillsWhatIsNotGiven(t *testing.T) {
	o := defaultBenchOptions()
	o.Profile, o.OutputTokens = "agent", "64"
	env := quietEnv("output-tokens")
	env.Getenv = func(k string) string { return map[string]string{"OPENAI_API_KEY": " k-1 "}[k] }
	p, err := o.plan(env)
	if err != nil {
		t.Fatal(err)
	}
	lv := p.Load.Levels()
	if lv[0].Steps < 2 || len(p.SLOs) == 0 || p.Profile != "agent" {
		t.Fatalf("agent profile: steps %d, %d SLOs, profile %q", lv[0].Steps, len(p.SLOs), p.Profile)
	}
	if _, out := p.Workload.Lengths(); out != 64 {
		t.Fatalf("output tokens %d: the given --output-tokens 64 must win over the profile", out)
	}
	if p.APIKey != "k-1" || p.APIKeyEnv != "OPENAI_API_KEY" || lv[0].Load.Mode != metrics.ModeConcurrency {
		t.Fatalf("key %q from %q, mode %s", p.APIKey, p.APIKeyEnv, lv[0].Load.Mode)
	}
}
