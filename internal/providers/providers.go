// Package providers reads rate-limit hints from HTTP responses: how long a
// server asked the client to wait, which header (or body field) said so, and
// how much quota the server reports as left. It knows nothing of policies,
// attempts or gRPC.
//
// Every reader follows the same parsing rules (see design.md, "Hint
// readers"):
//
//   - A single-value header (every header except the IETF RateLimit list)
//     that appears more than once, or holds a list such as "120, 60", is
//     ambiguous and invalid. The comma inside an HTTP-date does not count.
//   - Numbers are ASCII digits only, after trimming spaces and tabs: no
//     sign, exponent, underscore or (except where the format is a float)
//     decimal point. A value that overflows time.Duration is invalid; bounds
//     are checked before multiplying.
//   - HTTP-dates follow RFC 9110 (IMF-fixdate, RFC 850, asctime), GMT only.
//   - An absolute time in the past is a delay of zero.
//   - An invalid header falls through to the next header in the reader's
//     priority order.
//
// The parsers behind the readers are exported (ParseDelaySeconds,
// ParseHTTPDate, ParseRateLimit, ...) so the engine and fuzzers share them.
// Lookup returns a built-in reader by name, NewCustomReader builds one for a
// policy's own header, Chain combines readers, and HostMap picks a provider
// from a request's host.
//
// Readers never panic and never allocate on the Retry-After fast path.
package providers

import (
	"net/http"
	"time"
)

// Response is the part of an HTTP response that hint readers look at.
type Response struct {
	// Status is the HTTP status code.
	Status int
	// Header holds the response headers with canonical keys (as built by
	// http.Header.Add or received by net/http). Duplicates are kept as
	// several values under one key.
	Header http.Header
	// Body holds the leading bytes of the response body, or nil.
	Body []byte
	// Now is the clock used for absolute hints (HTTP-dates, reset times).
	Now time.Time
}

// Hint is a valid server hint: how long to wait before the next attempt.
type Hint struct {
	// Delay is the wait, never negative. An absolute time in the past gives 0.
	Delay time.Duration
	// Source is the lower-case header name that set the delay, or
	// "body:<field>" for a field of the body.
	Source string
}

// RetryVerdict is a provider's explicit statement on whether to retry.
type RetryVerdict int8

const (
	// VerdictNone means the provider said nothing explicit.
	VerdictNone RetryVerdict = iota
	// VerdictRetry means the provider explicitly allows a retry (Stripe-Should-Retry: true).
	VerdictRetry
	// VerdictDoNotRetry means the provider explicitly forbids a retry (Stripe-Should-Retry: false).
	VerdictDoNotRetry
)

// Quota is the remaining quota a provider reports on a response, successful
// or not, together with the time it resets.
type Quota struct {
	// Remaining is the number of calls left in the current window.
	Remaining int64
	// Reset is when the window resets (absolute time).
	Reset time.Time
	// Source is the lower-case header name that carried the reset.
	Source string
}

// Reading is everything a reader found in one response.
type Reading struct {
	// Hint is valid only when HasHint is true; otherwise it is the zero Hint.
	Hint    Hint
	HasHint bool
	// Verdict is the provider's explicit retry statement, if any.
	Verdict RetryVerdict
	// Quota is valid only when HasQuota is true; otherwise it is the zero
	// Quota. Readers report it on any response, successful or not.
	Quota    Quota
	HasQuota bool
}

// HintReader reads hints from responses. Implementations are safe for
// concurrent use, never panic, and never accept a value the parsing rules
// reject: an invalid header falls through to the next in priority order.
type HintReader interface {
	// Name is the reader's name as used in policies, e.g. "github".
	Name() string
	// Read returns what the response says. It must not retain r.
	Read(r *Response) Reading
	// ExtraRetryableStatuses lists statuses this provider adds to the
	// policy's retryable list (for example 529 for anthropic). It may be nil.
	// The slice may be shared: callers must not modify it.
	ExtraRetryableStatuses() []int
}
