package engine

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/retrybroker/retrybroker/internal/providers"
	"github.com/retrybroker/retrybroker/internal/store"
)

// Outcome says how an Execute call ended. Values mirror the proto enum.
type Outcome int8

// Outcomes.
const (
	OutcomeUnspecified Outcome = iota
	OutcomeSuccess
	OutcomeNotRetryable
	OutcomeAttemptsExhausted
	OutcomeHintExceedsMaxDelay
	OutcomeDeadlineTooShort
	OutcomeRetryBudgetExhausted
	OutcomeGateClosed
	OutcomeCanceled
	OutcomeBreakerOpen
	OutcomeShuttingDown
)

var outcomeNames = [...]string{"unspecified", "success", "not_retryable", "attempts_exhausted", "hint_exceeds_max_delay", "deadline_too_short", "retry_budget_exhausted", "gate_closed", "canceled", "breaker_open", "shutting_down"}

// String returns a snake_case name, e.g. "gate_closed".
func (o Outcome) String() string {
	if o < 0 || int(o) >= len(outcomeNames) {
		return "unspecified"
	}
	return outcomeNames[o]
}

// Doer sends one HTTP request. *http.Client satisfies it; the broker passes
// a client whose dialer checks every destination.
type Doer interface {
	Do(*http.Request) (*http.Response, error)
}

// ErrorClassifier maps an error from Doer.Do to a transport error kind.
type ErrorClassifier func(error) TransportError

// Observer receives the runner's metrics events. All methods must be cheap
// and safe for concurrent use. NopObserver ignores everything.
type Observer interface {
	// AttemptDone is called after each attempt with its status (0 for a
	// transport error), the transport error kind, and the decision taken.
	AttemptDone(status int, transport TransportError, d Decision)
	// Waiting is called with +1 when a call parks in a wait and -1 when it
	// resumes; cause is "backoff", "hint", "cooldown" or "pacing".
	Waiting(cause string, delta int)
	// InFlight is called with +1 when an Execute call starts, -1 when it ends.
	InFlight(delta int)
}

// NopObserver is an Observer that does nothing.
type NopObserver struct{}

// AttemptDone does nothing.
func (NopObserver) AttemptDone(int, TransportError, Decision) {}

// Waiting does nothing.
func (NopObserver) Waiting(string, int) {}

// InFlight does nothing.
func (NopObserver) InFlight(int) {}

// Runner performs Execute calls: the attempt loop with waits, cooldown
// gates, budgets and pacing, one client span per attempt.
type Runner struct {
	Clock      Clock
	Rand       Rand
	Store      store.Store
	Tracer     trace.Tracer
	Propagator propagation.TextMapPropagator
	Observer   Observer
	// DrainLimit bounds how many bytes of a failed response body are read
	// to let the connection be reused. Default 64 KiB.
	DrainLimit int64
	// HintPeek is how many leading bytes of an error body are given to
	// body-aware readers. Default 64 KiB.
	HintPeek int64
	// StoreTimeout bounds each store call (default 1s), within the call's deadline.
	StoreTimeout time.Duration
}

// Call is one Execute call, validated by the caller.
type Call struct {
	Policy *Policy
	// Provider is the name of the chosen reader, Reader the reader itself.
	Provider string
	Reader   providers.HintReader
	// Method, URL, Header and Body describe the request. Run never modifies
	// Header: every attempt sends a copy, and a generated idempotency key
	// goes into a copy of its own, so a Call can be run again.
	Method string
	URL    *url.URL
	Header http.Header
	Body   []byte
	// Client sends the attempts; Classify maps its errors.
	Client   Doer
	Classify ErrorClassifier
	// RedactedURL is URL without userinfo and query values, for spans and logs.
	RedactedURL string
	// Tenant namespaces all shared state.
	Tenant string
	// GateByCredential adds a fingerprint of the Authorization header to
	// the gate key.
	GateByCredential bool
	// FailClosed makes a store outage fail the call (*StoreError) instead of
	// serving on local state.
	FailClosed bool
	Budget     store.BudgetConfig
	Pace       store.PaceConfig
	// MaxResponseBody bounds the returned body; 0 means the policy's.
	MaxResponseBody int64
}

