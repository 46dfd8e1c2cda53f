package engine

import (
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"strings"
	"time"

	"github.com/retrybroker/retrybroker/internal/credential"

	"golang.org/x/net/http/httpguts"

	"github.com/retrybroker/retrybroker/internal/providers"
	"github.com/retrybroker/retrybroker/internal/store"
)

// JitterMode says how backoff delays are randomised.
type JitterMode int8

const (
	// JitterFull draws the delay uniformly from [0, d].
	JitterFull JitterMode = iota
	// JitterEqual draws the delay uniformly from [d/2, d].
	JitterEqual
	// JitterNone uses d exactly.
	JitterNone
)

// ParseJitterMode maps "full", "equal" and "none" to a JitterMode.
func ParseJitterMode(s string) (JitterMode, error) {
	switch s {
	case "full", "":
		return JitterFull, nil
	case "equal":
		return JitterEqual, nil
	case "none":
		return JitterNone, nil
	}
	return JitterFull, fmt.Errorf("unknown jitter mode %q (want full, equal or none)", s)
}

// String returns "full", "equal" or "none".
func (m JitterMode) String() string {
	switch m {
	case JitterEqual:
		return "equal"
	case JitterNone:
		return "none"
	default:
		return "full"
	}
}

// Backoff is the exponential backoff used when no valid hint is present.
// After attempt n the ceiling is min(Cap, Base × Factor^(n-1)).
type Backoff struct {
	// Base is the ceiling after the first attempt. Default 1s.
	Base time.Duration
	// Factor multiplies the ceiling per attempt. Default 2; at least 1.
	Factor float64
	// Cap bounds the ceiling. Default 30s.
	Cap time.Duration
	// Jitter randomises the delay below the ceiling. Default full.
	Jitter JitterMode
}

// StatusSet is a set of HTTP status codes 0..639. The zero value is empty.
type StatusSet [10]uint64

// NewStatusSet returns a set holding codes. Codes outside 0..639 are ignored.
func NewStatusSet(codes ...int) StatusSet {
	var s StatusSet
	for _, c := range codes {
		s.Add(c)
	}
	return s
}

// Add puts code in the set; codes outside 0..639 are ignored.
func (s *StatusSet) Add(code int) {
	if code >= 0 && code < 640 {
		s[code>>6] |= 1 << (uint(code) & 63)
	}
}

// Has reports whether code is in the set.
func (s *StatusSet) Has(code int) bool {
	return code >= 0 && code < 640 && s[code>>6]&(1<<(uint(code)&63)) != 0
}

// Codes lists the set's members in ascending order.
func (s *StatusSet) Codes() []int {
	var out []int
	for c := 0; c < 640; c++ {
		if s.Has(c) {
			out = append(out, c)
		}
	}
	return out
}

// Defaults of the standard policy.
const (
	DefaultMaxRetries      = 3
	DefaultMaxDelay        = 60 * time.Second
	DefaultBackoffBase     = time.Second
	DefaultBackoffFactor   = 2.0
	DefaultBackoffCap      = 30 * time.Second
	DefaultMaxRequestBody  = 1 << 20
	DefaultMaxResponseBody = 4 << 20
	DefaultAttemptTimeout  = 30 * time.Second
	DefaultTotalTimeout    = 2 * time.Minute
	DefaultIdempotencyKey  = "Idempotency-Key"
	// DefaultMaxGate bounds how long one hint (or exhausted quota) may keep
	// a cooldown gate closed; the full hint is still reported.
	DefaultMaxGate = 24 * time.Hour
	// MaxBodyLimit bounds max_request_body and max_response_body. The gRPC
	// server's message limits are derived from it, so every body a policy
	// allows fits the messages the server accepts and sends.
	MaxBodyLimit = 64 << 20
	// MaxGateLimit bounds max_gate.
	MaxGateLimit = 7 * 24 * time.Hour

	// Stream defaults (ExecuteStream).
	DefaultStreamMaxConcurrent = 64
	DefaultStreamIdleTimeout   = 60 * time.Second
	// MaxStreamConcurrent bounds stream.max_concurrent.
	MaxStreamConcurrent = 100_000

	// MaxAttemptNumber bounds the attempt numbers the engine accepts.
	MaxAttemptNumber = 1000
	// MaxRetriesLimit bounds a policy's max_retries.
	MaxRetriesLimit = 100
)

