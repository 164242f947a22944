package cli

import (
	"fmt"
	"net/url"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/tokbench/tokbench/api"
	"github.com/tokbench/tokbench/metrics"
	"github.com/tokbench/tokbench/proxy"
	"github.com/tokbench/tokbench/results"
	"github.com/tokbench/tokbench/tokenize"
	"github.com/tokbench/tokbench/wire"
)

func newProxyCmd(env Env) *cobra.Command {
	var (
		listen, upstream, out, metricsAddr, tokenizer, rotateSize, caCert string
		bodyBudget                                                        string
		replace, askUsage, insecure                                       bool
		every, grace, rotateEvery                                         time.Duration
	)
	cmd := &cobra.Command{
		Use:   "proxy --upstream URL",
		Short: "A reverse proxy that measures the live traffic it carries",
		Long: `proxy forwards every request to --upstream unchanged, flushing each chunk
of an answer to the client the moment it arrives, and measures each
completion (OpenAI chat and completions, Anthropic messages, Ollama,
llama.cpp): TTFT and decode rate from the instant it handed the request
upstream, tokens from usage or --tokenizer, the model, the API, the
status and failure class, and whether the client read slowly; and each
embeddings call (OpenAI /v1/embeddings, Ollama /api/embed and
/api/embeddings, TEI /embed): its inputs, tokens and latency. With
--out it appends requests.jsonl as bench does (rotated by --rotate-size or
--rotate-every; report and compare read every part) and writes
summary.json and report.html when stopped (live traffic in windows of
--summary-every);
--metrics-addr serves Prometheus histograms. Prompts and answers are not
stored; headers (API keys too) are forwarded, never recorded. Ctrl-C lets
streams in flight finish for --grace.`,
		Example: `  tokbench proxy --listen 127.0.0.1:8080 --upstream http://localhost:8000/v1 --out live
  tokbench report live`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			u, err := url.Parse(upstream)
			if err != nil || u.Scheme == "" || u.Host == "" {
				return usagef("--upstream: want the endpoint's base URL, e.g. http://localhost:8000/v1, got %q", api.RedactURL(upstream))
			}
			if every < time.Second || grace < 0 {
				return usagef("--summary-every: want 1s or more; --grace: not negative")
			}
			tok, err := tokenize.Open(tokenizer)
			if err != nil {
				return usagef("--tokenizer: %v", err)
			}
			tlsCfg, err := wire.ClientTLS(insecure, caCert)
			if err != nil {
				return usagef("--ca-cert: %v", err)
			}
			var rotateBytes uint64
			if rotateSize != "" {
				if rotateBytes, err = humanize.ParseBytes(rotateSize); err != nil || rotateBytes == 0 {
					return usagef("--rotate-size: want a size such as 100MB or 1GiB, got %q", rotateSize)
				}
			}
			var budget uint64
			if budget, err = humanize.ParseBytes(bodyBudget); err != nil || budget < 128<<20 || budget > 1<<62 {
				return usagef("--body-budget: want a size of 128MiB or more (twice the 64 MiB a body may hold), got %q", bodyBudget)
			}
			if rotateEvery < 0 {
				return usagef("--rotate-every: want a positive duration, got %v", rotateEvery)
			}
			if (rotateEvery > 0 || rotateBytes > 0) && out == "" {
				return usagef("--rotate-size and --rotate-every rotate --out's requests.jsonl: give --out")
			}
			var w *results.Writer
			if out != "" {
				if w, err = createOut(out, replace); err != nil {
					return err
				}
				defer w.Close()
				w.Rotate(int64(min(rotateBytes, 1<<62)), rotateEvery)
			}
			ctx, hurry, stop := env.interrupts(cmd.Context())
			defer stop()
			s, err := proxy.Run(ctx, proxy.Options{
				Listen: listen, Config: proxy.Config{Upstream: u, Tokenizer: tok, AskUsage: askUsage, TLS: tlsCfg, MaxBodies: int64(budget)}, Out: w,
				MetricsAddr: metricsAddr, Every: every, Grace: grace, Hurry: hurry.Done(), Version: Version,
				Ready: func(p, m string) {
					fmt.Fprintf(env.Stderr, "tokbench proxy: %s → %s; Ctrl-C stops\n", p, api.RedactURL(upstream))
					if m != "" {
						fmt.Fprintf(env.Stderr, "tokbench proxy: Prometheus metrics at %s\n", m)
					}
				},
			})
			if err != nil {
				return addrErr(err) // --listen and --metrics-addr name themselves
			}
			lv := s.Levels[0]
			ttft := "no TTFT (no request completed)"
			if lv.TTFT.Count > 0 {
				ttft = "TTFT p50 " + metrics.Figure(lv.TTFT.P50) + " ms"
			}
			if e := lv.Embeddings; e != nil {
				// Embeddings have no token stream: their own figures.
				embed := fmt.Sprintf("embeddings: %s (%s), latency p50 %s ms", plural(e.Latency.Count, "request"), plural(e.Inputs, "input"), metrics.Figure(e.Latency.P50))
				if lv.TTFT.Count == 0 {
					ttft = embed
				} else {
					ttft += "; " + embed
				}
			}
			fmt.Fprintf(env.Stderr, "tokbench proxy: measured %s (%d failed), %s, %s\n",
				plural(lv.Requests.Sent, "request"), lv.Requests.Failed, ttft, plural(len(lv.Windows), "window"))
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&listen, "listen", "127.0.0.1:8080", "address to accept the applications' requests on")
	fl.StringVar(&upstream, "upstream", "", "the endpoint's base URL, as its SDK takes it, e.g. http://localhost:8000/v1")
	fl.StringVar(&out, "out", "", "append requests.jsonl here as requests end; summary.json and report.html when stopped")
	fl.BoolVar(&replace, "replace", false, "with --out: write over the run the directory holds")
	fl.StringVar(&metricsAddr, "metrics-addr", "", "serve Prometheus metrics of the traffic on this address (/metrics)")
	fl.BoolVar(&insecure, "insecure", false, "accept any TLS certificate from the upstream (self-signed test servers)")
	fl.StringVar(&caCert, "ca-cert", "", "PEM file of certificate authorities to trust for the upstream besides the system's")
	fl.StringVar(&tokenizer, "tokenizer", tokenize.Default, "counts output tokens of answers without usage, and the inputs of embeddings answers without a token count")
	fl.BoolVar(&askUsage, "include-usage", false, "add stream_options.include_usage to OpenAI streamed requests that lack it, so tokens are the server's count; the usage chunk that adds is kept from the client")
	fl.DurationVar(&every, "summary-every", time.Minute, "window length of the live traffic's summary")
	fl.StringVar(&rotateSize, "rotate-size", "", "with --out: start a new requests.jsonl once it holds this much (e.g. 100MB), keeping the full one as requests-NNNNNN.jsonl")
	fl.DurationVar(&rotateEvery, "rotate-every", 0, "with --out: start a new requests.jsonl this often (e.g. 1h)")
	fl.StringVar(&bodyBudget, "body-budget", "256MiB", "memory the request bodies held at once may take together; a body past it is answered 503 with Retry-After")
	// Kubernetes kills a pod 30 s after its TERM by default: the grace
	// ends before that, with time left to write the summary and report.
	fl.DurationVar(&grace, "grace", 25*time.Second, "at Ctrl-C or TERM, how long streams in flight may finish (inside Kubernetes' default 30 s before it kills)")
	return cmd
}