// AttemptRecord records one attempt.
type AttemptRecord struct {
	Number    int
	Start     time.Time
	Duration  time.Duration
	Status    int
	Transport TransportError
	// Error describes a transport failure, with the URL redacted.
	Error    string
	Decision Decision
	// Waited is the time spent waiting before this attempt was sent.
	Waited time.Duration
}

// FinalResponse is the last response received.
type FinalResponse struct {
	Status    int
	Header    http.Header
	Body      []byte
	Truncated bool
}

// Result is the outcome of an Execute call.
type Result struct {
	Response *FinalResponse
	Attempts []AttemptRecord
	Outcome  Outcome
	// RetryAfter is when the caller may try again, when the broker gave up
	// early on a hint, a deadline or a closed gate; valid when HasRetryAfter.
	RetryAfter    time.Duration
	HasRetryAfter bool
}

// PacingError reports that pacing could not admit the call within its
// deadline; Wait is how long it would have had to wait.
type PacingError struct{ Wait time.Duration }

func (e *PacingError) Error() string {
	return fmt.Sprintf("pacing cannot admit the call within its deadline (next slot in %s)", e.Wait)
}

// DestinationError reports that the destination guard refused the dialled
// address; no connection was opened.
type DestinationError struct{ Err error }

func (e *DestinationError) Error() string { return "destination refused: " + e.Err.Error() }
func (e *DestinationError) Unwrap() error { return e.Err }

// StoreError reports that the shared store failed and the policy fails closed.
type StoreError struct{ Err error }

func (e *StoreError) Error() string { return "shared state unavailable: " + e.Err.Error() }
func (e *StoreError) Unwrap() error { return e.Err }

func (r *Runner) defaults() {
	if r.Clock == nil {
		r.Clock = SystemClock{}
	}
	if r.Rand == nil {
		r.Rand = GlobalRand
	}
	if r.Tracer == nil {
		r.Tracer = noop.NewTracerProvider().Tracer("")
	}
	if r.Propagator == nil {
		r.Propagator = propagation.TraceContext{}
	}
	if r.Observer == nil {
		r.Observer = NopObserver{}
	}
	if r.DrainLimit == 0 {
		r.DrainLimit = 64 << 10
	}
	if r.HintPeek == 0 {
		r.HintPeek = 64 << 10
	}
	if r.StoreTimeout == 0 {
		r.StoreTimeout = time.Second
	}
}

// GateScope returns the gate scope for a provider and host: the provider
// for named providers (their quotas span hosts), the host otherwise.
func GateScope(provider, host string) string {
	switch provider {
	case "", "retry-after", "none":
		return "host:" + host
	}
	return "provider:" + provider
}

// CredentialFingerprint returns a short hex SHA-256 of an Authorization
// value, or "" for none. The value itself is never stored.
func CredentialFingerprint(authorization string) string {
	if authorization == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(authorization))
	return hex.EncodeToString(sum[:16])
}

// GateKey returns the cooldown gate for a call.
func (c *Call) GateKey() store.GateKey {
	k := store.GateKey{Tenant: c.Tenant, Scope: GateScope(c.Provider, c.URL.Host)}
	if c.GateByCredential {
		k.Credential = CredentialFingerprint(c.Header.Get("Authorization"))
	}
	return k
}

