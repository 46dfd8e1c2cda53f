package store

import (
	"context"
	"time"
)

// GateKey names one cooldown gate. Every field is part of the identity;
// implementations must escape them so that no two keys collide. Fields are
// compared byte for byte: callers normalize (lower case hosts) beforehand.
type GateKey struct {
	// Tenant is the tenant id. Gates, budgets and pacing of one tenant are
	// never visible to another.
	Tenant string
	// Scope is the provider name (e.g. "github") or, with no provider, the
	// destination host (lower case, with port when not the default).
	Scope string
	// Credential is an optional fingerprint of the credential the calls use
	// (hex SHA-256 of the Authorization header); empty for none. Never put
	// the credential itself here: Redis keys are not secret.
	Credential string
}

// PaceConfig is a GCRA rate limit: Rate requests per second on average,
// with up to Burst requests at once. A zero (or negative, or NaN) Rate
// disables pacing; a Burst below 1 counts as 1.
type PaceConfig struct {
	// Rate is the sustained rate in requests per second.
	Rate float64
	// Burst is how many requests may go at once after an idle period.
	Burst int
}

// BudgetConfig limits retries per tenant: over a sliding Window, retries may
// be at most Ratio × first attempts + FloorPerSecond × Window seconds.
// A zero Ratio and FloorPerSecond disables the budget (unlimited retries).
// The window slides in whole seconds: it is rounded up to whole seconds, a
// zero or negative Window means [DefaultBudgetWindow], and a Window above
// [MaxBudgetWindow] counts as MaxBudgetWindow.
type BudgetConfig struct {
	// Ratio is the number of retries allowed per first attempt (0.2 = one
	// retry per five requests). Negative counts as 0.
	Ratio float64
	// FloorPerSecond is the number of retries per second always allowed,
	// even with no requests. Negative counts as 0.
	FloorPerSecond float64
	// Window is the sliding window over which requests and retries count.
	Window time.Duration
}

// AdmitRequest asks to send one attempt.
type AdmitRequest struct {
	// Gate is the cooldown gate the attempt goes through.
	Gate GateKey
	// PaceHost is the destination host for pacing (tenant from Gate.Tenant).
	PaceHost string
	// Pace is the pacing limit; zero Rate means no pacing.
	Pace PaceConfig
	// PaceMaxWait is the longest pacing wait the caller accepts; a slot
	// further out is not reserved. Zero or negative accepts only an
	// immediate slot.
	PaceMaxWait time.Duration
	// FirstAttempt counts the call as a request for the tenant's retry
	// budget. It is counted only when the attempt is admitted, and only
	// when Budget is not unlimited.
	FirstAttempt bool
	// Budget is the tenant's budget (needed to keep counts with the right window).
	Budget BudgetConfig
	// Learning configures the gate's learned quota; the zero value disables
	// learning for this call.
	Learning LearningConfig
	// Breaker configures the gate's failure breaker; the zero value
	// disables it for this call.
	Breaker BreakerConfig
	// FailClosed makes a store that cannot reach its shared backend answer
	// an error wrapping [ErrUnavailable] instead of serving this call from
	// local state (see [Fallback]).
	FailClosed bool
	// Order places the attempt in the gate's arrival order across the
	// replicas that share the store; see [Order].
	Order Order
	// Now is the clock. A zero Now means time.Now().
	Now time.Time
}

