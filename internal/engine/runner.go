package engine

import (
	"context"
	cryptorand "crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/retrybroker/retrybroker/internal/providers"
	"github.com/retrybroker/retrybroker/internal/store"
)

// Outcome says how an Execute call ended.
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
	// OutcomeCredentialsUnavailable: the policy's broker-held credential
	// could not be had; the attempt was not sent (its record says why).
	OutcomeCredentialsUnavailable
)

var outcomeNames = [...]string{
	OutcomeUnspecified:          "unspecified",
	OutcomeSuccess:              "success",
	OutcomeNotRetryable:         "not_retryable",
	OutcomeAttemptsExhausted:    "attempts_exhausted",
	OutcomeHintExceedsMaxDelay:  "hint_exceeds_max_delay",
	OutcomeDeadlineTooShort:     "deadline_too_short",
	OutcomeRetryBudgetExhausted: "retry_budget_exhausted",
	OutcomeGateClosed:           "gate_closed",
	OutcomeCanceled:             "canceled",
	OutcomeBreakerOpen:          "breaker_open",
	OutcomeShuttingDown:         "shutting_down",

	OutcomeCredentialsUnavailable: "credentials_unavailable",
}

// String returns a snake_case name, e.g. "gate_closed".
func (o Outcome) String() string {
	if o < 0 || int(o) >= len(outcomeNames) {
		return "unspecified"
	}
	return outcomeNames[o]
}

// Outcomes lists every Outcome, in order.
func Outcomes() []Outcome {
	out := make([]Outcome, len(outcomeNames))
	for i := range out {
		out[i] = Outcome(i)
	}
	return out
}

// Doer sends one HTTP request. *http.Client satisfies it; the broker passes
// a client whose dialer checks every destination.
type Doer interface {
	Do(*http.Request) (*http.Response, error)
}

// ErrorClassifier maps an error from Doer.Do (or from reading a response
// body) to a transport error kind.
type ErrorClassifier func(error) TransportError

// Observer receives the runner's metrics events. All methods must be cheap
// and safe for concurrent use. NopObserver ignores everything.
type Observer interface {
	// AttemptDone is called after each attempt with its status (0 for a
	// transport error), the transport error kind, and the decision taken.
	AttemptDone(status int, transport TransportError, d Decision)
	// Waiting is called with +1 when a call parks in a wait and -1 when it
	// resumes; cause is "backoff", "hint", "cooldown", "breaker", "held",
	// "pacing" or "budget" (room in the body budget).
	Waiting(cause string, delta int)
	// InFlight is called with +1 when an Execute call starts, -1 when it ends.
	InFlight(delta int)
	// Probe is called when an attempt that went out as a probe (of a
	// learning gate or a half-open breaker) ends, with what it showed.
	Probe(result store.Result)
	// StoreError is called when a store operation (op: "admit",
	// "complete", "observe") failed and the call went on without it.
	StoreError(op string)
	// BreakerChange is called when a completion or an observation changed
	// its gate's failure breaker.
	BreakerChange(c store.BreakerChange)
	// CallDone is called once when a call ends: rpc is "execute" (Run) or
	// "stream" (Stream); outcome is the call's (OutcomeUnspecified when it
	// ended with an error before any outcome: a refused destination,
	// pacing, the body budget, a fail-closed store); attempts is the number
	// of attempts sent; d is how long the call took by the runner's clock,
	// waits (and a streamed body) included.
	CallDone(rpc string, outcome Outcome, attempts int, d time.Duration)
	// StoreRoundTrip is called after each store call the engine makes (op:
	// "admit", "complete", "observe") with its latency in real time
	// (time.Since, not the runner's clock: it is a measurement) and whether
	// it failed.
	StoreRoundTrip(op string, d time.Duration, failed bool)
	// GateClosed is called when a response closed its gate (a completion
	// or an observation whose gate is closed afterwards): source is "hint"
	// (the response's retry hint) or "quota" (its reported quota is used
	// up); hold is how long the gate stays closed from now.
	GateClosed(source string, hold time.Duration)
	// GateHeld is called when the store held an attempt
	// (store.Admission.Held): the gate's learned quota for its epoch is
	// used and its probe is in flight, or its half-open breaker's probe is.
	GateHeld()
	// StreamOpen is called with +1 when a streamed body starts (its head
	// was sent to the caller) and -1 when it ends.
	StreamOpen(delta int)
	// StreamBytes is called with the body bytes each chunk gave the caller.
	StreamBytes(n int)
	// StreamEnd is called once when a Stream call ends, with how its body
	// ended (BodyEndNoResponse when there was no final response).
	StreamEnd(end BodyEnd)
}

