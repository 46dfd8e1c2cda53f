package engine

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/retrybroker/retrybroker/internal/providers"
)

// Action is what to do after an attempt.
type Action int8

// Actions.
const (
	ActionUnspecified Action = iota
	ActionRetry
	ActionDoNotRetry
)

// String returns "retry" or "do_not_retry".
func (a Action) String() string {
	switch a {
	case ActionRetry:
		return "retry"
	case ActionDoNotRetry:
		return "do_not_retry"
	}
	return "unspecified"
}

// Reason explains a Decision. The values mirror the proto enum Reason.
type Reason int8

// Reasons.
const (
	ReasonUnspecified Reason = iota
	ReasonServerHint
	ReasonBackoff
	ReasonSuccess
	ReasonStatusNotRetryable
	ReasonUnsafeMethod
	ReasonAttemptsExhausted
	ReasonHintExceedsMaxDelay
	ReasonDeadlineTooShort
	ReasonTransportErrorNotRetryable
	ReasonTransportRetryDisabled
	ReasonProviderForbidsRetry
	ReasonRetryBudgetExhausted
	ReasonGateClosed
	ReasonCanceled
	ReasonBreakerOpen
	ReasonShuttingDown
	// ReasonCredentialsUnavailable: the policy's broker-held credential
	// could not be had for the attempt (token endpoint down, secret file
	// unreadable); the attempt was not sent.
	ReasonCredentialsUnavailable
	// ReasonCredentialRejected: the upstream answered 401 to an attempt
	// that carried the broker-held credential, which is now renewed; the
	// attempt is repeated at once, once per call, without counting as a
	// retry.
	ReasonCredentialRejected
)

var reasonNames = [...]string{
	ReasonUnspecified:                "REASON_UNSPECIFIED",
	ReasonServerHint:                 "REASON_SERVER_HINT",
	ReasonBackoff:                    "REASON_BACKOFF",
	ReasonSuccess:                    "REASON_SUCCESS",
	ReasonStatusNotRetryable:         "REASON_STATUS_NOT_RETRYABLE",
	ReasonUnsafeMethod:               "REASON_UNSAFE_METHOD",
	ReasonAttemptsExhausted:          "REASON_ATTEMPTS_EXHAUSTED",
	ReasonHintExceedsMaxDelay:        "REASON_HINT_EXCEEDS_MAX_DELAY",
	ReasonDeadlineTooShort:           "REASON_DEADLINE_TOO_SHORT",
	ReasonTransportErrorNotRetryable: "REASON_TRANSPORT_ERROR_NOT_RETRYABLE",
	ReasonTransportRetryDisabled:     "REASON_TRANSPORT_RETRY_DISABLED",
	ReasonProviderForbidsRetry:       "REASON_PROVIDER_FORBIDS_RETRY",
	ReasonRetryBudgetExhausted:       "REASON_RETRY_BUDGET_EXHAUSTED",
	ReasonGateClosed:                 "REASON_GATE_CLOSED",
	ReasonCanceled:                   "REASON_CANCELED",
	ReasonBreakerOpen:                "REASON_BREAKER_OPEN",
	ReasonShuttingDown:               "REASON_SHUTTING_DOWN",
	ReasonCredentialsUnavailable:     "REASON_CREDENTIALS_UNAVAILABLE",
	ReasonCredentialRejected:         "REASON_CREDENTIAL_REJECTED",
}

// Reasons lists every Reason, in order.
func Reasons() []Reason {
	out := make([]Reason, len(reasonNames))
	for i := range out {
		out[i] = Reason(i)
	}
	return out
}

// String returns the proto enum name, e.g. "REASON_SERVER_HINT".
func (r Reason) String() string {
	if r < 0 || int(r) >= len(reasonNames) {
		return "REASON_UNSPECIFIED"
	}
	return reasonNames[r]
}

// Decision is the result of applying a policy to one attempt's result.
type Decision struct {
	// Action says whether to retry.
	Action Action
	// Reason explains the decision.
	Reason Reason
	// Delay is the wait before the next attempt; set only for ActionRetry.
	Delay time.Duration
	// HintSource is the lower-case header name (or "body:<field>") that set
	// Delay; empty for backoff.
	HintSource string
	// Hint is the server's hint; valid when HasHint. It is reported also
	// when the broker gives up because the hint is too long.
	Hint    time.Duration
	HasHint bool
	// Rule names the provider catalog rule that decided (for example
	// "openai/insufficient_quota"); empty when the header readers and the
	// standard rules decided.
	Rule string
}

// Rand draws random numbers for jitter. *rand.Rand from math/rand/v2
// satisfies it; tests inject a deterministic source.
type Rand interface {
	// Int64N returns a uniform number in [0, n). n > 0.
	Int64N(n int64) int64
}

type globalRand struct{}

func (globalRand) Int64N(n int64) int64 { return rand.Int64N(n) }

// GlobalRand is a concurrency-safe Rand backed by math/rand/v2.
var GlobalRand Rand = globalRand{}

// Input is the result of one attempt, as the rules see it.
type Input struct {
	// Method is the request's HTTP method ("" means GET).
	Method string
	// Attempt is the 1-based number of the attempt that produced the result.
	// Values below 1 are treated as 1.
	Attempt int
	// Transport is the kind of transport error; TransportNone when a
	// response was received.
	Transport TransportError
	// Response is the response; used only when Transport is TransportNone.
	Response *providers.Response
	// HasIdempotencyKey reports that the request carried the policy's
	// idempotency-key header.
	HasIdempotencyKey bool
	// Reader overrides the policy's reader (provider chosen per request).
	Reader providers.HintReader
	// Reading, when not nil, is Reader's reading of Response, already made
	// by the caller; Decide then does not read the response again.
	Reading *providers.Reading
	// Deadline, when non-zero, is when the logical call must end: a wait
	// that would end after it gives up with ReasonDeadlineTooShort.
	Deadline time.Time
	// Now is the clock for Deadline; zero means Response.Now.
	Now time.Time
}