// Order places an attempt in one arrival order at its gate across the
// replicas that share a store (docs/shared-state.md, "One arrival order
// across replicas"). Each replica keeps its waiting calls in arrival order
// (the engine's gate queues) and tells the store, with each attempt, its
// queue at the gate. A store shared by replicas then admits an attempt
// only when the calls that other replicas hold waiting on the gate, that
// arrived before it and have waited longer than the store's held poll,
// are fewer than the calls the gate admits now
// (the known remaining count less the calls in flight, the learned quota
// less the epoch's admissions, slow start's room, or the one probe); it
// holds it otherwise (Admission.Held), so that a held call is never
// passed over by calls that arrived later at another replica. It only
// ever holds an attempt the counts would admit, never admits one they
// would not. A store of one process ignores Order: the engine's queue
// orders its calls already.
type Order struct {
	// Broker identifies the replica's queues; empty for no order.
	Broker string
	// Arrival is when the attempt arrived at the gate (for a call that
	// waits in the queue, when it joined it).
	Arrival time.Time
	// Queue is the replica's queue at the gate, oldest first, when the
	// attempt waits in it (its head asks): at most [MaxOrderQueue] calls;
	// QueueLen is the whole queue's length. Empty for an attempt that
	// asks without waiting in a queue.
	Queue    []Waiting
	QueueLen int
}

// MaxOrderQueue is how many of a replica's waiting calls an Order lists;
// the calls beyond are counted (Order.QueueLen) and taken as older than
// any other replica's call they might precede, which can only hold calls,
// never admit one.
const MaxOrderQueue = 32

// Waiting is one call waiting in a replica's queue at a gate: when it
// arrived, and its deadline, after which it no longer waits (zero for
// none).
type Waiting struct {
	Arrival, Deadline time.Time
}

// Admission is the store's answer to an AdmitRequest.
type Admission struct {
	// GateClosedUntil is non-zero when the gate is closed: nothing was
	// reserved or registered, and the caller must not send before then.
	GateClosedUntil time.Time
	// BreakerOpenUntil is non-zero when the gate's failure breaker is open
	// (and the gate itself is not closed): nothing was reserved or
	// registered, and the caller must not send before then.
	BreakerOpenUntil time.Time
	// Held is true when the gate is open but admits no more unproven calls
	// now: its learned quota for the epoch is used and a probe is in flight
	// (or the breaker is half-open with its probe in flight). Nothing was
	// reserved or registered; the caller should check again after HeldFor
	// (or sooner when it learns that a call on the gate completed).
	Held bool
	// HeldFor is how long a held caller should wait before checking again:
	// a short poll interval, never longer than the in-flight probe's
	// registration lives.
	HeldFor time.Duration
	// Probe is true when the attempt is admitted as the single unproven
	// call of a learning gate (beyond its learned quota) or of a half-open
	// breaker. Its Complete must always be sent, with its Result.
	Probe bool
	// PaceDenied is true when the pacing slot lies beyond PaceMaxWait;
	// PaceWait then says how long it would have been. Nothing was registered.
	PaceDenied bool
	// PaceWait is how long the caller must wait before sending (admitted
	// calls) or would have had to wait (PaceDenied). Zero without pacing.
	PaceWait time.Duration
	// Ticket identifies the in-flight registration of an admitted attempt;
	// empty when nothing was registered; Complete is then needed only to
	// record an observation or spend a retry.
	//
	// An admitted attempt is registered only when its gate has a known
	// quota (a remaining count whose window has not reset, see
	// [Observation.HasQuota]): that is the only case in which calls in
	// flight are counted; or when it goes as the gate's probe (Probe), whose
	// registration holds the probe slot. Refused and held attempts never
	// get a ticket; Epoch is set on every admitted attempt of a learning
	// gate, registered or not.
	//
	// An admitted attempt with a non-empty Ticket that is then not sent (for
	// example because the caller's deadline would pass during PaceWait) must
	// still be Completed, with an empty Observation, to give its share of
	// the known quota back.
	Ticket Ticket
}

// Admitted reports whether the attempt may be sent (after PaceWait).
func (a Admission) Admitted() bool {
	return a.GateClosedUntil.IsZero() && a.BreakerOpenUntil.IsZero() && !a.Held && !a.PaceDenied
}

// Ticket is an opaque in-flight registration. The zero Ticket (empty ID)
// stands for no registration: Admit returns it when it registered nothing,
// and completing it only applies the observation and the budget.
type Ticket struct {
	// ID identifies the registration; opaque, at most a few dozen bytes;
	// empty for none.
	ID string
	// Epoch identifies the learning epoch of the gate the attempt was
	// admitted in (0 = none: learning off, or the gate has a known quota);
	// opaque to callers, who pass the Ticket back unchanged, also when ID
	// is empty: the store attributes the attempt's Result to that epoch.
	Epoch int64
}

