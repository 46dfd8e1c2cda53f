package broker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ErrRequestBodyTooLarge is returned (wrapped) by Execute when the request
// body is longer than the client's limit (WithMaxRequestBody). Nothing is
// sent to the broker.
var ErrRequestBodyTooLarge = errors.New("broker: request body too large")

// Error is a failed RPC: the broker (or the gRPC layer on the way to it)
// answered with a status other than OK. Every gRPC failure of this package
// is an *Error; use errors.As, or the Is* helpers.
//
// Error implements GRPCStatus, so status.Code(err) and status.Convert(err)
// see the original status. errors.Is(err, context.DeadlineExceeded) and
// errors.Is(err, context.Canceled) hold for DEADLINE_EXCEEDED and CANCELLED.
type Error struct {
	// Code is the gRPC status code.
	Code codes.Code
	// Message is the broker's message, meant for humans.
	Message string
	// FieldViolations list what is wrong with an INVALID_ARGUMENT request
	// (from a google.rpc.BadRequest detail), one per problem.
	FieldViolations []FieldViolation
	// RetryDelay is how long to wait before trying again, from a
	// google.rpc.RetryInfo detail (RESOURCE_EXHAUSTED: pacing could not
	// admit the call within its deadline). Valid when HasRetryDelay.
	RetryDelay    time.Duration
	HasRetryDelay bool

	st *status.Status
}

// FieldViolation is one problem with a request field, for example
// {Field: "request.url", Description: "scheme must be http or https"}.
type FieldViolation struct {
	Field       string
	Description string
}

// Error describes the failure so that it reads as what it is, for example
// "broker: authentication failed (UNAUTHENTICATED): missing credentials: ...".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("broker: ")
	b.WriteString(describeCode(e.Code))
	b.WriteString(" (")
	b.WriteString(codeName(e.Code))
	b.WriteString(")")
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	if e.HasRetryDelay {
		fmt.Fprintf(&b, " (retry in %s)", e.RetryDelay)
	}
	return b.String()
}

// GRPCStatus returns the status the broker answered with.
func (e *Error) GRPCStatus() *status.Status {
	if e.st != nil {
		return e.st
	}
	return status.New(e.Code, e.Message)
}

// Is reports whether e matches context.DeadlineExceeded or
// context.Canceled by its code.
func (e *Error) Is(target error) bool {
	switch target {
	case context.DeadlineExceeded:
		return e.Code == codes.DeadlineExceeded
	case context.Canceled:
		return e.Code == codes.Canceled
	}
	return false
}

// fromRPC turns an error returned by a gRPC call into an *Error. It keeps
// nil as nil.
func fromRPC(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		// Not a status: grpc-go always returns statuses, but context errors
		// from interceptors may slip through.
		st = status.FromContextError(err)
	}
	e := &Error{Code: st.Code(), Message: st.Message(), st: st}
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.BadRequest:
			for _, fv := range d.GetFieldViolations() {
				e.FieldViolations = append(e.FieldViolations, FieldViolation{Field: fv.GetField(), Description: fv.GetDescription()})
			}
		case *errdetails.RetryInfo:
			if d.GetRetryDelay() != nil {
				e.RetryDelay, e.HasRetryDelay = d.GetRetryDelay().AsDuration(), true
			}
		}
	}
	return e
}

func describeCode(c codes.Code) string {
	switch c {
	case codes.Unauthenticated:
		return "authentication failed"
	case codes.PermissionDenied:
		return "permission denied"
	case codes.InvalidArgument:
		return "invalid request"
	case codes.FailedPrecondition:
		return "failed precondition"
	case codes.NotFound:
		return "not found"
	case codes.ResourceExhausted:
		return "rate limited"
	case codes.Unavailable:
		return "broker unavailable"
	case codes.DeadlineExceeded:
		return "deadline exceeded"
	case codes.Canceled:
		return "canceled"
	case codes.Unimplemented:
		return "not implemented by this broker"
	case codes.Internal:
		return "broker internal error"
	}
	return "call failed"
}

var codeNames = map[codes.Code]string{
	codes.OK: "OK", codes.Canceled: "CANCELLED", codes.Unknown: "UNKNOWN",
	codes.InvalidArgument: "INVALID_ARGUMENT", codes.DeadlineExceeded: "DEADLINE_EXCEEDED",
	codes.NotFound: "NOT_FOUND", codes.AlreadyExists: "ALREADY_EXISTS",
	codes.PermissionDenied: "PERMISSION_DENIED", codes.ResourceExhausted: "RESOURCE_EXHAUSTED",
	codes.FailedPrecondition: "FAILED_PRECONDITION", codes.Aborted: "ABORTED",
	codes.OutOfRange: "OUT_OF_RANGE", codes.Unimplemented: "UNIMPLEMENTED",
	codes.Internal: "INTERNAL", codes.Unavailable: "UNAVAILABLE",
	codes.DataLoss: "DATA_LOSS", codes.Unauthenticated: "UNAUTHENTICATED",
}