// Decide applies the policy's rules 1-6 to one attempt's result. It never
// blocks and never allocates. rnd draws the jitter; nil means GlobalRand.
func (p *Policy) Decide(in *Input, rnd Rand) Decision {
	var d Decision
	p.decide(in, rnd, &d)
	return d
}

// decide fills d in place: Decision and Reading are large enough that
// copying them through helpers shows in profiles of this hot path.
func (p *Policy) decide(in *Input, rnd Rand, d *Decision) {
	d.Action = ActionDoNotRetry
	attempt := max(in.Attempt, 1)
	if in.Transport != TransportNone {
		p.decideTransport(in, attempt, rnd, d)
		return
	}
	resp := in.Response
	if resp == nil {
		d.Reason = ReasonSuccess
		return
	}
	reader := in.Reader
	if reader == nil {
		reader = p.Reader()
	}
	var reading providers.Reading
	if in.Reading != nil {
		reading = *in.Reading
	} else {
		reading = reader.Read(resp)
	}
	// A status below 400 is a success unless a provider rule says retry
	// (Shopify's GraphQL throttling arrives in a 200); then the retry rules
	// apply as for a retryable status.
	if resp.Status < 400 && reading.Verdict != providers.VerdictRetry {
		d.Reason = ReasonSuccess
		return
	}
	d.Rule = reading.Rule
	if reading.HasHint {
		d.Hint, d.HasHint = reading.Hint.Delay, true
	}
	switch {
	case reading.Verdict == providers.VerdictDoNotRetry:
		d.Reason = ReasonProviderForbidsRetry
	case !p.statusRetryable(resp.Status, &reading, reader):
		d.Reason = ReasonStatusNotRetryable
	case !p.RetryUnsafeMethods && !in.HasIdempotencyKey && !IsSafeMethod(in.Method) && !reading.NotExecuted:
		// A provider's signal that the request was not executed (a
		// not_executed verdict header or rule) makes any method safe.
		d.Reason = ReasonUnsafeMethod
	case attempt > p.MaxRetries:
		d.Reason = ReasonAttemptsExhausted
	case reading.HasHint && reading.Hint.Delay > p.MaxDelay:
		d.Reason = ReasonHintExceedsMaxDelay
	case reading.HasHint:
		d.Delay, d.HintSource, d.Reason = reading.Hint.Delay, reading.Hint.Source, ReasonServerHint
		p.fitDeadline(in, d)
	default:
		d.Delay, d.Reason = p.Backoff.Delay(attempt, rnd), ReasonBackoff
		p.fitDeadline(in, d)
	}
}

func (p *Policy) decideTransport(in *Input, attempt int, rnd Rand, d *Decision) {
	switch {
	case in.Transport == TransportCanceled:
		d.Reason = ReasonCanceled
	case !in.Transport.Retryable():
		d.Reason = ReasonTransportErrorNotRetryable
	case !p.RetryTransportErrors:
		d.Reason = ReasonTransportRetryDisabled
	case !p.RetryUnsafeMethods && !in.HasIdempotencyKey && !IsSafeMethod(in.Method):
		d.Reason = ReasonUnsafeMethod
	case attempt > p.MaxRetries:
		d.Reason = ReasonAttemptsExhausted
	default:
		d.Delay, d.Reason = p.Backoff.Delay(attempt, rnd), ReasonBackoff
		p.fitDeadline(in, d)
	}
}

// fitDeadline makes d a retry, unless its wait would end at or after the
// deadline: then it gives up, still reporting the hint.
func (p *Policy) fitDeadline(in *Input, d *Decision) {
	d.Action = ActionRetry
	if in.Deadline.IsZero() {
		return
	}
	now := in.Now
	if now.IsZero() && in.Response != nil {
		now = in.Response.Now
	}
	if !now.Add(d.Delay).Before(in.Deadline) {
		d.Action, d.Reason, d.Delay, d.HintSource = ActionDoNotRetry, ReasonDeadlineTooShort, 0, ""
	}
}

func (p *Policy) statusRetryable(status int, reading *providers.Reading, reader providers.HintReader) bool {
	if status == 403 {
		return reading.HasHint
	}
	if reading.Verdict == providers.VerdictRetry {
		return true
	}
	if p.RetryableStatuses.Has(status) {
		return true
	}
	for _, s := range reader.ExtraRetryableStatuses() {
		if s == status {
			return true
		}
	}
	return false
}

// Ceiling returns the backoff ceiling after attempt n (1-based):
// min(Cap, Base × Factor^(n-1)), computed without overflow.
func (b Backoff) Ceiling(n int) time.Duration {
	if n < 1 {
		n = 1
	}
	c := float64(b.Base) * math.Pow(b.Factor, float64(n-1))
	if math.IsNaN(c) || c >= float64(b.Cap) {
		return b.Cap
	}
	return time.Duration(c)
}

// Delay draws the backoff delay after attempt n with the jitter mode:
// full is uniform in [0, ceiling], equal in [ceiling/2, ceiling], none is
// the ceiling. rnd nil means GlobalRand.
func (b Backoff) Delay(n int, rnd Rand) time.Duration {
	c := b.Ceiling(n)
	if c <= 0 {
		return 0
	}
	if rnd == nil {
		rnd = GlobalRand
	}
	switch b.Jitter {
	case JitterNone:
		return c
	case JitterEqual:
		half := c / 2
		return half + time.Duration(rnd.Int64N(int64(c-half)+1))
	default:
		return time.Duration(rnd.Int64N(int64(c) + 1))
	}
}