// Result is what one attempt's outcome tells the gate's learned quota and
// failure breaker.
type Result int8

// Results of an attempt.
const (
	// ResultNone: the attempt was not sent, or its outcome says nothing
	// about the destination (canceled, refused by the destination guard).
	ResultNone Result = iota
	// ResultAccepted: the provider accepted the call (any response that is
	// neither a refusal nor a failure).
	ResultAccepted
	// ResultRefused: the provider refused the call with a hint that its
	// quota is exhausted (429, 403 or 503 with a hint). It closes the gate
	// (Observation.CloseUntil) and ends the learning epoch.
	ResultRefused
	// ResultFailed: the call failed without a hint (5xx, or a retryable
	// transport error before the request reached the provider, such as a
	// refused connection). It counts toward the failure breaker, and as not
	// accepted for the learned quota.
	ResultFailed
	// ResultLost: the attempt may have reached the provider, but its
	// outcome was lost: the caller canceled, or a deadline cut it, while
	// it was in flight. It says nothing about the quota or the destination:
	// the breaker ignores it, and for the learned quota it keeps its share
	// of the epoch (the provider may have counted it) without counting as
	// not accepted.
	ResultLost
	// ResultBroken: a transport failure after the request may have been
	// sent (a reset, an unexpected EOF, a timeout, a body cut short). It is
	// a failure for the breaker, and, like ResultLost, keeps its share of
	// the learned quota's epoch without counting as not accepted.
	ResultBroken
)

// String returns "none", "accepted", "refused", "failed", "lost" or
// "broken".
func (r Result) String() string {
	switch r {
	case ResultAccepted:
		return "accepted"
	case ResultRefused:
		return "refused"
	case ResultFailed:
		return "failed"
	case ResultLost:
		return "lost"
	case ResultBroken:
		return "broken"
	}
	return "none"
}

// BreakerFailure reports whether r counts as a failure for the breaker.
func (r Result) BreakerFailure() bool { return r == ResultFailed || r == ResultBroken }

// Answered reports whether r is an answer of the destination (accepted,
// refused or failed): what Observe counts as a call for the breaker.
func (r Result) Answered() bool { return r != ResultNone && r != ResultLost }

// GateStatus is a gate's state at one time.
type GateStatus struct {
	// ClosedUntil is non-zero while the gate is closed (a hint, or a known
	// quota used up).
	ClosedUntil time.Time
	// BreakerOpenUntil is non-zero while the gate's failure breaker is open.
	BreakerOpenUntil time.Time
	// BreakerChange is what the operation did to the breaker (Observe;
	// GateState always reports BreakerUnchanged).
	BreakerChange BreakerChange
}

// BreakerChange is a transition of a gate's failure breaker.
type BreakerChange int8

// Breaker transitions.
const (
	// BreakerUnchanged: no transition.
	BreakerUnchanged BreakerChange = iota
	// BreakerOpened: failures reached the ratio and the breaker opened.
	BreakerOpened
	// BreakerReopened: the half-open probe failed; the breaker opened again
	// for twice as long.
	BreakerReopened
	// BreakerClosed: the half-open probe was answered; the breaker closed.
	BreakerClosed
)

// String returns "", "opened", "reopened" or "closed".
func (c BreakerChange) String() string {
	switch c {
	case BreakerOpened:
		return "opened"
	case BreakerReopened:
		return "reopened"
	case BreakerClosed:
		return "closed"
	}
	return ""
}

// Open reports whether neither the gate nor its breaker is closed.
func (g GateStatus) Open() bool { return g.ClosedUntil.IsZero() && g.BreakerOpenUntil.IsZero() }

// Until returns the later of ClosedUntil and BreakerOpenUntil (zero when
// open).
func (g GateStatus) Until() time.Time {
	if g.BreakerOpenUntil.After(g.ClosedUntil) {
		return g.BreakerOpenUntil
	}
	return g.ClosedUntil
}