func codeName(c codes.Code) string {
	if n, ok := codeNames[c]; ok {
		return n
	}
	return fmt.Sprintf("CODE_%d", uint32(c))
}

func hasCode(err error, c codes.Code) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == c
}

// IsUnauthenticated reports whether err is an UNAUTHENTICATED *Error: a
// missing or unknown API key.
func IsUnauthenticated(err error) bool { return hasCode(err, codes.Unauthenticated) }

// IsPermissionDenied reports whether err is a PERMISSION_DENIED *Error: a
// policy of another tenant, or a destination the broker refuses to call.
func IsPermissionDenied(err error) bool { return hasCode(err, codes.PermissionDenied) }

// IsInvalidArgument reports whether err is an INVALID_ARGUMENT *Error; its
// FieldViolations say what to fix.
func IsInvalidArgument(err error) bool { return hasCode(err, codes.InvalidArgument) }

// IsUnknownPolicy reports whether err is a FAILED_PRECONDITION *Error,
// which the broker answers for a policy name the tenant does not have.
func IsUnknownPolicy(err error) bool { return hasCode(err, codes.FailedPrecondition) }

// IsFailedPrecondition reports whether err is a FAILED_PRECONDITION
// *Error: an unknown policy (IsUnknownPolicy is the same test), or
// RetryTask of a task that is not FAILED.
func IsFailedPrecondition(err error) bool { return hasCode(err, codes.FailedPrecondition) }

// IsNotFound reports whether err is a NOT_FOUND *Error: a task that does
// not exist or belongs to another tenant (the broker does not tell them
// apart, so task ids cannot be probed).
func IsNotFound(err error) bool { return hasCode(err, codes.NotFound) }

// IsRateLimited reports whether err is a RESOURCE_EXHAUSTED *Error: the
// tenant's pacing could not admit the call within its deadline. The
// *Error's RetryDelay says when to try again.
func IsRateLimited(err error) bool { return hasCode(err, codes.ResourceExhausted) }

// IsUnavailable reports whether err is an UNAVAILABLE *Error: the broker
// could not be reached, or its shared state is down and the policy fails
// closed. The client never retries this itself (see the package doc).
func IsUnavailable(err error) bool { return hasCode(err, codes.Unavailable) }

// TransportError is returned by Execute (and by the RoundTripper) when the
// final attempt ended without an HTTP response: a refused or reset
// connection, a timeout, a DNS failure, a rejected certificate...
type TransportError struct {
	// Kind is the kind of failure of the final attempt.
	Kind TransportErrorKind
	// Message describes it (URL redacted by the broker).
	Message string
	// Result is the full record of the call.
	Result *Result
}

// Error describes the failure and how many attempts were made.
func (e *TransportError) Error() string {
	n := 0
	var outcome Outcome
	if e.Result != nil {
		n, outcome = len(e.Result.Attempts), e.Result.Outcome
	}
	msg := fmt.Sprintf("broker: upstream transport error %s after %d attempt(s) (%s)", e.Kind, n, outcome)
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return msg
}

// NoResponseError is returned by Execute (and by the RoundTripper) when the
// broker ended the call without a final response and the last attempt (if
// any) was not a transport error: typically a cooldown gate that stays
// closed longer than the call can wait (OUTCOME_GATE_CLOSED), or pacing
// that cannot admit a retry within the deadline, or a broker-held
// credential that could not be had (OUTCOME_CREDENTIALS_UNAVAILABLE: the
// message ends with the broker's cause). RetryAfter says when to try again.
type NoResponseError struct {
	Outcome       Outcome
	RetryAfter    time.Duration
	HasRetryAfter bool
	Result        *Result
}

// Error describes the outcome.
func (e *NoResponseError) Error() string {
	n := 0
	if e.Result != nil {
		n = len(e.Result.Attempts)
	}
	msg := fmt.Sprintf("broker: no response after %d attempt(s) (%s)", n, e.Outcome)
	if e.Outcome == OutcomeCredentialsUnavailable && n > 0 && e.Result.Attempts[n-1].ErrorMessage != "" {
		msg += ": " + e.Result.Attempts[n-1].ErrorMessage // names the credential and the cause, never a secret
	}
	if e.HasRetryAfter {
		msg += fmt.Sprintf("; retry after %s", e.RetryAfter)
	}
	return msg
}

// RetryError is returned by Retry when it stops after a transport error
// (the function's error is not retryable, or no attempts are left). It
// wraps the last error returned by the function.
type RetryError struct {
	// Attempts is how many times the function was called.
	Attempts int
	// Decision is the broker's last decision.
	Decision Decision
	// Err is the function's last error.
	Err error
}

// Error says how many attempts were made and why the loop stopped.
func (e *RetryError) Error() string {
	return fmt.Sprintf("broker: giving up after %d attempt(s) (%s): %v", e.Attempts, e.Decision.Reason, e.Err)
}

// Unwrap returns the function's last error.
func (e *RetryError) Unwrap() error { return e.Err }
