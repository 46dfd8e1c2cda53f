// Package store holds the broker's shared state behind small domain
// interfaces: cooldown gates with in-flight and quota tracking, per-tenant
// retry budgets, and per-(tenant, host) pacing. The memory implementation is
// the default; the Redis implementation lets several replicas act as one.
package store

import (
	"context"
	"time"
)

// GateKey names one cooldown gate. Every field is part of the identity;
// implementations must escape them so that no two keys collide.
type GateKey struct {
	// Tenant is the tenant id.
	Tenant string
	// Scope is the provider name (e.g. "github") or, with no provider, the
	// destination host (lower case, with port when not the default).
	Scope string
	// Credential is an optional fingerprint of the credential the calls use
	// (hex SHA-256 of the Authorization header); empty for none.
	Credential string
}

// PaceConfig is a GCRA rate limit: Rate requests per second on average,
// with up to Burst requests at once. A zero Rate disables pacing.
type PaceConfig struct {
	Rate  float64
	Burst int
}

// BudgetConfig limits retries per tenant: over a sliding Window, retries may
// be at most Ratio × first attempts + FloorPerSecond × Window seconds.
// A zero Ratio and FloorPerSecond disables the budget (unlimited retries).
type BudgetConfig struct {
	Ratio          float64
	FloorPerSecond float64
	Window         time.Duration
}

// AdmitRequest asks to send one attempt.
type AdmitRequest struct {
	Gate GateKey
	// PaceHost is the destination host for pacing (tenant from Gate.Tenant).
	PaceHost string
	// Pace is the pacing limit; zero Rate means no pacing.
	Pace PaceConfig
	// PaceMaxWait is the longest pacing wait the caller accepts; a slot
	// further out is not reserved.
	PaceMaxWait time.Duration
	// FirstAttempt counts the call as a request for the tenant's retry budget.
	FirstAttempt bool
	// Budget is the tenant's budget (needed to keep counts with the right window).
	Budget BudgetConfig
	// Now is the clock.
	Now time.Time
}

// Admission is the store's answer to an AdmitRequest.
type Admission struct {
	// GateClosedUntil is non-zero when the gate is closed: nothing was
	// reserved or registered, and the caller must not send before then.
	GateClosedUntil time.Time
	// PaceDenied is true when the pacing slot lies beyond PaceMaxWait;
	// PaceWait then says how long it would have been. Nothing was registered.
	PaceDenied bool
	// PaceWait is how long the caller must wait before sending (admitted
	// calls) or would have had to wait (PaceDenied).
	PaceWait time.Duration
	// Ticket identifies the in-flight registration of an admitted attempt;
	// pass it to Complete. Valid when the gate was open and pacing admitted.
	Ticket Ticket
}

// Admitted reports whether the attempt may be sent (after PaceWait).
func (a Admission) Admitted() bool { return a.GateClosedUntil.IsZero() && !a.PaceDenied }

// Ticket is an opaque in-flight registration.
type Ticket struct {
	ID string
}

// Observation is what one response said about its gate.
type Observation struct {
	// CloseUntil, when non-zero, closes the gate until then (a hint that the
	// quota is exhausted). Gates only ever extend, never shorten.
	CloseUntil time.Time
	// HasQuota reports that Remaining and Reset are set: the provider's
	// remaining calls in its window and when the window resets. When
	// Remaining is at most the number of other calls in flight on the gate,
	// the gate closes until Reset.
	HasQuota  bool
	Remaining int64
	Reset     time.Time
}

// CompleteRequest ends an admitted attempt.
type CompleteRequest struct {
	Gate   GateKey
	Ticket Ticket
	Obs    Observation
	// SpendRetry asks to spend one retry from the tenant's budget, because
	// the engine decided to retry after this attempt.
	SpendRetry bool
	Budget     BudgetConfig
	Now        time.Time
}

// CompleteResult is the store's answer to a CompleteRequest.
type CompleteResult struct {
	// RetryAllowed is false when SpendRetry was set and the budget is spent.
	RetryAllowed bool
	// GateClosedUntil is the gate's state after the observation (zero = open).
	GateClosedUntil time.Time
}

// Store is the broker's shared state. All methods are safe for concurrent
// use, bounded by ctx, and atomic: concurrent callers on several replicas
// see one consistent state. Errors wrap the cause and never carry secrets.
type Store interface {
	// Admit checks the gate and pacing for one attempt and, when both allow
	// it, registers it as in flight. One round trip.
	Admit(ctx context.Context, req AdmitRequest) (Admission, error)
	// Complete ends an attempt admitted by Admit. One round trip.
	Complete(ctx context.Context, req CompleteRequest) (CompleteResult, error)
	// Observe records an observation without an admitted attempt (for
	// ClassifyResponse callers that make their own calls) and returns the
	// gate's state afterwards.
	Observe(ctx context.Context, gate GateKey, obs Observation, now time.Time) (closedUntil time.Time, err error)
	// GateState returns until when the gate is closed (zero = open).
	GateState(ctx context.Context, gate GateKey, now time.Time) (closedUntil time.Time, err error)
	// Close releases resources.
	Close() error
}