// DefaultRetryableStatuses are 408, 429, 500, 502, 503 and 504.
var DefaultRetryableStatuses = []int{408, 429, 500, 502, 503, 504}

// Policy is a tenant's retry policy. Build one with DefaultPolicy and
// adjust it, then call Validate (which also resolves the hint reader).
type Policy struct {
	// Name is the policy's name within its tenant ("default" for the default).
	Name string
	// Provider names the hint reader ("retry-after", "github", ... or
	// "none"), an entry of Catalog. Empty means choose by the request's
	// host, else "retry-after".
	Provider string
	// Catalog is the provider catalog the policy's names resolve through:
	// Provider in Validate, and any name given to ReaderFor (a request's
	// provider override). Nil means the built-in catalog. A configuration
	// gives each policy its tenant's layered catalog (built-in, then the
	// file's providers, then the tenant's).
	Catalog *providers.Catalog
	// CustomBefore and CustomAfter are readers tried before and after the
	// provider's reader.
	CustomBefore []providers.HintReader
	CustomAfter  []providers.HintReader
	// MaxRetries is the number of retries after the first send (so at most
	// MaxRetries+1 sends). 0 disables retries and request-body buffering.
	MaxRetries int
	// MaxDelay is the longest server hint the broker waits for; a longer
	// hint makes it give up at once and report the hint.
	MaxDelay time.Duration
	// Backoff applies when no valid hint is present.
	Backoff Backoff
	// RetryableStatuses are the statuses that may be retried. 403 in this set
	// is still retried only with a valid hint.
	RetryableStatuses StatusSet
	// RetryUnsafeMethods lets POST, PUT, PATCH, DELETE and others retry.
	RetryUnsafeMethods bool
	// IdempotencyHeader is the header whose presence makes an unsafe request
	// retry-safe (canonical form). Default "Idempotency-Key".
	IdempotencyHeader string
	// GenerateIdempotencyKey makes Execute add a random UUID in
	// IdempotencyHeader, once per call, when the request has none.
	GenerateIdempotencyKey bool
	// AttemptHeader, when set, is set on each attempt to its 1-based number.
	AttemptHeader string
	// RetryTransportErrors enables retries of retryable transport errors.
	RetryTransportErrors bool
	// AttemptTimeout bounds one attempt (send to response headers and body).
	AttemptTimeout time.Duration
	// TotalTimeout bounds the whole Execute call, waits included.
	TotalTimeout time.Duration
	// MaxRequestBody is the largest request body accepted, in bytes.
	MaxRequestBody int64
	// MaxResponseBody is the largest final response body returned, in bytes.
	MaxResponseBody int64
	// MaxGate bounds how long one hint or exhausted quota may keep the
	// call's cooldown gate closed, measured on the broker's clock. A longer
	// hint is still reported in full. Default 24h, at most 7 days; at least
	// MaxDelay.
	MaxGate time.Duration
	// Stream limits ExecuteStream calls of this policy.
	Stream StreamLimits

	// Shared state. The zero values disable each (DefaultPolicy leaves
	// them off; the broker's standard policy, tenant.DefaultPolicy, turns
	// the budget, learning and the breaker on).

	// Budget limits retries per tenant.
	Budget store.BudgetConfig
	// Pace paces calls per (tenant, host); zero Rate disables it.
	Pace store.PaceConfig
	// Learning learns the quota of gates whose provider announces none.
	Learning store.LearningConfig
	// Breaker is each gate's failure breaker.
	Breaker store.BreakerConfig
	// GateByCredential keys cooldown gates by a fingerprint of the
	// Authorization header as well as by provider or host.
	GateByCredential bool
	// FailClosed makes calls fail (UNAVAILABLE) when the shared store is
	// unreachable, instead of serving on local state.
	FailClosed bool
	// Credential, when set, is the broker-held credential applied to each
	// attempt after it was admitted and after every other header (see
	// docs/architecture.md "What runs per call and per attempt"). Its
	// gates are keyed by its name (GateByCredential is then moot).
	Credential credential.Credential

	reader     providers.HintReader // resolved by Validate
	readerName string               // the name reader was resolved for
}

