package broker

import (
	"strings"
	"time"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
)

// Action is what the caller should do with a request next.
type Action int8

// Actions. The zero value is never returned by the broker.
const (
	ActionUnspecified Action = iota
	// ActionRetry: send the request again after Decision.Delay.
	ActionRetry
	// ActionDoNotRetry: stop; Decision.Reason says why.
	ActionDoNotRetry
)

// String returns "retry", "do_not_retry" or "unspecified" (the spelling of
// the conformance vectors).
func (a Action) String() string {
	switch a {
	case ActionRetry:
		return "retry"
	case ActionDoNotRetry:
		return "do_not_retry"
	}
	return "unspecified"
}

// Reason explains a Decision. Its value is the proto enum name, for
// example "REASON_SERVER_HINT", so it can be logged and compared as is.
type Reason string

// Reasons (see proto/retrybroker/v1/broker.proto for each one's meaning).
const (
	ReasonUnspecified                Reason = "REASON_UNSPECIFIED"
	ReasonServerHint                 Reason = "REASON_SERVER_HINT"
	ReasonBackoff                    Reason = "REASON_BACKOFF"
	ReasonSuccess                    Reason = "REASON_SUCCESS"
	ReasonStatusNotRetryable         Reason = "REASON_STATUS_NOT_RETRYABLE"
	ReasonUnsafeMethod               Reason = "REASON_UNSAFE_METHOD"
	ReasonAttemptsExhausted          Reason = "REASON_ATTEMPTS_EXHAUSTED"
	ReasonHintExceedsMaxDelay        Reason = "REASON_HINT_EXCEEDS_MAX_DELAY"
	ReasonDeadlineTooShort           Reason = "REASON_DEADLINE_TOO_SHORT"
	ReasonTransportErrorNotRetryable Reason = "REASON_TRANSPORT_ERROR_NOT_RETRYABLE"
	ReasonTransportRetryDisabled     Reason = "REASON_TRANSPORT_RETRY_DISABLED"
	ReasonProviderForbidsRetry       Reason = "REASON_PROVIDER_FORBIDS_RETRY"
	ReasonRetryBudgetExhausted       Reason = "REASON_RETRY_BUDGET_EXHAUSTED"
	ReasonGateClosed                 Reason = "REASON_GATE_CLOSED"
	ReasonCanceled                   Reason = "REASON_CANCELED"
	ReasonBreakerOpen                Reason = "REASON_BREAKER_OPEN"
	ReasonShuttingDown               Reason = "REASON_SHUTTING_DOWN"
	ReasonCredentialsUnavailable     Reason = "REASON_CREDENTIALS_UNAVAILABLE"
	ReasonCredentialRejected         Reason = "REASON_CREDENTIAL_REJECTED"
)

// Outcome says how an Execute call ended. Its value is the proto enum
// name, for example "OUTCOME_DEADLINE_TOO_SHORT".
type Outcome string

// Outcomes (see proto/retrybroker/v1/broker.proto).
const (
	OutcomeUnspecified          Outcome = "OUTCOME_UNSPECIFIED"
	OutcomeSuccess              Outcome = "OUTCOME_SUCCESS"
	OutcomeNotRetryable         Outcome = "OUTCOME_NOT_RETRYABLE"
	OutcomeAttemptsExhausted    Outcome = "OUTCOME_ATTEMPTS_EXHAUSTED"
	OutcomeHintExceedsMaxDelay  Outcome = "OUTCOME_HINT_EXCEEDS_MAX_DELAY"
	OutcomeDeadlineTooShort     Outcome = "OUTCOME_DEADLINE_TOO_SHORT"
	OutcomeRetryBudgetExhausted Outcome = "OUTCOME_RETRY_BUDGET_EXHAUSTED"
	OutcomeGateClosed           Outcome = "OUTCOME_GATE_CLOSED"
	OutcomeCanceled             Outcome = "OUTCOME_CANCELED"
	OutcomeBreakerOpen          Outcome = "OUTCOME_BREAKER_OPEN"
	OutcomeShuttingDown         Outcome = "OUTCOME_SHUTTING_DOWN"
	// OutcomeCredentialsUnavailable: the policy's broker-held credential
	// could not be had; the last attempt was not sent (its ErrorMessage
	// says why).
	OutcomeCredentialsUnavailable Outcome = "OUTCOME_CREDENTIALS_UNAVAILABLE"
)