// CredentialObserver is what an Observer may also implement to hear of
// broker-held credentials: CredentialUnavailable for each attempt that was
// not sent because its credential could not be had (err names the
// credential and the cause, never a secret), CredentialApplied for each
// attempt that got its credential. Both must be cheap.
type CredentialObserver interface {
	CredentialUnavailable(tenant, credential string, err error)
	CredentialApplied(tenant, credential string)
}

// NopObserver is an Observer that does nothing.
type NopObserver struct{}

// AttemptDone does nothing.
func (NopObserver) AttemptDone(int, TransportError, Decision) {}

// Waiting does nothing.
func (NopObserver) Waiting(string, int) {}

// InFlight does nothing.
func (NopObserver) InFlight(int) {}

// Probe does nothing.
func (NopObserver) Probe(store.Result) {}

// StoreError does nothing.
func (NopObserver) StoreError(string) {}

// BreakerChange does nothing.
func (NopObserver) BreakerChange(store.BreakerChange) {}

// CallDone does nothing.
func (NopObserver) CallDone(string, Outcome, int, time.Duration) {}

// StoreRoundTrip does nothing.
func (NopObserver) StoreRoundTrip(string, time.Duration, bool) {}

// GateClosed does nothing.
func (NopObserver) GateClosed(string, time.Duration) {}

// GateHeld does nothing.
func (NopObserver) GateHeld() {}

// StreamOpen does nothing.
func (NopObserver) StreamOpen(int) {}

// StreamBytes does nothing.
func (NopObserver) StreamBytes(int) {}

// StreamEnd does nothing.
func (NopObserver) StreamEnd(BodyEnd) {}

// Runner defaults.
const (
	// DefaultDrainLimit bounds the bytes of a failed response body read so
	// its connection can be reused.
	DefaultDrainLimit = 64 << 10
	// DefaultHintPeek is how many leading bytes of a body are given to
	// body-aware readers.
	DefaultHintPeek = 64 << 10
	// DefaultStoreTimeout bounds each store call, within the call's deadline.
	DefaultStoreTimeout = time.Second
	// DefaultHeldPoll bounds how long a call held by a learning gate waits
	// before it asks the store again (it is woken sooner when a call on the
	// gate completes in this process).
	DefaultHeldPoll = 100 * time.Millisecond
)

// Runner performs Execute calls: the attempt loop with waits, cooldown
// gates, learned quotas, breakers, budgets and pacing, one client span per
// attempt. Build it with NewRunner; it is immutable afterwards (but for
// Drain) and safe for concurrent use.
type Runner struct {
	store      store.Store
	clock      Clock
	realClock  bool // clock is SystemClock: its Now is time.Now
	rand       Rand
	tracer     trace.Tracer
	propagator propagation.TextMapPropagator
	observer   Observer
	credObs    CredentialObserver // nil: observer does not implement it
	drainLimit int64
	hintPeek   int64
	storeTime  time.Duration
	heldPoll   time.Duration
	// storeBlocks is false for a store that never blocks (store.NonBlocking):
	// its calls need no context of their own.
	storeBlocks bool

	// orderID names this runner's gate queues in a shared store's arrival
	// order (store.Order); empty with a store that never blocks (a store
	// of this process alone: the queues order its calls already).
	orderID string

	classifier *Classifier
	events     gateQueues
	drain      drainer
	budget     *bodyBudget // nil: no budget
}

// RunnerOption configures NewRunner.
type RunnerOption func(*Runner)

// WithClock sets the clock (default SystemClock).
func WithClock(c Clock) RunnerOption { return func(r *Runner) { r.clock = c } }

// WithRand sets the jitter source (default GlobalRand).
func WithRand(rnd Rand) RunnerOption { return func(r *Runner) { r.rand = rnd } }

// WithTracer sets the tracer of the attempt spans (default a no-op tracer).
func WithTracer(t trace.Tracer) RunnerOption { return func(r *Runner) { r.tracer = t } }