// StreamLimits bound ExecuteStream calls. Execute is not affected.
type StreamLimits struct {
	// MaxConcurrent is the most ExecuteStream calls of the policy's tenant
	// open at once under this policy; one more answers RESOURCE_EXHAUSTED.
	// Default 64.
	MaxConcurrent int
	// IdleTimeout ends a streamed body when no byte arrives for this long
	// (body_complete false, BODY_END_IDLE_TIMEOUT). Default 60s.
	IdleTimeout time.Duration
	// MaxDuration, when positive, ends a streamed body this long after its
	// head was sent (BODY_END_TIMEOUT). Zero means no limit: total_timeout
	// bounds the attempts up to the head, not the body.
	MaxDuration time.Duration
	// MaxBytes, when positive, ends a streamed body once this many bytes
	// were sent (BODY_END_SIZE_LIMIT). Zero means no limit (the default).
	MaxBytes int64
}

// DefaultPolicy returns the standard policy with the documented defaults.
func DefaultPolicy() Policy {
	return Policy{
		Name:                 "default",
		MaxRetries:           DefaultMaxRetries,
		MaxDelay:             DefaultMaxDelay,
		Backoff:              Backoff{Base: DefaultBackoffBase, Factor: DefaultBackoffFactor, Cap: DefaultBackoffCap, Jitter: JitterFull},
		RetryableStatuses:    NewStatusSet(DefaultRetryableStatuses...),
		IdempotencyHeader:    DefaultIdempotencyKey,
		RetryTransportErrors: true,
		AttemptTimeout:       DefaultAttemptTimeout,
		TotalTimeout:         DefaultTotalTimeout,
		MaxRequestBody:       DefaultMaxRequestBody,
		MaxResponseBody:      DefaultMaxResponseBody,
		MaxGate:              DefaultMaxGate,
		Stream:               StreamLimits{MaxConcurrent: DefaultStreamMaxConcurrent, IdleTimeout: DefaultStreamIdleTimeout},
	}
}