// TransportErrorKind is the kind of a failure that produced no HTTP
// response. Its value is the snake_case name used by the conformance
// vectors, for example "connection_reset"; the empty kind means "no
// transport error".
type TransportErrorKind string

// Transport error kinds. The first five are retryable (subject to policy).
const (
	KindNone              TransportErrorKind = ""
	KindConnectionRefused TransportErrorKind = "connection_refused"
	KindConnectionReset   TransportErrorKind = "connection_reset"
	KindEOF               TransportErrorKind = "eof"
	KindTimeout           TransportErrorKind = "timeout"
	KindDNSTemporary      TransportErrorKind = "dns_temporary"
	KindDNSNotFound       TransportErrorKind = "dns_not_found"
	KindTLSCertificate    TransportErrorKind = "tls_certificate"
	KindCanceled          TransportErrorKind = "canceled"
	KindInvalidURL        TransportErrorKind = "invalid_url"
	// KindDestinationRefused: the broker's destination guard refused the
	// address. Execute reports it as a PERMISSION_DENIED *Error; it never
	// appears in an Attempt and ClassifyResponse does not accept it.
	KindDestinationRefused TransportErrorKind = "destination_refused"
	KindOther              TransportErrorKind = "other"
	// KindResponseHeadersTooLarge: the upstream's response head went past
	// the broker's cap (1 MiB, or 1,000 header lines). Retryable.
	KindResponseHeadersTooLarge TransportErrorKind = "response_headers_too_large"
)

const transportPrefix = "TRANSPORT_ERROR_"

// toProto maps a kind to the proto enum; ok is false for an unknown kind.
func (k TransportErrorKind) toProto() (rbv1.TransportError, bool) {
	if k == KindNone {
		return rbv1.TransportError_TRANSPORT_ERROR_UNSPECIFIED, true
	}
	v, ok := rbv1.TransportError_value[transportPrefix+strings.ToUpper(string(k))]
	return rbv1.TransportError(v), ok
}

func kindFromProto(t rbv1.TransportError) TransportErrorKind {
	if t == rbv1.TransportError_TRANSPORT_ERROR_UNSPECIFIED {
		return KindNone
	}
	name, ok := rbv1.TransportError_name[int32(t)]
	if !ok {
		return KindOther
	}
	return TransportErrorKind(strings.ToLower(strings.TrimPrefix(name, transportPrefix)))
}

// Decision is the broker's verdict on one attempt.
type Decision struct {
	// Action says whether to send the request again.
	Action Action
	// Delay is the wait before the next attempt; meaningful only when
	// Action is ActionRetry (zero means "retry at once"). A delay set by a
	// server hint is exact: jitter never shortens it.
	Delay time.Duration
	// HintSource is the lower-case header name that set the delay, or
	// "body:<field>" for a body field; "" for backoff or no hint.
	HintSource string
	// Hint is the server's hint, valid when HasHint. It is reported also
	// when the broker gives up because the hint is longer than the policy's
	// max_delay or the caller's deadline.
	Hint    time.Duration
	HasHint bool
	// Reason explains the decision, e.g. ReasonServerHint.
	Reason Reason
	// Provider is the hint reader that was used, e.g. "github".
	Provider string
}

func decisionFromProto(d *rbv1.Decision) Decision {
	out := Decision{
		HintSource: d.GetHintSource(),
		Reason:     Reason(d.GetReason().String()),
		Provider:   d.GetProvider(),
	}
	switch d.GetAction() {
	case rbv1.Action_ACTION_RETRY:
		out.Action = ActionRetry
	case rbv1.Action_ACTION_DO_NOT_RETRY:
		out.Action = ActionDoNotRetry
	}
	if d.GetDelay() != nil {
		out.Delay = d.GetDelay().AsDuration()
	}
	if d.GetHint() != nil {
		out.Hint, out.HasHint = d.GetHint().AsDuration(), true
	}
	return out
}