// WithPropagator sets how the trace context is put on upstream requests
// (default W3C trace context).
func WithPropagator(p propagation.TextMapPropagator) RunnerOption {
	return func(r *Runner) { r.propagator = p }
}

// WithObserver sets the metrics observer (default NopObserver).
func WithObserver(o Observer) RunnerOption { return func(r *Runner) { r.observer = o } }

// WithDrainLimit bounds how many bytes of a failed response body are read
// to let the connection be reused; n <= 0 keeps DefaultDrainLimit.
func WithDrainLimit(n int64) RunnerOption {
	return func(r *Runner) {
		if n > 0 {
			r.drainLimit = n
		}
	}
}

// WithHintPeek sets how many leading bytes of a body body-aware readers
// get; n <= 0 keeps DefaultHintPeek.
func WithHintPeek(n int64) RunnerOption {
	return func(r *Runner) {
		if n > 0 {
			r.hintPeek = n
		}
	}
}

// WithStoreTimeout bounds each store call; d <= 0 keeps DefaultStoreTimeout.
func WithStoreTimeout(d time.Duration) RunnerOption {
	return func(r *Runner) {
		if d > 0 {
			r.storeTime = d
		}
	}
}

// WithHeldPoll bounds how long a held call waits before asking the store
// again; d <= 0 keeps DefaultHeldPoll.
func WithHeldPoll(d time.Duration) RunnerOption {
	return func(r *Runner) {
		if d > 0 {
			r.heldPoll = d
		}
	}
}

// WithBodyBudget bounds the bytes of buffered bodies of all Execute calls
// of the runner to n (see bodyBudget): each call reserves its request body
// plus its max_response_body before its first attempt is sent, waits for
// room within its deadline, and is refused (*BudgetError) before anything
// is sent when it cannot get any. n <= 0 sets no budget (the default).
func WithBodyBudget(n int64) RunnerOption {
	return func(r *Runner) {
		r.budget = nil
		if n > 0 {
			r.budget = newBodyBudget(n)
		}
	}
}

// NewRunner returns a Runner over st (nil: no shared state at all, every
// attempt admitted) with the options applied over the defaults, once.
func NewRunner(st store.Store, opts ...RunnerOption) *Runner {
	r := &Runner{
		store:      st,
		clock:      SystemClock{},
		rand:       GlobalRand,
		tracer:     noop.NewTracerProvider().Tracer(""),
		propagator: propagation.TraceContext{},
		observer:   NopObserver{},
		drainLimit: DefaultDrainLimit,
		hintPeek:   DefaultHintPeek,
		storeTime:  DefaultStoreTimeout,
		heldPoll:   DefaultHeldPoll,
	}
	for _, o := range opts {
		o(r)
	}
	r.credObs, _ = r.observer.(CredentialObserver)
	nb, ok := st.(store.NonBlocking)
	r.storeBlocks = st != nil && !(ok && nb.NonBlocking())
	if r.storeBlocks {
		var id [8]byte
		_, _ = cryptorand.Read(id[:])
		r.orderID = hex.EncodeToString(id[:])
	}
	_, r.realClock = r.clock.(SystemClock)
	r.classifier = &Classifier{store: st, clock: r.clock, rand: r.rand, storeTime: r.storeTime, observer: r.observer, storeBlocks: r.storeBlocks}
	r.drain.init()
	return r
}

// Classifier returns the classifier the runner decides with, over the same
// store, clock and jitter source, for ClassifyResponse.
func (r *Runner) Classifier() *Classifier { return r.classifier }

// Call is one Execute call, validated by the caller. Run never modifies it.
type Call struct {
	// Policy is the policy in force, overrides applied.
	Policy *Policy
	// Provider is the name of the chosen reader, Reader the reader itself.
	Provider string
	Reader   providers.HintReader
	// Method, URL, Header and Body describe the request. Every attempt
	// sends a copy of Header; a generated idempotency key goes into a copy
	// of its own, so a Call can be run again.
	Method string
	URL    *url.URL
	Header http.Header
	Body   []byte
	// Client sends the attempts; Classify maps its errors.
	Client   Doer
	Classify ErrorClassifier
	// RedactedURL is URL without userinfo and query values, for spans and
	// logs. When it is empty, Redact makes it from URL when a span records
	// (most calls are never traced: they skip the work).
	RedactedURL string
	Redact      func(*url.URL) string
	// Tenant namespaces all shared state.
	Tenant string
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
	// Probe is true when the attempt went out as the single unproven call
	// of a learning gate or a half-open breaker.
	Probe bool
}

