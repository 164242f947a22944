package cli

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/tokbench/tokbench/benchmark"
)

// netFlags are bench's transport and failure-policy flags.
type netFlags struct {
	insecure     bool
	caCert       string
	apiKeyFile   string
	retry        int
	maxErrorRate float64
	metricsAddr  string
	http2        bool
	connections  string
	redirects    string

	tls *tls.Config
}

func (n *netFlags) register(fl *pflag.FlagSet) {
	fl.BoolVar(&n.insecure, "insecure", false, "accept any TLS certificate (self-signed test servers)")
	fl.StringVar(&n.caCert, "ca-cert", "", "PEM file of certificate authorities to trust besides the system's")
	fl.StringVar(&n.apiKeyFile, "api-key-file", "", "file holding the API key (sent as a Bearer token; overrides --api-key-env)")
	fl.IntVar(&n.retry, "retry", 0, "retry requests that fail before their first token (429, 5xx, refused or reset) up to N times; retries are recorded, never counted as extra requests")
	fl.StringVar(&n.metricsAddr, "metrics-addr", "", "serve live Prometheus metrics of the run on this address, e.g. 127.0.0.1:9090 (/metrics)")
	fl.BoolVar(&n.http2, "http2", false, "speak HTTP/2 (ALPN over TLS, prior knowledge over plain HTTP) through Go's net/http; chunks are then stamped when read, not by the kernel. Default: HTTP/1.1, as the OpenAI and Anthropic SDKs speak")
	fl.StringVar(&n.connections, "connections", "warm", "warm: open every user's connection (TCP, TLS) before a level's clock starts, so TTFT counts from the request's write; cold: each user's first request opens its own and TTFT counts its set-up (first contact)")
	fl.StringVar(&n.redirects, "redirects", "none", "none: a 3xx answer is the request's failure (class redirect); same-origin: follow 307 and 308 to the same scheme, host and port (at most 3 hops; TTFT counts every hop), never to another origin, where the API key must not go")
	fl.Float64Var(&n.maxErrorRate, "max-error-rate", 0, "abort a level once more than this share of its requests failed (after 10), e.g. 0.5; 0 never")
}

// validate checks the flags and returns the API key from --api-key-file
// (empty when not given).
func (n *netFlags) validate() (string, error) {
	switch {
	case n.connections != "warm" && n.connections != "cold":
		return "", usagef("--connections: want warm or cold, got %q", n.connections)
	case n.redirects != "none" && n.redirects != "same-origin":
		return "", usagef("--redirects: want none or same-origin, got %q", n.redirects)
	}
	if n.insecure || n.caCert != "" {
		n.tls = &tls.Config{InsecureSkipVerify: n.insecure} //nolint:gosec // the user asked for it
		if n.caCert != "" {
			pem, err := os.ReadFile(n.caCert)
			if err != nil {
				return "", usagef("--ca-cert: %v", err)
			}
			pool, err := x509.SystemCertPool()
			if err != nil || pool == nil {
				pool = x509.NewCertPool()
			}
			if !pool.AppendCertsFromPEM(pem) {
				return "", usagef("--ca-cert: %s holds no PEM certificate", n.caCert)
			}
			n.tls.RootCAs = pool
		}
	}
	if n.apiKeyFile == "" {
		return "", nil
	}
	b, err := os.ReadFile(n.apiKeyFile)
	if err != nil {
		// The error names the file, never its contents.
		return "", usagef("--api-key-file: %v", err)
	}
	key := strings.TrimSpace(string(b))
	if key == "" || strings.ContainsAny(key, "\r\n") {
		return "", usagef("--api-key-file: %s must hold one key on one line", n.apiKeyFile)
	}
	return key, nil
}

// clientOptions are the validated flags as the plan's client options.
func (n *netFlags) clientOptions(f *benchFlags) benchmark.ClientOptions {
	return benchmark.ClientOptions{
		Timeout: f.timeout, StallTimeout: f.stallTimeout, Grace: f.grace,
		Retry: n.retry, MaxErrorRate: n.maxErrorRate, Cold: n.connections == "cold",
		HTTP2: n.http2, TLS: n.tls, FollowRedirects: n.redirects == "same-origin",
	}
}