// Observation is what one response said about its gate.
type Observation struct {
	// CloseUntil, when non-zero, closes the gate until then (a hint that the
	// quota is exhausted). Gates only ever extend, never shorten. A time not
	// after Now is ignored.
	CloseUntil time.Time
	// HasQuota reports that Remaining and Reset are set: the provider's
	// remaining calls in its window and when the window resets. A zero
	// Reset makes the quota ignored; a negative Remaining counts as 0.
	//
	// Two things follow from a quota. First, when Remaining is 0 the gate
	// closes until Reset (if Reset is after Now), as with CloseUntil. A
	// remaining count above 0 but at most the calls in flight does not
	// close the gate outright: some of those calls may already have been
	// served, their responses still on the way, so Admit enforces it from
	// the known quota instead (second rule), and the gate reopens as soon as
	// the count allows.
	//
	// Second, the store keeps the gate's last known quota (remaining count
	// and reset), which [Store.Admit] checks against the calls in flight:
	//   - A Reset later than the known window's by more than
	//     [QuotaWindowTolerance] starts a new window: the known quota becomes
	//     this one.
	//   - A Reset within QuotaWindowTolerance of the known window's is the
	//     same window (providers round): the known remaining count becomes
	//     the smaller of the two, since responses arrive out of order and
	//     the count only goes down within a window; the known reset becomes
	//     the later of the two. Window identity stays anchored to the first
	//     reset seen, so resets that drift forward (rolling windows) start a
	//     new window once they are more than QuotaWindowTolerance past it.
	//   - A Reset not after Now (the window already reset) clears the known
	//     quota, unless it is earlier than the known window's by more than
	//     QuotaWindowTolerance: such a response comes late from an older
	//     window and changes nothing, as does any response from an older
	//     window.
	//   - Known quota whose reset has passed is ignored (and expires).
	HasQuota bool
	// Remaining is the number of calls the provider says are left.
	Remaining int64
	// Reset is when the provider's quota window resets.
	Reset time.Time
}

// CompleteRequest ends an admitted attempt.
type CompleteRequest struct {
	// Gate is the gate the attempt was admitted on.
	Gate GateKey
	// Ticket is Admission.Ticket; the zero Ticket ends nothing (the
	// observation and the budget still apply).
	Ticket Ticket
	// Obs is what the response said about the gate; zero for none (a
	// transport error, or an attempt that was not sent).
	Obs Observation
	// Result is what the attempt's outcome tells the learned quota and the
	// breaker.
	Result Result
	// SpendRetry asks to spend one retry from the tenant's budget, because
	// the engine decided to retry after this attempt.
	SpendRetry bool
	// Budget is the tenant's budget, as in AdmitRequest.
	Budget BudgetConfig
	// Learning and Breaker configure the gate, as in AdmitRequest.
	Learning LearningConfig
	Breaker  BreakerConfig
	// MaxGate bounds how far after Now the observation may close the gate
	// (CloseUntil, and the reset of an exhausted quota); zero or negative
	// means [DefaultMaxGate].
	MaxGate time.Duration
	// FailClosed is as in AdmitRequest.
	FailClosed bool
	// Now is the clock. A zero Now means time.Now().
	Now time.Time
}

// ObserveRequest records what a response said about a gate without an
// admitted attempt (ClassifyResponse callers that make their own calls).
type ObserveRequest struct {
	// Gate is the gate the response came through.
	Gate GateKey
	// Obs is what the response said about the gate, as in CompleteRequest.
	Obs Observation
	// Result is what the outcome tells the gate: a refusal ends its
	// learning epoch; with Breaker on, any answer but ResultNone counts as
	// a call and ResultFailed as a failure, and while the breaker is half
	// open the result decides it like a probe's.
	Result Result
	// Learning and Breaker configure the gate, as in AdmitRequest.
	Learning LearningConfig
	Breaker  BreakerConfig
	// MaxGate is as in CompleteRequest.
	MaxGate    time.Duration
	FailClosed bool
	// Now is the clock. A zero Now means time.Now().
	Now time.Time
}

