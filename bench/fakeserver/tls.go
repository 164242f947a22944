package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"time"
)

// selfSigned makes the server's certificate: ECDSA P-256, self-signed, for
// 127.0.0.1, ::1 and localhost, valid from an hour ago for a day. It
// returns it for tls.Config and as PEM for the client's trust pool.
func selfSigned() (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "tokbench fakeserver"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// connKey carries a request's TCP connection (the stamped one under TLS)
// in its context, from http.Server.ConnContext to the handler.
type connKey struct{}

// serveH2 serves -h2: net/http's server over TLS, HTTP/2 and HTTP/1.1, on
// ln's stamped connections, until ctx ends.
func serveH2(ctx context.Context, ln net.Listener, cert tls.Certificate, s *server) {
	hs := &http.Server{
		Handler: http.HandlerFunc(s.serveHTTP),
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{cert},
			NextProtos:   []string{"h2", "http/1.1"},
		},
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if tc, ok := c.(*tls.Conn); ok {
				c = tc.NetConn()
			}
			return context.WithValue(ctx, connKey{}, c)
		},
	}
	go func() {
		<-ctx.Done()
		hs.Close()
	}()
	if err := hs.ServeTLS(ln, "", ""); err != nil && err != http.ErrServerClosed {
		fmt.Fprintln(os.Stderr, "fakeserver:", err)
	}
}

// serveHTTP is -h2's handler: the raw server's answers, written by the
// request's own goroutine.
func (s *server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	var b body
	err := json.NewDecoder(r.Body).Decode(&b)
	io.Copy(io.Discard, r.Body)
	if r.Method == http.MethodGet && r.URL.Path == "/stats" {
		w.Header().Set("Content-Type", "application/json")
		w.Write(s.statsJSON())
		return
	}
	if r.Method != http.MethodPost || err != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"error":{"message":"want a POST with a JSON body"}}`)
		return
	}
	// The body has been read to its end, so the connection's latest read
	// is the one that delivered the request's last byte or a later one
	// (another stream's, on a multiplexed connection): an upper bound.
	tcp, _ := r.Context().Value(connKey{}).(net.Conn)
	arrival := s.arrival(tcp)
	s.requests.Add(1)
	if r.ProtoMajor == 2 {
		s.h2Requests.Add(1)
	}
	st := newStream(b, arrival)
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if rc.Flush() != nil {
		return
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for st.remaining > 0 {
		if wait := time.Until(st.due); wait > 0 {
			timer.Reset(wait)
			select {
			case <-r.Context().Done():
				return
			case <-timer.C:
			}
		}
		st.buf = st.events(st.buf[:0])
		if _, err := w.Write(st.buf); err != nil || rc.Flush() != nil {
			return
		}
		if st.gap == 0 {
			st.due = time.Now()
		} else {
			st.due = st.due.Add(st.gap)
		}
	}
}
