package cli

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/tokbench/tokbench/benchmark"
	"github.com/tokbench/tokbench/metrics"
)

// planFromFlags is the plan bench makes of args (bench's own flags only).
func planFromFlags(t *testing.T, env map[string]string, args ...string) *benchmark.Plan {
	t.Helper()
	o := defaultBenchOptions()
	fl := pflag.NewFlagSet("bench", pflag.ContinueOnError)
	registerOptions(fl, &o)
	if err := fl.Parse(args); err != nil {
		t.Fatalf("%q: %v", args, err)
	}
	p, err := o.plan(planEnv{Given: fl.Changed, Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatalf("%q: %v", args, err)
	}
	return p
}

// planFields are the paths of a Plan's settable fields: its own, and
// those of the structs it is made of (Client.Retry, Load.Concurrency).
func planFields(t reflect.Type, prefix string) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		path := prefix + f.Name
		switch f.Type {
		case reflect.TypeFor[benchmark.SimOptions](), reflect.TypeFor[benchmark.ClientOptions](),
			reflect.TypeFor[benchmark.LevelSpec](), reflect.TypeFor[benchmark.Workload](), reflect.TypeFor[metrics.Prices]():
			out = append(out, planFields(f.Type, path+".")...)
		default:
			out = append(out, path)
		}
	}
	return out
}

// planField is the value at path in p.
func planField(p *benchmark.Plan, path string) any {
	v := reflect.ValueOf(p).Elem()
	for _, name := range strings.Split(path, ".") {
		v = v.FieldByName(name)
	}
	return v.Interface()
}