// DefaultMaxGate is the bound on gate times when a request sets none.
const DefaultMaxGate = 24 * time.Hour

// GateBound returns now + maxGate (DefaultMaxGate when maxGate <= 0): the
// latest time an observation made at now may close a gate until.
func GateBound(now time.Time, maxGate time.Duration) time.Time {
	if maxGate <= 0 {
		maxGate = DefaultMaxGate
	}
	return now.Add(maxGate)
}

// CompleteResult is the store's answer to a CompleteRequest.
type CompleteResult struct {
	// RetryAllowed is false when SpendRetry was set and the budget is spent;
	// true otherwise (also when SpendRetry was not set). An allowed retry
	// has been counted against the budget.
	RetryAllowed bool
	// GateClosedUntil is the gate's state after the observation (zero =
	// open), as GateState would report it.
	GateClosedUntil time.Time
	// BreakerOpenUntil is the breaker's state after the observation (zero
	// = closed breaker).
	BreakerOpenUntil time.Time
	// BreakerChange is what the completion did to the breaker.
	BreakerChange BreakerChange
}

// Store is the broker's shared state. All methods are safe for concurrent
// use, bounded by ctx, and atomic: concurrent callers on several replicas
// see one consistent state. Errors wrap the cause and never carry secrets;
// an unreachable backend is reported as an error wrapping [ErrUnavailable].
type Store interface {
	// Admit checks the gate, its breaker, its learned quota and pacing for
	// one attempt and, when all allow it and the gate has a known quota (a
	// remaining count whose window has not reset), registers it as in
	// flight and returns a non-empty [Admission.Ticket]; an attempt admitted
	// as the gate's probe is registered too. Otherwise nothing is registered
	// and the Ticket is empty: Complete is then needed only to record an
	// observation, a result the learned quota or the breaker needs (a
	// refusal, a failure) or to spend a retry, so an accepted attempt with
	// none of these costs this one round trip. The checks go in that order:
	// a closed gate, an open breaker or a held attempt reserves no pacing
	// slot, counts no request and registers nothing. See the package
	// documentation ("Learned quotas", "Failure breaker").
	//
	// The gate is closed while its closed-until time (CloseUntil hints and
	// the in-flight rule of [Observation.HasQuota]) is after Now, and also
	// while its last known quota, with a reset after Now, is used up by the
	// calls in flight: remaining - (calls in flight, not counting this one)
	// <= 0. Admission then answers GateClosedUntil = the later of the two
	// times. Each call in flight counts against the known remaining count
	// until it is completed, so a burst of Admits between two responses
	// never exceeds the last known remaining count. A call completed
	// without an observation (not sent, transport error) gives its share
	// back. Once the known reset passes, the quota is ignored (calls are
	// admitted freely, and not registered) until a new observation
	// arrives. Calls admitted without a known quota never count as in
	// flight, even once a quota becomes known while they are still out;
	// the package documentation ("Quotas and the in-flight rule") says
	// what that costs.
	Admit(ctx context.Context, req AdmitRequest) (Admission, error)
	// Complete ends an attempt admitted by Admit and records its Result.
	// One round trip. An empty, unknown or expired ticket is not an error:
	// the observation, the result (by the ticket's Epoch) and the budget
	// still apply, and no registration is removed.
	Complete(ctx context.Context, req CompleteRequest) (CompleteResult, error)
	// Observe records an observation without an admitted attempt (for
	// ClassifyResponse callers that make their own calls) and returns the
	// gate's state afterwards (as GateState reports it). Every in-flight
	// attempt counts as "other".
	Observe(ctx context.Context, req ObserveRequest) (GateStatus, error)
	// GateState returns the gate's state at now by the same rules as Admit:
	// what Admit's GateClosedUntil and BreakerOpenUntil would be (the
	// latter for a request with the breaker on). It changes nothing and
	// creates no gate.
	GateState(ctx context.Context, gate GateKey, now time.Time) (GateStatus, error)
	// Close releases resources. It is idempotent; calls after Close fail
	// with [ErrClosed].
	Close() error
}

