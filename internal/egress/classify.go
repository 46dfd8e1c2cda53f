package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/url"
	"strings"
	"syscall"

	"github.com/retrybroker/retrybroker/internal/engine"
)

// Classify maps an error from an HTTP round trip (or a dial) to its
// transport error kind. The first matching rule wins:
//
//   - nil: TransportNone;
//   - wraps *RefusedError: TransportDestinationRefused;
//   - wraps ErrResponseHeadersTooLarge: TransportResponseHeadersTooLarge;
//   - context.Canceled: TransportCanceled;
//   - context.DeadlineExceeded: TransportTimeout;
//   - *net.DNSError: TransportDNSNotFound when IsNotFound, otherwise
//     TransportDNSTemporary (temporary, timed out, or unknown DNS failures
//     are all treated as temporary);
//   - a rejected server certificate (x509.UnknownAuthorityError,
//     CertificateInvalidError, HostnameError, SystemRootsError,
//     ConstraintViolationError, UnhandledCriticalExtension,
//     InsecureAlgorithmError, *tls.CertificateVerificationError):
//     TransportTLSCertificate;
//   - ErrInvalidURL, a URL parse error (*url.Error with Op "parse",
//     url.InvalidHostError, url.EscapeError), an unsupported protocol
//     scheme or a missing host reported by net/http: TransportInvalidURL;
//   - syscall.ECONNREFUSED: TransportConnectionRefused;
//   - syscall.ECONNRESET, ECONNABORTED or EPIPE: TransportConnectionReset;
//   - io.EOF or io.ErrUnexpectedEOF: TransportEOF;
//   - a net.Error whose Timeout() is true (dial, TLS handshake and
//     response-header timeouts): TransportTimeout;
//   - anything else: TransportOther.
func Classify(err error) engine.TransportError {
	if err == nil {
		return engine.TransportNone
	}
	var (
		refused *RefusedError
		dnsErr  *net.DNSError
		netErr  net.Error
	)
	switch {
	case errors.As(err, &refused):
		return engine.TransportDestinationRefused
	case errors.Is(err, ErrResponseHeadersTooLarge):
		return engine.TransportResponseHeadersTooLarge
	case errors.Is(err, context.Canceled):
		return engine.TransportCanceled
	case errors.Is(err, context.DeadlineExceeded):
		return engine.TransportTimeout
	case errors.As(err, &dnsErr):
		if dnsErr.IsNotFound {
			return engine.TransportDNSNotFound
		}
		return engine.TransportDNSTemporary
	case isCertificateError(err):
		return engine.TransportTLSCertificate
	case isInvalidURL(err):
		return engine.TransportInvalidURL
	case errors.Is(err, syscall.ECONNREFUSED):
		return engine.TransportConnectionRefused
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNABORTED), errors.Is(err, syscall.EPIPE):
		return engine.TransportConnectionReset
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return engine.TransportEOF
	case errors.As(err, &netErr) && netErr.Timeout():
		return engine.TransportTimeout
	default:
		return engine.TransportOther
	}
}

func isCertificateError(err error) bool {
	var (
		unknownAuthority x509.UnknownAuthorityError
		invalid          x509.CertificateInvalidError
		hostname         x509.HostnameError
		systemRoots      x509.SystemRootsError
		constraint       x509.ConstraintViolationError
		critical         x509.UnhandledCriticalExtension
		insecure         x509.InsecureAlgorithmError
		verification     *tls.CertificateVerificationError
	)
	return errors.As(err, &verification) ||
		errors.As(err, &unknownAuthority) ||
		errors.As(err, &invalid) ||
		errors.As(err, &hostname) ||
		errors.As(err, &systemRoots) ||
		errors.As(err, &constraint) ||
		errors.As(err, &critical) ||
		errors.As(err, &insecure)
}

func isInvalidURL(err error) bool {
	if errors.Is(err, ErrInvalidURL) {
		return true
	}
	var (
		hostErr   url.InvalidHostError
		escapeErr url.EscapeError
		urlErr    *url.Error
	)
	if errors.As(err, &hostErr) || errors.As(err, &escapeErr) {
		return true
	}
	if errors.As(err, &urlErr) {
		if urlErr.Op == "parse" {
			return true
		}
		// net/http reports these with unexported error values.
		msg := urlErr.Err.Error()
		return strings.HasPrefix(msg, "unsupported protocol scheme") ||
			strings.HasPrefix(msg, "http: no Host in request URL") ||
			strings.HasPrefix(msg, "net/http: nil Request.URL")
	}
	return false
}