// TestEveryPlanFieldHasAFlag: each field of benchmark.Plan (and of the
// structs it holds) is set by a bench flag — the field bench makes of
// those flags differs from the one it makes without them — or is listed
// as one no flag sets, with the reason. A field added to the Plan fails
// here until bench can set it.
func TestEveryPlanFieldHasAFlag(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	rows := write("rows.jsonl", `{"prompt": "Say hello."}`+"\n"+`{"prompt": "Count to three."}`+"\n")
	corpus := write("corpus.txt", strings.Repeat("The quick brown fox jumps over the lazy dog. ", 200))
	trace := write("trace.jsonl", `{"timestamp": 0, "input_length": 10, "output_length": 4, "hash_ids": [0]}`+"\n"+
		`{"timestamp": 1000, "input_length": 12, "output_length": 6, "hash_ids": [1]}`+"\n")
	key := write("key", "k-9\n")
	tools := write("tools.json", `[{"name":"f","parameters":{"type":"object"}}]`)
	const server = "http://127.0.0.1:1/v1"
	traceArgs := []string{"--trace", trace, "--trace-format", "mooncake"}

	noFlag := map[string]string{
		"Levels":      "levels built by hand (the harness); bench's come from Load",
		"Client.Dial": "the harness's dialer",
		"Notes":       "warnings the plan gathers, not asked for",
		"Version":     "the tool's version",
	}
	byFlag := map[string][]string{
		"URL":                      {"--url", server},
		"Sim.Quant":                {"--quant", "fp8"},
		"Sim.Hardware":             {"--hardware", "a100-80gb"},
		"Sim.GPUs":                 {"--gpus", "2"},
		"Sim.Seed":                 {"--seed", "7"},
		"API":                      {"--api", "anthropic"},
		"Model":                    {"--model", "m"},
		"Header":                   {"--header", "X-Title: t"},
		"APIKey":                   {"--api-key-file", key},
		"Secrets":                  {"--header", "Authorization: Bearer t0k"},
		"APIKeyEnv":                {"--api-key-env", "MY_KEY"},
		"ContinuousUsage":          {"--continuous-usage", "off"},
		"LlamaCppMedia":            {"--api", "llamacpp", "--llamacpp-media", "image_data"},
		"IgnoreEOS":                {"--ignore-eos"},
		"ServerMetrics":            {"--server-metrics"},
		"GPUTelemetry":             {"--gpu-telemetry", "dcgm=http://127.0.0.1:9400", "--energy-price", "0.1/kWh"},
		"Client.Timeout":           {"--timeout", "1m"},
		"Client.StallTimeout":      {"--stall-timeout", "5s"},
		"Client.Grace":             {"--grace", "1s"},
		"Client.Retry":             {"--retry", "2"},
		"Client.MaxErrorRate":      {"--max-error-rate", "0.5"},
		"Client.Cold":              {"--connections", "cold"},
		"Client.KeepAwake":         {"--keep-awake"},
		"Client.HTTP2":             {"--http2"},
		"Client.TLS":               {"--insecure"},
		"Client.FollowRedirects":   {"--redirects", "same-origin"},
		"Load.Concurrency":         {"--concurrency", "2"},
		"Load.Rates":               {"--rate", "2"},
		"Load.Arrival":             {"--rate", "2", "--arrival", "constant"},
		"Load.Burstiness":          {"--rate", "2", "--arrival", "gamma", "--burstiness", "0.5"},
		"Load.MaxInFlight":         {"--rate", "2", "--max-concurrency", "3"},
		"Load.Requests":            {"--requests", "5"},
		"Load.Duration":            {"--duration", "30s"},
		"Load.Warmup":              {"--warmup", "0"},
		"Load.Seed":                {"--seed", "7"},
		"Load.InputTokens":         {"--input-tokens", "16,32"},
		"Load.Steps":               {"--workload", "agent", "--steps", "3"},
		"Load.ThinkTime":           {"--workload", "agent", "--think-time", "1s"},
		"Load.RampUp":              {"--ramp-up", "1s"},
		"Load.Lockstep":            {"--lockstep"},
		"Load.Shard":               {"--shard", "0/2", "--concurrency", "2"},
		"Load.SummaryEvery":        {"--summary-every", "5s"},
		"Load.Trace":               traceArgs,
		"Load.TraceSpeeds":         append(traceArgs, "--trace-speed", "2,4"),
		"Sweep":                    {"--sweep", "auto"},
		"Repeat":                   {"--repeat", "3"},
		"SLOs":                     {"--slo", "ttft_p95<=500ms"},
		"Prices.InputPerMillion":   {"--price-in", "1"},
		"Prices.OutputPerMillion":  {"--price-out", "2"},
		"Prices.GPUHour":           {"--gpu-hour-price", "3"},
		"Prices.GPUs":              {"--gpus", "2"},
		"Profile":                  {"--profile", "chat"},
		"StartAt":                  {"--start-at", "2030-01-02T03:04:05Z"},
		"Shard":                    {"--shard", "0/2", "--concurrency", "2"},
		"Workload.Inputs":          {"--input-tokens", "64"},
		"Workload.Output":          {"--output-tokens", "64"},
		"Workload.Rows":            {"--dataset", rows},
		"Workload.Corpus":          {"--dataset", corpus, "--dataset-format", "text"},
		"Workload.Dataset":         {"--dataset", rows},
		"Workload.DatasetFormat":   {"--dataset", rows},
		"Workload.CopyBudget":      {"--dataset", rows, "--dataset-budget", "1MiB"},
		"Workload.PrefixTokens":    {"--prefix-tokens", "8"},
		"Workload.PrefixGroups":    {"--prefix-groups", "2"},
		"Workload.MinTokens":       {"--min-tokens", "4"},
		"Workload.Tokenizer":       {"--tokenizer", "o200k_base"},
		"Workload.ServerTokenizer": {"--tokenizer", "server"},
		"Workload.Chat":            {"--workload", "chat"},
		"Workload.PromptSeed":      {"--seed", "7"},
		"Workload.Trace":           traceArgs,
		"Workload.EmbedInputs":     {"--api", "openai-embeddings", "--embed-inputs", "4"},
		"Workload.Tools":           {"--tools", "3"},
		"Workload.ToolsFile":       {"--tools-file", tools},
		"Workload.Media":           {"--images", "2", "--image-size", "64x48", "--audio-seconds", "1"},
		"Physics":                  {"--url", server, "--hardware", "h100-sxm", "--model", "llama-3.1-8b"},
		"PhysicsIn":                {"--url", server, "--hardware", "h100-sxm", "--model", "a-model-of-its-own"},
		"Meta":                     {"--label", "nightly"},
	}
	env := map[string]string{"MY_KEY": "k"}
	base := planFromFlags(t, env)
	for _, field := range planFields(reflect.TypeFor[benchmark.Plan](), "") {
		if _, ok := noFlag[field]; ok {
			continue
		}
		args, ok := byFlag[field]
		if !ok {
			t.Errorf("Plan.%s: no bench flag sets it (add one, and a line here)", field)
			continue
		}
		p := planFromFlags(t, env, args...)
		if reflect.DeepEqual(planField(p, field), planField(base, field)) {
			t.Errorf("Plan.%s: %q leaves it as without them: %v", field, args, planField(p, field))
		}
	}
}

// TestPlanFlagsNameBenchFlags: every flag an InputError's field maps to
// is one of bench's.
func TestPlanFlagsNameBenchFlags(t *testing.T) {
	o := defaultBenchOptions()
	fl := pflag.NewFlagSet("bench", pflag.ContinueOnError)
	registerOptions(fl, &o)
	for field, flags := range planFlags {
		for _, f := range strings.FieldsFunc(flags, func(r rune) bool { return strings.ContainsRune(" ,()/", r) }) {
			if strings.HasPrefix(f, "--") && fl.Lookup(strings.TrimPrefix(f, "--")) == nil {
				t.Errorf("planFlags[%q] = %q: bench has no %s", field, flags, f)
			}
		}
	}
}
