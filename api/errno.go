package api

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"syscall"

	"github.com/tokbench/tokbench/wire"
)

// transportClass names a transport failure by the error's type, errno or
// sentinel (refusedErrno and resetErrno, per platform), not by its text,
// which differs by operating system: Windows says a refused connection was
// "actively refused". It returns "" when the error is none of these.
//
// A connection the peer reset or closed (an errno, io.EOF) is
// connection_reset, during a TLS handshake too; any other handshake
// failure is tls: crypto/tls's typed errors, an alert either side sent
// (a *net.OpError of Op "remote error" or "local error"), and wire's
// HandshakeError around what crypto/tls says in words only.
func transportClass(err error) Class {
	var dns *net.DNSError
	var rec tls.RecordHeaderError
	var alert tls.AlertError
	var verify *tls.CertificateVerificationError
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var handshake *wire.HandshakeError
	switch {
	case isErrno(err, refusedErrno):
		return ClassConnectionRefused
	case errors.As(err, &dns):
		return ClassDNS
	case errors.As(err, &rec), errors.As(err, &alert), errors.As(err, &verify),
		errors.As(err, &unknownCA), errors.As(err, &hostname), errors.As(err, &invalid), tlsAlert(err):
		return ClassTLS
	case isErrno(err, resetErrno...), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return ClassConnectionReset
	case errors.As(err, &handshake):
		return ClassTLS
	}
	return ""
}

// tlsAlert reports whether err is a TLS alert: crypto/tls wraps the alert
// it received or sent in a *net.OpError of Op "remote error" or "local
// error" (the alert's own type is unexported).
func tlsAlert(err error) bool {
	for op, ok := errors.AsType[*net.OpError](err); ok; op, ok = errors.AsType[*net.OpError](op.Err) {
		if op.Op == "remote error" || op.Op == "local error" {
			return true
		}
	}
	return false
}

// isErrno reports whether err wraps one of the errnos.
func isErrno(err error, errnos ...syscall.Errno) bool {
	for _, e := range errnos {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
