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
// Providers are data: each built-in reader is an Entry of the embedded,
// versioned catalog (catalog.yaml, see Builtin), compiled from an EntrySpec
// by Compile. An entry has hint steps in priority order, verdict headers,
// quota signals, scope headers and rules: CEL conditions over the response
// (status, method, attempt, headers and the body parsed lazily as JSON) with
// an outcome. Catalogs layer (Catalog.With): the configuration loader
// (internal/config) compiles the providers a file defines, and each
// tenant's, with a Compiler (which compiles a repeated CEL expression once
// and records where each entry was defined, Entry.Origin), and puts them on
// top of the built-in catalog; a policy resolves names through its
// tenant's catalog (engine.Policy.Catalog). docs/providers.md is generated
// from the built-in catalog (WriteMarkdown).
//
// The parsers behind the readers are exported (ParseDelaySeconds,
// ParseHTTPDate, ParseRateLimit, ...) so the engine and fuzzers share them.
// Lookup returns a built-in reader by name, NewCustomReader builds one for a
// policy's own header, Chain combines readers, and HostMap picks a provider
// from a request's host.
//
// Readers never panic and never allocate on the Retry-After fast path; a
// rule's CEL and JSON work happens only for the statuses it lists and, with
// body_contains, only for bodies that mention what it looks for.
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
	// Method is the request's HTTP method ("" means GET). Catalog rules see
	// it as `method`.
	Method string
	// Attempt is the 1-based number of the attempt that produced the
	// response; 0 means 1. Catalog rules see it as `attempt` (GitHub's
	// secondary rate limit waits longer on repeats).
	Attempt int
}

// Hint is a valid server hint: how long to wait before the next attempt.
type Hint struct {
	// Delay is the wait, never negative. An absolute time in the past gives 0.
	Delay time.Duration
	// Source is the lower-case header name that set the delay,
	// "body:<field>" for a field of the body, or "rule:<entry>/<rule>" for
	// a delay computed by a catalog rule's expression.
	Source string
}

// RetryVerdict is a provider's explicit statement on whether to retry.
type RetryVerdict int8

const (
	// VerdictNone means the provider said nothing explicit.
	VerdictNone RetryVerdict = iota
	// VerdictRetry means the provider explicitly allows a retry
	// (Stripe-Should-Retry: true, x-should-retry: true, or a catalog rule
	// whose action is retry). A rule may say it on a 2xx (Shopify's GraphQL
	// THROTTLED arrives in a 200).
	VerdictRetry
	// VerdictDoNotRetry means the provider explicitly forbids a retry
	// (Stripe-Should-Retry: false, x-should-retry: false, or a catalog rule
	// whose action is do_not_retry, such as OpenAI's insufficient_quota).
	VerdictDoNotRetry
)

// String returns "none", "retry" or "do_not_retry".
func (v RetryVerdict) String() string {
	switch v {
	case VerdictRetry:
		return "retry"
	case VerdictDoNotRetry:
		return "do_not_retry"
	}
	return "none"
}

// Quota is the remaining quota a provider reports on a response, successful
// or not, together with the time it resets.
type Quota struct {
	// Remaining is the number of calls left in the current window.
	Remaining int64
	// Reset is when the window resets (absolute time). It is never zero in
	// a Reading with HasQuota.
	Reset time.Time
	// Source is the lower-case header name that carried the reset (or, for
	// a provider that sends no reset, the remaining count).
	Source string
	// Limit is the size of the window's quota when the provider states it
	// (RateLimit-Limit, RateLimit-Policy's q); 0 means unknown.
	Limit int64
}

// Scopes a Reading may report for the limit a refusal came from.
const (
	// ScopeGlobal means the limit covers every route of the provider for
	// this credential (Discord's X-RateLimit-Global: true or
	// X-RateLimit-Scope: global): a gate should close for all of them.
	ScopeGlobal = "global"
	// ScopeUser means a per-route limit of this credential (Discord's
	// X-RateLimit-Scope: user).
	ScopeUser = "user"
	// ScopeShared means a per-resource limit shared by every caller
	// (Discord's X-RateLimit-Scope: shared); it says nothing about this
	// credential's other routes.
	ScopeShared = "shared"
)

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
	// Rule is the catalog rule that produced the verdict or the hint, as
	// "entry/rule" (for example "openai/insufficient_quota"); empty when
	// the header readers decided alone.
	Rule string
	// NotExecuted reports that the provider said the request was not
	// executed (a verdict header or a rule its entry marks not_executed
	// gave the retry verdict): retrying it is safe for any method.
	NotExecuted bool
	// Scope is the scope of the limit the response reports, in lower case
	// (ScopeGlobal, ScopeUser, ScopeShared, or another value the provider
	// sent); empty when the provider says nothing.
	Scope string
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

// BodyReader is implemented by readers that look at the response body for
// some statuses: catalog entries whose rules or body hints read it. The
// engine peeks at most its peek limit of the body for error statuses
// (>= 400); it must also peek for a status for which NeedsBody reports true
// (Shopify's GraphQL throttling arrives in a 200).
type BodyReader interface {
	// NeedsBody reports whether Read looks at Response.Body for a response
	// with this status. It is cheap (a table lookup) and never allocates.
	NeedsBody(status int) bool
}

// NeedsBody reports whether rd reads the body of a response with the given
// status: rd.NeedsBody when rd implements BodyReader, otherwise false. A nil
// reader needs nothing.
func NeedsBody(rd HintReader, status int) bool {
	if br, ok := rd.(BodyReader); ok {
		return br.NeedsBody(status)
	}
	return false
}