// Run performs the call. It returns a Result for every upstream outcome,
// and an error only for a refused destination (*DestinationError), pacing
// that cannot admit the call (*PacingError), a fail-closed store outage
// (*StoreError) or the caller's cancellation (the context's error).
func (r *Runner) Run(ctx context.Context, c *Call) (*Result, error) {
	r.defaults()
	r.Observer.InFlight(1)
	defer r.Observer.InFlight(-1)
	p := c.Policy
	deadline := r.Clock.Now().Add(p.TotalTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	// The total timeout bounds attempts in progress too (a slow upstream
	// cannot hold the call past it); caller tells the caller's own
	// cancellation apart from it.
	caller := ctx
	ctx, cancelTotal := context.WithTimeout(ctx, p.TotalTimeout)
	defer cancelTotal()
	header := c.Header // each attempt sends a copy; copied here only to write
	if header == nil {
		header = http.Header{}
	}
	hasKey := header.Get(p.IdempotencyHeader) != ""
	if !hasKey && p.GenerateIdempotencyKey {
		header = header.Clone()
		header.Set(p.IdempotencyHeader, uuid.NewString())
		hasKey = true
	}
	maxBody := p.MaxResponseBody
	if c.MaxResponseBody > 0 && c.MaxResponseBody < maxBody {
		maxBody = c.MaxResponseBody
	}
	gate := c.GateKey()
	res := &Result{}
	var waited time.Duration
	for n := 1; ; n++ {
		// Admission: cooldown gate, then pacing.
		ticket, wait, stop, err := r.admit(ctx, c, gate, n, deadline, res)
		waited += wait
		if err != nil || stop {
			return res, err
		}
		rec, final, err := r.attempt(ctx, caller, c, header, hasKey, n, deadline, maxBody, gate, ticket)
		rec.Waited = waited
		waited = 0
		res.Attempts = append(res.Attempts, rec)
		if err != nil {
			return res, err
		}
		d := rec.Decision
		if d.Action != ActionRetry {
			res.Response = final
			res.Outcome = outcomeOf(d)
			if d.HasHint && (d.Reason == ReasonHintExceedsMaxDelay || d.Reason == ReasonDeadlineTooShort || d.Reason == ReasonRetryBudgetExhausted) {
				res.RetryAfter, res.HasRetryAfter = d.Hint, true
			}
			return res, nil
		}
		cause := "backoff"
		if d.Reason == ReasonServerHint {
			cause = "hint"
		}
		if err := r.wait(ctx, cause, d.Delay); err != nil {
			if caller.Err() != nil {
				res.Outcome = OutcomeCanceled
				return res, caller.Err()
			}
			res.Outcome = OutcomeDeadlineTooShort // the total timeout ended the wait
			return res, nil
		}
		waited += d.Delay
	}
}

// admit loops until the gate is open and pacing admits the attempt, waiting
// when the wait fits. stop reports that the call ended (res filled in).
func (r *Runner) admit(ctx context.Context, c *Call, gate store.GateKey, n int, deadline time.Time, res *Result) (store.Ticket, time.Duration, bool, error) {
	if r.Store == nil {
		return store.Ticket{}, 0, false, nil
	}
	var waited time.Duration
	for {
		now := r.Clock.Now()
		sctx, cancel := r.storeCtx(ctx, c)
		adm, err := r.Store.Admit(sctx, store.AdmitRequest{
			Gate: gate, PaceHost: c.URL.Host, Pace: c.Pace, PaceMaxWait: deadline.Sub(now),
			FirstAttempt: n == 1, Budget: c.Budget, FailClosed: c.FailClosed, Now: now,
		})
		cancel()
		if err != nil {
			if cerr := ctx.Err(); cerr != nil {
				return store.Ticket{}, waited, true, cerr
			}
			return store.Ticket{}, waited, true, &StoreError{Err: err}
		}
		if !adm.GateClosedUntil.IsZero() {
			wait := adm.GateClosedUntil.Sub(now)
			if wait > c.Policy.MaxDelay || !now.Add(wait).Before(deadline) {
				res.Outcome = OutcomeGateClosed
				res.RetryAfter, res.HasRetryAfter = wait, true
				return store.Ticket{}, waited, true, nil
			}
			if err := r.wait(ctx, "cooldown", wait); err != nil {
				res.Outcome = OutcomeCanceled
				return store.Ticket{}, waited, true, err
			}
			waited += wait
			continue
		}
		if adm.PaceDenied {
			if n == 1 {
				return store.Ticket{}, waited, true, &PacingError{Wait: adm.PaceWait}
			}
			res.Outcome = OutcomeDeadlineTooShort
			res.RetryAfter, res.HasRetryAfter = adm.PaceWait, true
			return store.Ticket{}, waited, true, nil
		}
		if adm.PaceWait > 0 {
			if err := r.wait(ctx, "pacing", adm.PaceWait); err != nil {
				r.complete(ctx, c, gate, adm.Ticket, store.Observation{}, false)
				res.Outcome = OutcomeCanceled
				return store.Ticket{}, waited, true, err
			}
			waited += adm.PaceWait
		}
		return adm.Ticket, waited, false, nil
	}
}

// wait sleeps d on the clock inside a span, so waits show in traces.
func (r *Runner) wait(ctx context.Context, cause string, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	ctx, span := r.Tracer.Start(ctx, "retrybroker.wait", trace.WithAttributes(
		attrWaitCause.String(cause), attrWaitMS.Int64(d.Milliseconds())))
	defer span.End()
	r.Observer.Waiting(cause, 1)
	defer r.Observer.Waiting(cause, -1)
	return r.Clock.Sleep(ctx, d)
}

func (r *Runner) storeCtx(ctx context.Context, _ *Call) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, r.StoreTimeout)
}

