package cli

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"strings"

	"github.com/spf13/pflag"
	"github.com/tokbench/tokbench/wire"
)

// netFlags are bench's transport and failure-policy flags.
type netFlags struct {
	insecure     bool
	caCert       string
	apiKeyFile   string
	retry        int
	maxErrorRate float64
	metricsAddr  string

	tls *tls.Config
}

func (n *netFlags) register(fl *pflag.FlagSet) {
	fl.BoolVar(&n.insecure, "insecure", false, "accept any TLS certificate (self-signed test servers)")
	fl.StringVar(&n.caCert, "ca-cert", "", "PEM file of certificate authorities to trust besides the system's")
	fl.StringVar(&n.apiKeyFile, "api-key-file", "", "file holding the API key (sent as a Bearer token; overrides --api-key-env)")
	fl.IntVar(&n.retry, "retry", 0, "retry requests that fail before their first token (429, 5xx, refused or reset) up to N times; retries are recorded, never counted as extra requests")
	fl.StringVar(&n.metricsAddr, "metrics-addr", "", "serve live Prometheus metrics of the run on this address, e.g. 127.0.0.1:9090 (/metrics)")
	fl.Float64Var(&n.maxErrorRate, "max-error-rate", 0, "abort a level once more than this share of its requests failed (after 10), e.g. 0.5; 0 never")
}

// validate checks the flags and returns the API key from --api-key-file
// (empty when not given).
func (n *netFlags) validate() (string, error) {
	switch {
	case n.retry < 0:
		return "", usagef("--retry: must be 0 or more, got %d", n.retry)
	case n.maxErrorRate < 0 || n.maxErrorRate > 1:
		return "", usagef("--max-error-rate: must be between 0 and 1, got %g", n.maxErrorRate)
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

// transport is the HTTP transport for the run.
func (n *netFlags) transport() *wire.Transport {
	t := newTransport()
	if n.tls != nil {
		t.Fallback.TLSClientConfig = n.tls
	}
	return t
}
