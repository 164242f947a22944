package wire

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// ClientTLS is the TLS configuration a user's two switches ask for: any
// certificate accepted (insecure), and the certificate authorities of the
// PEM file caFile trusted besides the system's. It is nil when neither is
// set (Go's defaults).
func ClientTLS(insecure bool, caFile string) (*tls.Config, error) {
	if !insecure && caFile == "" {
		return nil, nil
	}
	cfg := &tls.Config{InsecureSkipVerify: insecure} //nolint:gosec // the user asked for it
	if caFile == "" {
		return cfg, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", caFile)
	}
	cfg.RootCAs = pool
	return cfg, nil
}