// complete ends an admitted attempt, even when the caller's context is
// already canceled, and reports whether a retry may be spent.
//
// A call the store did not register (empty ticket) with nothing to record
// and no retry to pay for needs no round trip at all.
func (r *Runner) complete(ctx context.Context, c *Call, gate store.GateKey, t store.Ticket, obs store.Observation, spend bool) (bool, error) {
	if r.Store == nil || (t.ID == "" && obs.CloseUntil.IsZero() && !obs.HasQuota && !spend) {
		return true, nil
	}
	sctx, cancel := r.storeCtx(context.WithoutCancel(ctx), c)
	defer cancel()
	out, err := r.Store.Complete(sctx, store.CompleteRequest{
		Gate: gate, Ticket: t, Obs: obs, SpendRetry: spend, Budget: c.Budget, MaxGate: c.Policy.MaxGate,
		FailClosed: c.FailClosed, Now: r.Clock.Now(),
	})
	if err != nil {
		return false, err
	}
	return out.RetryAllowed || !spend, nil
}

// attempt sends attempt n and decides what follows. final holds the
// response when the decision is not to retry.
func (r *Runner) attempt(ctx, caller context.Context, c *Call, header http.Header, hasKey bool, n int, deadline time.Time, maxBody int64, gate store.GateKey, ticket store.Ticket) (AttemptRecord, *FinalResponse, error) {
	p := c.Policy
	rec := AttemptRecord{Number: n}
	actx, cancel := context.WithTimeout(ctx, p.AttemptTimeout)
	defer cancel()
	actx, span := r.startAttemptSpan(actx, c, n)
	defer span.End()

	req, err := http.NewRequestWithContext(actx, c.Method, c.URL.String(), bytes.NewReader(c.Body))
	if err != nil {
		r.complete(ctx, c, gate, ticket, store.Observation{}, false)
		rec.Transport, rec.Error = TransportInvalidURL, "cannot build request"
		rec.Decision = Decision{Action: ActionDoNotRetry, Reason: ReasonTransportErrorNotRetryable}
		return rec, nil, nil
	}
	req.Header = header.Clone()
	if p.AttemptHeader != "" {
		req.Header.Set(p.AttemptHeader, strconv.Itoa(n))
	}
	r.Propagator.Inject(actx, propagation.HeaderCarrier(req.Header))
	if len(c.Body) == 0 {
		req.Body, req.ContentLength = http.NoBody, 0
	}
	rec.Start = r.Clock.Now()
	resp, err := c.Client.Do(req)
	now := r.Clock.Now()
	rec.Duration = now.Sub(rec.Start)

	in := Input{Method: c.Method, Attempt: n, HasIdempotencyKey: hasKey, Reader: c.Reader, Deadline: deadline, Now: now}
	var obs store.Observation
	var peek []byte
	if err != nil {
		kind := c.Classify(err)
		if caller.Err() != nil {
			kind = TransportCanceled
		}
		rec.Transport = kind
		rec.Error = errorText(err, c.URL)
		in.Transport = kind
		endSpanError(span, kind)
		if kind == TransportDestinationRefused {
			r.complete(ctx, c, gate, ticket, obs, false)
			return rec, nil, &DestinationError{Err: err}
		}
	} else {
		rec.Status = resp.StatusCode
		if resp.StatusCode >= 400 {
			peek, _ = io.ReadAll(io.LimitReader(resp.Body, min(r.HintPeek, maxBody+1)))
		}
		pr := &providers.Response{Status: resp.StatusCode, Header: resp.Header, Body: peek, Now: now}
		reading := c.Reader.Read(pr)
		in.Response, in.Reading = pr, &reading
		obs = Observation(resp.StatusCode, reading, now)
		setSpanStatus(span, resp.StatusCode)
	}
	d := p.Decide(&in, r.Rand)
	allowed, serr := r.complete(ctx, c, gate, ticket, obs, d.Action == ActionRetry)
	if serr == nil && !allowed {
		d = Decision{Action: ActionDoNotRetry, Reason: ReasonRetryBudgetExhausted, Hint: d.Hint, HasHint: d.HasHint}
	}
	rec.Decision = d
	RecordDecision(span, d)
	r.Observer.AttemptDone(rec.Status, rec.Transport, d)
	if resp == nil {
		if rec.Transport == TransportCanceled {
			return rec, nil, caller.Err()
		}
		return rec, nil, nil
	}
	if d.Action == ActionRetry {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, r.DrainLimit))
		_ = resp.Body.Close()
		return rec, nil, nil
	}
	final := &FinalResponse{Status: resp.StatusCode, Header: resp.Header}
	body := peek
	if int64(len(body)) <= maxBody {
		rest, _ := io.ReadAll(io.LimitReader(resp.Body, maxBody+1-int64(len(body))))
		body = append(body, rest...)
	}
	if int64(len(body)) > maxBody {
		body, final.Truncated = body[:maxBody], true
	}
	final.Body = body
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, r.DrainLimit))
	_ = resp.Body.Close()
	return rec, final, nil
}

