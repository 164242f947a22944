package api

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"syscall"
)

// transportClass names a transport failure by the error's type or errno
// (refusedErrno and resetErrno, per platform), not by its text, which
// differs by operating system: Windows says a refused connection was
// "actively refused". It returns "" when the error is none of these.
func transportClass(err error) Class {
	var dns *net.DNSError
	var rec tls.RecordHeaderError
	var alert tls.AlertError
	var verify *tls.CertificateVerificationError
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	switch {
	case isErrno(err, refusedErrno):
		return ClassConnectionRefused
	case errors.As(err, &dns):
		return ClassDNS
	case errors.As(err, &rec), errors.As(err, &alert), errors.As(err, &verify),
		errors.As(err, &unknownCA), errors.As(err, &hostname), errors.As(err, &invalid):
		return ClassTLS
	case isErrno(err, resetErrno...):
		return ClassConnectionReset
	}
	return ""
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