// FinalResponse is the last response received.
type FinalResponse struct {
	Status    int
	Header    http.Header
	Body      []byte
	Truncated bool
	// Incomplete is true when the upstream body ended early (reset, short
	// Content-Length, timeout while reading): Body holds what arrived.
	Incomplete bool
}

// Result is the outcome of an Execute call.
type Result struct {
	Response *FinalResponse
	Attempts []AttemptRecord
	Outcome  Outcome
	// RetryAfter is when the caller may try again, when the broker gave up
	// early on a hint, a deadline, a closed gate, an open breaker or its own
	// shutdown; valid when HasRetryAfter.
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

// Destination names the gate of a call: the tenant, the provider chosen for
// it, the URL's host (with port when not the default) and the request's
// Authorization value (used only when the policy gates by credential).
type Destination struct {
	Tenant        string
	Provider      string
	Host          string
	Authorization string
}

// CredentialGate is the Credential part of the gate key of a policy with
// a broker-held credential named name: "cred:" + name. Such gates are
// keyed by the credential, whatever GateByCredential says, so the quota of
// one key is tracked exactly (and an Authorization fingerprint, which
// changes with every OAuth2 token or signature, is never used for them).
func CredentialGate(name string) string { return "cred:" + name }

// gateKey returns the destination's cooldown gate under policy p.
func (d Destination) gateKey(p *Policy) store.GateKey {
	k := store.GateKey{Tenant: d.Tenant, Scope: GateScope(d.Provider, d.Host)}
	switch {
	case p.Credential != nil:
		k.Credential = CredentialGate(p.Credential.Name())
	case p.GateByCredential:
		k.Credential = CredentialFingerprint(d.Authorization)
	}
	return k
}

// storeContext bounds one store call by the store timeout, within ctx; a
// store that never blocks gets ctx itself (no timer, no allocation).
func (r *Runner) storeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if !r.storeBlocks {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, r.storeTime)
}

// storeContext bounds one store call of s as Runner.storeContext does,
// within the call's context; a store that never blocks gets the call's
// values only (it reads no deadline), so the call makes no context for it.
func (s *callState) storeContext() (context.Context, context.CancelFunc) {
	if !s.r.storeBlocks {
		return s.vctx, func() {}
	}
	return s.r.storeContext(s.callCtx())
}

// destination returns the call's destination.
func (c *Call) destination() Destination {
	return Destination{Tenant: c.Tenant, Provider: c.Provider, Host: c.URL.Host, Authorization: c.Header.Get("Authorization")}
}

// Run performs the call. It returns a Result for every upstream outcome,
// and an error only for a refused destination (*DestinationError), pacing
// that cannot admit the call (*PacingError), no room in the body budget
// (*BudgetError, before anything was sent), a fail-closed store outage
// (*StoreError) or the caller's cancellation (the context's error).
func (r *Runner) Run(ctx context.Context, c *Call) (*Result, error) {
	r.observer.InFlight(1)
	defer r.observer.InFlight(-1)
	start := r.clock.Now()
	s := r.newCall(ctx, c, wholeDelivery{})
	defer s.end()
	res, err := s.run()
	s.keepBodies(res)
	r.observer.CallDone("execute", res.Outcome, len(res.Attempts), r.clock.Now().Sub(start))
	return res, err
}

// Drain starts the broker's shutdown: from now on a call parked in a wait
// (backoff, hint, gate, breaker, held, pacing), which has nothing in
// flight, ends at once with OutcomeShuttingDown and what was left of its
// wait (for a gate, the gate's time) as RetryAfter, and so does a call
// that would start one; at deadline every attempt still in progress is
// canceled and its call ends the same way. Drain may be called once; later
// calls do nothing.
func (r *Runner) Drain(deadline time.Time) { r.drain.start(r.clock, deadline) }

// Draining reports whether Drain was called.
func (r *Runner) Draining() bool { return r.drain.started() }