// Observation turns a reading into what the store records for the gate:
// a hint on 429, 403 or 503 closes the gate until the hinted time; any
// reported quota is tracked.
func Observation(status int, reading providers.Reading, now time.Time) store.Observation {
	var obs store.Observation
	if reading.HasHint && (status == 429 || status == 403 || status == 503) && reading.Hint.Delay > 0 {
		obs.CloseUntil = now.Add(reading.Hint.Delay)
	}
	if reading.HasQuota {
		obs.HasQuota, obs.Remaining, obs.Reset = true, reading.Quota.Remaining, reading.Quota.Reset
	}
	return obs
}

// outcomeOf maps the final decision to the call's outcome.
func outcomeOf(d Decision) Outcome {
	switch d.Reason {
	case ReasonSuccess:
		return OutcomeSuccess
	case ReasonAttemptsExhausted:
		return OutcomeAttemptsExhausted
	case ReasonHintExceedsMaxDelay:
		return OutcomeHintExceedsMaxDelay
	case ReasonDeadlineTooShort:
		return OutcomeDeadlineTooShort
	case ReasonRetryBudgetExhausted:
		return OutcomeRetryBudgetExhausted
	case ReasonGateClosed:
		return OutcomeGateClosed
	case ReasonCanceled:
		return OutcomeCanceled
	}
	return OutcomeNotRetryable
}

// errorText describes a transport error without the URL (which may hold
// secrets in its query) and without internal addresses beyond the host.
func errorText(err error, u *url.URL) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	msg := err.Error()
	if u != nil && u.RawQuery != "" {
		msg = redactQueryIn(msg, u.RawQuery)
	}
	return msg
}

func redactQueryIn(msg, rawQuery string) string {
	return strings.ReplaceAll(msg, rawQuery, "REDACTED")
}