// FieldError is one invalid policy field.
type FieldError struct {
	Field   string
	Message string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

// Validate checks the policy, canonicalises header names and resolves the
// hint reader. It returns every problem found, joined; each is a *FieldError.
func (p *Policy) Validate() error {
	var errs fieldErrors
	p.validateRetries(&errs)
	p.validateHeaders(&errs)
	p.validateLimits(&errs)
	p.validateStream(&errs)
	if p.Provider != "" {
		if cat := p.ProviderCatalog(); !cat.Has(p.Provider) {
			errs.add("provider", "unknown provider %q (known: %s)", p.Provider, strings.Join(cat.Names(), ", "))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	p.reader, p.readerName = nil, ""
	p.reader = p.ReaderFor(p.Provider) // resolved once: Decide is a hot path
	p.readerName = p.Provider
	return nil
}

// ProviderCatalog returns the catalog the policy's provider names resolve
// through: Catalog, or the built-in catalog when it is nil.
func (p *Policy) ProviderCatalog() *providers.Catalog {
	if p.Catalog != nil {
		return p.Catalog
	}
	return providers.Builtin()
}

// fieldErrors collects *FieldError values.
type fieldErrors []error

func (e *fieldErrors) add(field, format string, args ...any) {
	*e = append(*e, &FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

// validateRetries checks max_retries, max_delay, backoff and the statuses.
func (p *Policy) validateRetries(errs *fieldErrors) {
	if p.MaxRetries < 0 || p.MaxRetries > MaxRetriesLimit {
		errs.add("max_retries", "must be between 0 and %d, got %d", MaxRetriesLimit, p.MaxRetries)
	}
	if p.MaxDelay <= 0 || p.MaxDelay > 24*time.Hour {
		errs.add("max_delay", "must be positive and at most 24h, got %s", p.MaxDelay)
	}
	b := p.Backoff
	if b.Base <= 0 {
		errs.add("backoff.base", "must be positive, got %s", b.Base)
	}
	if b.Factor < 1 || b.Factor > 100 {
		errs.add("backoff.factor", "must be between 1 and 100, got %g", b.Factor)
	}
	if b.Cap < b.Base {
		errs.add("backoff.cap", "must be at least backoff.base (%s), got %s", b.Base, b.Cap)
	}
	if b.Jitter < JitterFull || b.Jitter > JitterNone {
		errs.add("backoff.jitter", "unknown jitter mode %d", b.Jitter)
	}
	for _, c := range p.RetryableStatuses.Codes() {
		if c < 100 || c > 599 {
			errs.add("retryable_statuses", "status %d is outside 100-599", c)
		}
	}
}

// validateHeaders checks the header names and puts them in canonical form.
func (p *Policy) validateHeaders(errs *fieldErrors) {
	if p.IdempotencyHeader == "" {
		p.IdempotencyHeader = DefaultIdempotencyKey
	}
	for _, h := range []struct {
		field string
		name  *string
	}{{"idempotency_header", &p.IdempotencyHeader}, {"attempt_header", &p.AttemptHeader}} {
		switch {
		case *h.name == "":
		case !httpguts.ValidHeaderFieldName(*h.name):
			errs.add(h.field, "%q is not a valid header name", *h.name)
		default:
			*h.name = textproto.CanonicalMIMEHeaderKey(*h.name)
		}
	}
}

// validateLimits checks the timeouts, the body limits and max_gate.
func (p *Policy) validateLimits(errs *fieldErrors) {
	if p.AttemptTimeout <= 0 {
		errs.add("attempt_timeout", "must be positive, got %s", p.AttemptTimeout)
	}
	if p.TotalTimeout <= 0 {
		errs.add("total_timeout", "must be positive, got %s", p.TotalTimeout)
	}
	if p.MaxRequestBody <= 0 || p.MaxRequestBody > MaxBodyLimit {
		errs.add("max_request_body", "must be between 1 byte and 64 MiB, got %d", p.MaxRequestBody)
	}
	if p.MaxResponseBody <= 0 || p.MaxResponseBody > MaxBodyLimit {
		errs.add("max_response_body", "must be between 1 byte and 64 MiB, got %d", p.MaxResponseBody)
	}
	switch {
	case p.MaxGate <= 0 || p.MaxGate > MaxGateLimit:
		errs.add("max_gate", "must be positive and at most 168h (7 days), got %s", p.MaxGate)
	case p.MaxDelay > 0 && p.MaxGate < p.MaxDelay:
		errs.add("max_gate", "must be at least max_delay (%s), got %s: a hint the broker waits for would outlast the gate it closes", p.MaxDelay, p.MaxGate)
	}
}

// validateStream checks the ExecuteStream limits.
func (p *Policy) validateStream(errs *fieldErrors) {
	st := p.Stream
	if st.MaxConcurrent < 1 || st.MaxConcurrent > MaxStreamConcurrent {
		errs.add("stream.max_concurrent", "must be between 1 and %d, got %d", MaxStreamConcurrent, st.MaxConcurrent)
	}
	if st.IdleTimeout <= 0 {
		errs.add("stream.idle_timeout", "must be positive, got %s", st.IdleTimeout)
	}
	if st.MaxDuration < 0 {
		errs.add("stream.max_duration", "must not be negative, got %s", st.MaxDuration)
	}
	if st.MaxBytes < 0 {
		errs.add("stream.max_bytes", "must not be negative, got %d", st.MaxBytes)
	}
}

// ReaderFor returns the hint reader for provider name, looked up in the
// policy's catalog (ProviderCatalog), with the policy's custom readers
// around it. An unknown name gives the catalog's retry-after reader (which
// a configuration may have extended). The reader Validate resolved for the
// policy's own provider is returned without a lookup or an allocation;
// another name costs a map lookup, plus a chain when the policy has custom
// readers.
func (p *Policy) ReaderFor(name string) providers.HintReader {
	if p.reader != nil && name == p.readerName {
		return p.reader
	}
	if name == "" {
		name = "retry-after"
	}
	cat := p.ProviderCatalog()
	var r providers.HintReader
	if e, ok := cat.Lookup(name); ok {
		r = e
	} else if e, ok := cat.Lookup("retry-after"); ok {
		r = e
	} else {
		r, _ = providers.Lookup("retry-after")
	}
	if len(p.CustomBefore) == 0 && len(p.CustomAfter) == 0 {
		return r
	}
	chain := make([]providers.HintReader, 0, len(p.CustomBefore)+1+len(p.CustomAfter))
	chain = append(chain, p.CustomBefore...)
	chain = append(chain, r)
	chain = append(chain, p.CustomAfter...)
	return providers.Chain(name, chain...)
}

// Reader returns the policy's own reader, resolved by Validate: the named
// provider's, or retry-after's when the policy names none.
func (p *Policy) Reader() providers.HintReader {
	if p.reader != nil {
		return p.reader
	}
	return p.ReaderFor("")
}

// IsSafeMethod reports whether method is GET, HEAD, OPTIONS or TRACE,
// which may always be retried.
func IsSafeMethod(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, "":
		return true
	}
	return false
}
