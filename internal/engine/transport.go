package engine

// TransportError is the kind of a failure that produced no HTTP response.
type TransportError int8

// Transport error kinds. The zero value means "no transport error".
const (
	TransportNone TransportError = iota
	// TransportConnectionRefused: the peer refused the connection. Retryable.
	TransportConnectionRefused
	// TransportConnectionReset: the peer reset the connection. Retryable.
	TransportConnectionReset
	// TransportEOF: the connection closed before a full response. Retryable.
	TransportEOF
	// TransportTimeout: connect, TLS handshake or response-header timeout. Retryable.
	TransportTimeout
	// TransportDNSTemporary: a temporary DNS failure. Retryable.
	TransportDNSTemporary
	// TransportDNSNotFound: no such host. Not retryable.
	TransportDNSNotFound
	// TransportTLSCertificate: the server certificate was rejected. Not retryable.
	TransportTLSCertificate
	// TransportCanceled: the caller canceled. Not retryable.
	TransportCanceled
	// TransportInvalidURL: the URL cannot be sent. Not retryable.
	TransportInvalidURL
	// TransportDestinationRefused: the destination guard refused the dialled
	// address. Not retryable.
	TransportDestinationRefused
	// TransportOther: any other failure. Not retryable.
	TransportOther
	// TransportBodyIncomplete: the response headers arrived but the body
	// ended early (reset, short Content-Length, timeout while reading).
	// Retryable.
	TransportBodyIncomplete
	// TransportResponseHeadersTooLarge: the response headers went past the
	// broker's cap (bytes or lines); nothing of the response is kept.
	// Retryable: an oversized head is as often a passing fault (an error
	// page from a proxy, one bad instance behind a load balancer) as a
	// constant one, and a constant one is stopped by max_retries, the
	// retry budget and the failure breaker.
	TransportResponseHeadersTooLarge
)

var transportNames = [...]string{
	TransportNone:               "",
	TransportConnectionRefused:  "connection_refused",
	TransportConnectionReset:    "connection_reset",
	TransportEOF:                "eof",
	TransportTimeout:            "timeout",
	TransportDNSTemporary:       "dns_temporary",
	TransportDNSNotFound:        "dns_not_found",
	TransportTLSCertificate:     "tls_certificate",
	TransportCanceled:           "canceled",
	TransportInvalidURL:         "invalid_url",
	TransportDestinationRefused: "destination_refused",
	TransportOther:              "other",
	TransportBodyIncomplete:     "body_incomplete",

	TransportResponseHeadersTooLarge: "response_headers_too_large",
}

// String returns the snake_case name used by the conformance vectors
// ("connection_reset"), or "" for TransportNone.
func (k TransportError) String() string {
	if k < 0 || int(k) >= len(transportNames) {
		return "other"
	}
	return transportNames[k]
}

// TransportErrors lists every TransportError, TransportNone first.
func TransportErrors() []TransportError {
	out := make([]TransportError, len(transportNames))
	for i := range out {
		out[i] = TransportError(i)
	}
	return out
}

// ParseTransportError maps a vector name such as "connection_reset" to its
// kind. It reports false for an unknown name.
func ParseTransportError(name string) (TransportError, bool) {
	for i, n := range transportNames {
		if n == name && i != 0 {
			return TransportError(i), true
		}
	}
	return TransportNone, false
}

// Retryable reports whether the kind may be retried (subject to policy).
func (k TransportError) Retryable() bool {
	switch k {
	case TransportConnectionRefused, TransportConnectionReset, TransportEOF,
		TransportTimeout, TransportDNSTemporary, TransportBodyIncomplete, TransportResponseHeadersTooLarge:
		return true
	default:
		return false
	}
}