// InFlightCounter is implemented by stores that can report how many
// registered attempts are in flight on a gate (for operators and tests).
type InFlightCounter interface {
	// InFlight returns the number of live in-flight registrations on gate
	// at now (expired tickets excluded) that count against its known quota;
	// a probe admitted while the gate had no known quota is not among them.
	InFlight(ctx context.Context, gate GateKey, now time.Time) (int64, error)
}

// GateInfo is what a store holds for one gate, for operators (the broker's
// admin view). Zero fields mean nothing is held.
type GateInfo struct {
	// Status is the gate's state, as GateState reports it.
	Status GateStatus
	// InFlight is the number of attempts registered in flight.
	InFlight int64
	// HasQuota reports an announced quota: Remaining calls until Reset.
	HasQuota  bool
	Remaining int64
	Reset     time.Time
	// Learning reports learned state: the current Epoch, its Admitted and
	// NotAccepted counts, and, once learned, the quota L (LearnedQuota;
	// Exact when it came from an epoch that began at a reopening).
	Learning     bool
	Epoch        int64
	Admitted     int64
	NotAccepted  int64
	Learned      bool
	LearnedQuota int64
	// ProbeInFlight reports a probe (of the learned quota or the breaker)
	// in flight.
	ProbeInFlight bool
}

// Inspector is implemented by stores that can show one gate's state, for
// the admin view. It changes nothing.
type Inspector interface {
	// InspectGate returns what the store holds for gate at now.
	InspectGate(ctx context.Context, gate GateKey, now time.Time) (GateInfo, error)
}

// MaxListGates is the most gates one ListGates call returns.
const MaxListGates = 1000

// ListGatesRequest asks for a page of one tenant's live gates.
type ListGatesRequest struct {
	// Tenant is the tenant whose gates are listed; no other tenant's gate
	// is ever returned.
	Tenant string
	// After is where the page starts: after this position in the store's
	// order (a previous page's Next, unchanged); empty starts at the first
	// gate. Positions are opaque to callers. Any string is accepted: one
	// the store did not return starts the page at the first gate, or at
	// the first after it in the store's order.
	After string
	// Limit is the most gates in the page, 1..MaxListGates (others are
	// clamped into that range).
	Limit int
	// Match, when not nil, keeps only the gates it reports true for; the
	// store skips the others without counting them against Limit.
	Match func(GateInfo) bool
	// Now is the time at which state is read.
	Now time.Time
}

// ListedGate is one gate of a page: its key and what the store holds.
type ListedGate struct {
	Key  GateKey
	Info GateInfo
}

// GatePage is a page of a tenant's live gates, in the store's order.
type GatePage struct {
	// Gates are the page's gates: those holding any state at the request's
	// Now (a GateInfo other than the zero value) that Match kept.
	Gates []ListedGate
	// Next is the position to pass as After for the next page; empty when
	// the listing is complete. A gate held for the whole listing is
	// returned exactly once over all its pages (the Redis store documents
	// a rare exception above 10,000 gates of a tenant); gates created or
	// dropped meanwhile may or may not appear.
	Next string
}

// GateLister is implemented by stores that can list a tenant's live gates,
// paged, for the admin view. It changes nothing.
type GateLister interface {
	// ListGates returns the page of req.Tenant's live gates that req asks
	// for.
	ListGates(ctx context.Context, req ListGatesRequest) (GatePage, error)
}

// ClampListLimit returns n clamped into 1..MaxListGates.
func ClampListLimit(n int) int {
	return min(max(n, 1), MaxListGates)
}

// NonBlocking is implemented by stores whose operations never block and
// ignore their context (the memory store): callers may skip bounding each
// call with a context of its own.
type NonBlocking interface {
	// NonBlocking reports that every operation returns at once.
	NonBlocking() bool
}