// HeaderField is one header line, as sent or received: lists of
// HeaderFields keep order and duplicates.
type HeaderField struct {
	Name  string
	Value string
}

// Attempt records one send made by the broker during Execute.
type Attempt struct {
	// Number is 1-based.
	Number int
	// Start is when the request was sent (the broker's clock).
	Start time.Time
	// Duration is from sending to the response headers, or to the error.
	Duration time.Duration
	// Waited is how long the broker waited before sending this attempt
	// (backoff, hint, cooldown gate or pacing).
	Waited time.Duration
	// Status is the HTTP status, or 0 when TransportError is set.
	Status int
	// TransportError is the kind of failure when there was no response.
	TransportError TransportErrorKind
	// ErrorMessage describes the transport failure (URL redacted by the broker).
	ErrorMessage string
	// Decision is what the broker decided after this attempt.
	Decision Decision
}

// Result is the record of an Execute call.
type Result struct {
	// Attempts lists every send, in order.
	Attempts []Attempt
	// Outcome says how the call ended.
	Outcome Outcome
	// RetryAfter is when the caller may try again, valid when HasRetryAfter:
	// set when the broker gave up early on a hint, a deadline or a closed
	// cooldown gate.
	RetryAfter    time.Duration
	HasRetryAfter bool
	// Provider is the hint reader that was used.
	Provider string
	// ResponseHeaders are the final response's headers exactly as the
	// broker returned them (order and duplicates kept); nil when there is no
	// final response. The *http.Response's Header holds the same lines.
	ResponseHeaders []HeaderField
	// BodyTruncated is true when the final body was longer than the
	// policy's max_response_body and was cut (Execute).
	BodyTruncated bool
	// BodyIncomplete is true when the final body ended early: the upstream
	// broke it off (Execute, ExecuteStream) or a stream limit, the
	// caller or the broker's shutdown ended it (ExecuteStream). Such a call
	// never has OutcomeSuccess.
	BodyIncomplete bool
	// BodyEnd says how a streamed body ended (ExecuteStream only; empty for
	// Execute).
	BodyEnd BodyEnd
	// BodyBytes is the number of body bytes the broker streamed
	// (ExecuteStream only).
	BodyBytes int64
}

func resultFromProto(r *rbv1.ExecuteResponse) *Result {
	res := &Result{
		Outcome:  Outcome(r.GetOutcome().String()),
		Provider: r.GetProvider(),
	}
	if r.GetRetryAfter() != nil {
		res.RetryAfter, res.HasRetryAfter = r.GetRetryAfter().AsDuration(), true
	}
	if resp := r.GetResponse(); resp != nil {
		res.ResponseHeaders = make([]HeaderField, 0, len(resp.GetHeaders()))
		for _, h := range resp.GetHeaders() {
			res.ResponseHeaders = append(res.ResponseHeaders, HeaderField{Name: h.GetName(), Value: h.GetValue()})
		}
		res.BodyTruncated = resp.GetBodyTruncated()
		res.BodyIncomplete = resp.GetBodyIncomplete()
	}
	res.Attempts = attemptsFromProto(r.GetAttempts())
	return res
}

// attemptsFromProto converts the broker's attempt records, in order.
func attemptsFromProto(in []*rbv1.Attempt) []Attempt {
	out := make([]Attempt, 0, len(in))
	for _, a := range in {
		at := Attempt{
			Number:         int(a.GetNumber()),
			Status:         int(a.GetStatusCode()),
			TransportError: kindFromProto(a.GetTransportError()),
			ErrorMessage:   a.GetErrorMessage(),
			Decision:       decisionFromProto(a.GetDecision()),
		}
		if a.GetStartTime() != nil {
			at.Start = a.GetStartTime().AsTime()
		}
		if a.GetDuration() != nil {
			at.Duration = a.GetDuration().AsDuration()
		}
		if a.GetWaited() != nil {
			at.Waited = a.GetWaited().AsDuration()
		}
		out = append(out, at)
	}
	return out
}
