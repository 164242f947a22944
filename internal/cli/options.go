package cli

import (
	"strings"

	"github.com/spf13/pflag"

	"github.com/tokbench/tokbench/api"
)

// registerOptions binds bench's flags to the benchmark's options; their
// defaults are o's.
func registerOptions(fl *pflag.FlagSet, o *benchOptions) {
	fl.StringVar(&o.URL, "url", o.URL, "base URL as the API's SDK takes it, e.g. http://localhost:8000/v1 (default: the embedded simulator)")
	fl.StringVar(&o.API, "api", o.API, "protocol: "+strings.Join(api.Names, ", ")+", auto (probe the server)")
	fl.StringVar(&o.Model, "model", o.Model, "model name (default: the first one the server lists)")
	fl.StringArrayVar(&o.Headers, "header", o.Headers, "extra request header 'Name: value' (repeatable; values never written to files)")
	fl.StringVar(&o.APIKeyEnv, "api-key-env", o.APIKeyEnv, "environment variable holding the API key (sent in the protocol's header: Bearer token, Anthropic x-api-key; default ANTHROPIC_API_KEY with --api anthropic)")
	fl.StringVar(&o.APIKeyFile, "api-key-file", o.APIKeyFile, "file holding the API key (sent as a Bearer token; overrides --api-key-env)")
	fl.BoolVar(&o.Insecure, "insecure", o.Insecure, "accept any TLS certificate (self-signed test servers)")
	fl.StringVar(&o.CACert, "ca-cert", o.CACert, "PEM file of certificate authorities to trust besides the system's")
	fl.BoolVar(&o.HTTP2, "http2", o.HTTP2, "speak HTTP/2 (ALPN over TLS, prior knowledge over plain HTTP) through Go's net/http; chunks are then stamped when read, not by the kernel. Default: HTTP/1.1, as the OpenAI and Anthropic SDKs speak")
	fl.StringVar(&o.Redirects, "redirects", o.Redirects, "none: a 3xx answer is the request's failure (class redirect); same-origin: follow 307 and 308 to the same scheme, host and port (at most 3 hops; TTFT counts every hop), never to another origin, where the API key must not go")

	fl.StringVar(&o.Concurrency, "concurrency", o.Concurrency, "comma list of concurrent users, one level each")
	fl.StringVar(&o.Rate, "rate", o.Rate, "open loop: comma list of request rates per second, one level each (instead of --concurrency)")
	fl.StringVar(&o.Arrival, "arrival", o.Arrival, "open-loop arrivals: constant, poisson, gamma")
	fl.Float64Var(&o.Burstiness, "burstiness", o.Burstiness, "gamma arrivals: shape (below 1 burstier than Poisson, above 1 smoother)")
	fl.IntVar(&o.MaxConcurrency, "max-concurrency", o.MaxConcurrency, "open loop: cap on requests in flight; late sends count as client queue time (0: no cap)")
	fl.IntVar(&o.Requests, "requests", o.Requests, "requests per level (default max(4×concurrency, 16); with --duration, a cap); with --workload agent or chat, the chains or conversations per level, each of --steps or --turns requests")
	fl.DurationVar(&o.Duration, "duration", o.Duration, "run each level this long instead of a request count, e.g. 60s")
	fl.IntVar(&o.Warmup, "warmup", o.Warmup, "unrecorded warm-up requests before each level")
	fl.StringVar(&o.Trace, "trace", o.Trace, "replay a production trace: each request at its recorded instant (open loop) with its input and output lengths exact; Mooncake JSONL (timestamp ms, input_length, output_length, hash_ids), Azure CSV (TIMESTAMP, ContextTokens, GeneratedTokens) or JSONL (t s, input_tokens, output_tokens, prompt or messages, session)")
	fl.StringVar(&o.TraceFormat, "trace-format", o.TraceFormat, "the trace's format: mooncake, azure, jsonl (default: from the file)")
	fl.StringVar(&o.TraceSpeed, "trace-speed", o.TraceSpeed, "replay the trace this many times as fast; a comma list runs one level each (1,2,4)")
	fl.StringVar(&o.TraceWindow, "trace-window", o.TraceWindow, "replay only A:B of the trace (trace time from its first request: 600:1200, 10m:20m, 10m:)")
	fl.DurationVar(&o.RampUp, "ramp-up", o.RampUp, "closed loop: start each level's users evenly over this time (default: over one request's duration, measured by the warm-up or the level before)")
	fl.BoolVar(&o.Lockstep, "lockstep", o.Lockstep, "closed loop: start each level's users at the same instant, so its first requests prefill together (the default spreads them over one request's duration)")
	fl.StringVar(&o.Connections, "connections", o.Connections, "warm: open every user's connection (TCP, TLS) before a level's clock starts, so TTFT counts from the request's write; cold: each user's first request opens its own and TTFT counts its set-up (first contact)")
	fl.StringVar(&o.Sweep, "sweep", o.Sweep, "auto: one user, then doubling to maximum throughput, then levels in between")
	fl.IntVar(&o.SweepMax, "sweep-max", o.SweepMax, "highest concurrency --sweep auto may try")
	fl.IntVar(&o.Repeat, "repeat", o.Repeat, "run each level this many times and report the median of the runs with their spread")
	fl.StringVar(&o.Workload, "workload", o.Workload, "synthetic (independent requests), agent (chains of --steps dependent calls) or chat (conversations of --turns turns, each sending the whole history with the answers as streamed; a multi-turn ShareGPT --dataset gives the turns)")
	fl.IntVar(&o.Steps, "steps", o.Steps, "calls per agent chain with --workload agent")
	fl.IntVar(&o.Turns, "turns", o.Turns, "turns per conversation with --workload chat")
	fl.DurationVar(&o.ThinkTime, "think-time", o.ThinkTime, "pause between the calls of an agent chain or the turns of a chat (tool or reading time)")
	fl.DurationVar(&o.SummaryEvery, "summary-every", o.SummaryEvery, "also summarize each level in windows of this length, printed as each closes and kept in summary.json (default: every minute for a --duration of 10m or more)")
	fl.StringVar(&o.Shard, "shard", o.Shard, "run shard I of N (0-based), e.g. 0/4: 1/N of every level's users, rate, requests and warm-up (at least one warm-up each); merge the shards with tokbench merge")
	fl.StringVar(&o.StartAt, "start-at", o.StartAt, "wait until this RFC 3339 instant before the first level, so shards begin together")

	fl.StringVar(&o.InputTokens, "input-tokens", o.InputTokens, "prompt length in tokens, exact under --tokenizer: N, MEAN:STDDEV (normal), LO-HI (uniform); a comma list (1k,8k,32k) sweeps it")
	fl.StringVar(&o.OutputTokens, "output-tokens", o.OutputTokens, "max_tokens of each request: N, MEAN:STDDEV or LO-HI")
	fl.StringVar(&o.Tokenizer, "tokenizer", o.Tokenizer, "tokenizer for prompts and for counting output without usage: cl100k_base, o200k_base, PATH/tokenizer.json, or server (the engine's /tokenize counts prompts)")
	fl.StringVar(&o.Dataset, "dataset", o.Dataset, "prompts from a file: JSONL ({\"prompt\"} or {\"messages\"}, optional max_tokens), ShareGPT JSON, or plain text to cut prompts from")
	fl.StringVar(&o.DatasetFormat, "dataset-format", o.DatasetFormat, "auto, jsonl, sharegpt, text")
	fl.StringVar(&o.DatasetBudget, "dataset-budget", o.DatasetBudget, "the most text --dataset's rows, and the copies of them a level's requests make, may hold in memory; a dataset past it is refused with the line where it passed it")
	fl.IntVar(&o.PrefixTokens, "prefix-tokens", o.PrefixTokens, "a shared prefix of N tokens before each prompt (added to --input-tokens), to measure prefix caching")
	fl.IntVar(&o.PrefixGroups, "prefix-groups", o.PrefixGroups, "distinct shared prefixes; request i uses prefix i mod G")
	fl.IntVar(&o.MinTokens, "min-tokens", o.MinTokens, "send min_tokens (vLLM) so outputs are at least this long (capped at max_tokens)")
	fl.BoolVar(&o.IgnoreEOS, "ignore-eos", o.IgnoreEOS, "send ignore_eos (vLLM, SGLang, llama.cpp) so outputs reach --output-tokens")
	fl.Uint64Var(&o.Seed, "seed", o.Seed, "seed for arrival times and the embedded simulator; given, it also fixes the prompts, which are otherwise new in every run (so no run is served from the prompt cache another filled)")
	fl.StringVar(&o.ContinuousUsage, "continuous-usage", o.ContinuousUsage, "ask for usage in every chunk (stream_options.continuous_usage_stats) for exact tokens per chunk: auto (when the server is vLLM or tokbench's simulator), on, off; openai-chat and openai-completions only")

	fl.StringVar(&o.SLO, "slo", o.SLO, `service-level objectives, e.g. "ttft_p95<=500ms,tps_p5>=40,e2e_p99<=8s"`)
	fl.StringVar(&o.Profile, "profile", o.Profile, "use case: chat, code, voice, batch, agent (sets workload and SLOs unless given)")
	fl.StringVar(&o.Hardware, "hardware", o.Hardware, "hardware the endpoint runs on, e.g. h100-sxm, or local: this machine, its memory bandwidth measured and cached (recorded; configures the simulator)")
	fl.BoolVar(&o.Remeasure, "remeasure", o.Remeasure, "with --hardware local: measure the bandwidth now, whatever is cached")
	fl.StringVar(&o.Quant, "quant", o.Quant, "weight precision, e.g. bf16, fp8, int4 (recorded; configures the simulator)")
	fl.IntVar(&o.GPUs, "gpus", o.GPUs, "GPUs serving the model (recorded; configures the simulator)")
	fl.StringVar(&o.GGUF, "gguf", o.GGUF, "the served model's GGUF file, for exact bytes per token in the ceiling and MBU (otherwise read from what the server says: llama.cpp's model path, parameter counts)")
	fl.Float64Var(&o.ParamsB, "params", o.ParamsB, "billions of parameters of a dense model not in the catalog (for the ceiling and MBU)")
	fl.Float64Var(&o.PriceIn, "price-in", o.PriceIn, "price per million input tokens (for cost per level)")
	fl.Float64Var(&o.PriceOut, "price-out", o.PriceOut, "price per million output tokens (for cost per level)")
	fl.StringVar(&o.GPUTelemetry, "gpu-telemetry", o.GPUTelemetry, "sample the GPUs' counters during every level: auto (nvidia-smi when on PATH and the server is on this machine), off, nvidia-smi, or dcgm=URL (a DCGM exporter's /metrics)")
	fl.StringVar(&o.EnergyPrice, "energy-price", o.EnergyPrice, "electricity price per kWh, e.g. 0.12/kWh: the energy cost per million output tokens from the GPUs' power (--gpu-telemetry)")
	fl.Float64Var(&o.GPUHourPrice, "gpu-hour-price", o.GPUHourPrice, "price of one GPU-hour, with --gpus (for cost per million output tokens)")
	fl.BoolVar(&o.ServerMetrics, "server-metrics", o.ServerMetrics, "scrape the server's /metrics (vLLM's latency histograms) around each level and record its mean TTFT, TPOT and E2E beside the client's (on when --api auto finds vLLM or the simulator)")

	fl.DurationVar(&o.Timeout, "timeout", o.Timeout, "limit for one whole request")
	fl.DurationVar(&o.StallTimeout, "stall-timeout", o.StallTimeout, "fail a request whose stream is silent this long (0: never)")
	fl.IntVar(&o.Retry, "retry", o.Retry, "retry requests that fail before their first token (429, 5xx, refused or reset) up to N times; retries are recorded, never counted as extra requests")
	fl.Float64Var(&o.MaxErrorRate, "max-error-rate", o.MaxErrorRate, "abort a level once more than this share of its requests failed (after 10), e.g. 0.5; 0 never")
	fl.DurationVar(&o.Grace, "grace", o.Grace, "after Ctrl-C, how long streams in flight may finish")
	fl.StringVar(&o.Engine, "engine", o.Engine, "serving engine and version, e.g. vllm-0.11 (recorded)")
	fl.StringVar(&o.Label, "label", o.Label, "free-form label for this run (recorded)")
}
