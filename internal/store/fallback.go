package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Fallback defaults.
const (
	// MaxMirrorGate bounds the gate times mirrored into local state: the
	// primary already bounded them by each call's max_gate.
	MaxMirrorGate = 7 * 24 * time.Hour
	// DefaultPrimaryTimeout bounds each call to the primary store, whatever
	// the caller's deadline.
	DefaultPrimaryTimeout = 250 * time.Millisecond
	// DefaultVerifyTimeout bounds one verification of a primary that is a
	// [Verifier] (several round trips on a cluster).
	DefaultVerifyTimeout = time.Second
	// DefaultProbeMin is the first wait between two recovery probes.
	DefaultProbeMin = 100 * time.Millisecond
	// DefaultProbeMax is the longest wait between two recovery probes.
	DefaultProbeMax = 2 * time.Second
	// DefaultStableAfter is how long the primary must have stayed healthy
	// for its next failure not to count as a flap.
	DefaultStableAfter = 30 * time.Second
	// DefaultMaxHoldDown bounds how long a flapping primary must pass every
	// probe before the Fallback returns to it.
	DefaultMaxHoldDown = 30 * time.Second
	// DefaultHealthInterval is how often a healthy Fallback checks that its
	// primary answers, whether calls flow or not.
	DefaultHealthInterval = 500 * time.Millisecond
	// maxDetail bounds Health.Detail, in bytes.
	maxDetail = 300
)

// Ticket id prefixes: which backend issued a ticket.
const (
	primaryTicket = "p"
	localTicket   = "l"
)

// Cause names why a Fallback does not use its primary. Values are short
// lower-case words, fit for a metric label.
type Cause string

// Causes of a degraded Fallback. Apart from CauseUnreachable, each is a
// misconfiguration or a state of the shared store that waiting out will not
// always fix, and is reported by its name, never as "unreachable".
const (
	// CauseNone: the primary is in use.
	CauseNone Cause = ""
	// CauseUnreachable: no answer in time (down, refused, timed out,
	// connection lost).
	CauseUnreachable Cause = "unreachable"
	// CauseMoved: a Redis Cluster node answered MOVED or ASK to a client
	// that is not a cluster client (a cluster behind a single-node client),
	// or a cluster client ran out of redirects.
	CauseMoved Cause = "moved"
	// CauseCrossSlot: one script's keys hash to different cluster slots.
	CauseCrossSlot Cause = "crossslot"
	// CauseNoPerm: the ACL user may not run a command or touch a key.
	CauseNoPerm Cause = "noperm"
	// CauseWrongPass: authentication failed (WRONGPASS, NOAUTH).
	CauseWrongPass Cause = "wrongpass"
	// CauseOOM: the server refuses writes (maxmemory reached with a
	// noeviction policy).
	CauseOOM Cause = "oom"
	// CauseReadOnly: the server is a read-only replica.
	CauseReadOnly Cause = "readonly"
	// CauseNotCluster: a cluster client reached a server that is not a
	// cluster node.
	CauseNotCluster Cause = "notcluster"
	// CauseClusterDown: the cluster does not serve the slot (CLUSTERDOWN,
	// TRYAGAIN), for instance during a failover.
	CauseClusterDown Cause = "clusterdown"
	// CauseMasterDown: a replica lost its master (MASTERDOWN).
	CauseMasterDown Cause = "masterdown"
	// CauseLoading: the server is loading its data set (LOADING).
	CauseLoading Cause = "loading"
	// CauseTLS: the TLS handshake failed (unknown CA, wrong name, no or
	// refused client certificate).
	CauseTLS Cause = "tls"
	// CauseSentinel: the sentinels answered, but not with a master (an
	// unknown master name, or not sentinels at all).
	CauseSentinel Cause = "sentinel"
	// CauseUnexpected: the store's own operations ran but gave wrong
	// results (a proxy or server that does not behave as Redis).
	CauseUnexpected Cause = "unexpected"
	// CauseOther: any other error the server answered.
	CauseOther Cause = "other"
)

// Causes returns every cause but CauseNone, in a fixed order (one metric
// series each).
func Causes() []Cause {
	return []Cause{
		CauseUnreachable, CauseMoved, CauseCrossSlot, CauseNoPerm, CauseWrongPass, CauseOOM,
		CauseReadOnly, CauseNotCluster, CauseClusterDown, CauseMasterDown, CauseLoading,
		CauseTLS, CauseSentinel, CauseUnexpected, CauseOther,
	}
}

// causer is implemented by errors that name their cause.
type causer interface{ StoreCause() Cause }

// CauseOf returns the cause that err names (an error in its chain with a
// StoreCause() Cause method), CauseUnreachable for an error that names
// none, and CauseNone for nil.
func CauseOf(err error) Cause {
	if err == nil {
		return CauseNone
	}
	var c causer
	if errors.As(err, &c) {
		if cause := c.StoreCause(); cause != CauseNone {
			return cause
		}
	}
	return CauseUnreachable
}

// Health is a Fallback's state.
type Health struct {
	// Starting is true while a Fallback made [WithStartWait] waits for the
	// first verification of its primary: calls wait, and none is served
	// from local state. Degraded is false meanwhile.
	Starting bool
	// Degraded is true while calls are served from local state (or fail,
	// when fail-closed).
	Degraded bool
	// Cause names why, while Degraded; while Starting, why the last check
	// failed (CauseNone before one failed); CauseNone otherwise.
	Cause Cause
	// Detail is the error that caused it (at most 300 bytes), for the log
	// and health detail; empty while healthy. Errors never hold secrets.
	Detail string
	// Since is when the state (and, while degraded, the cause) began.
	Since time.Time
}

// Pinger is implemented by stores that can check their backend cheaply.
// Fallback probes a primary that implements neither Verifier nor Pinger
// with GateState on a reserved key.
type Pinger interface {
	// Ping returns nil when the backend answers.
	Ping(ctx context.Context) error
}

// Verifier is implemented by stores that can prove that their backend
// works: Verify runs the store's own operations, writes included, on
// reserved keys and checks their results. A Fallback verifies such a
// primary, rather than pinging it, before it returns to it. Errors name
// their cause (see [CauseOf]).
type Verifier interface {
	// Verify returns nil when the store's operations work.
	Verify(ctx context.Context) error
}

// FallbackOption configures a Fallback.
type FallbackOption func(*fallbackOptions)

type fallbackOptions struct {
	failClosed         bool
	timeout            time.Duration
	verifyTimeout      time.Duration
	probeMin, probeMax time.Duration
	stableAfter        time.Duration
	maxHold            time.Duration
	healthEvery        time.Duration // <= 0: no health check
	startWait          time.Duration // <= 0: start healthy
}

// WithFailClosed makes the Fallback return an error wrapping
// [ErrUnavailable] while the primary is unreachable, instead of serving
// from local state. It still reports itself degraded and probes for
// recovery.
func WithFailClosed() FallbackOption {
	return func(o *fallbackOptions) { o.failClosed = true }
}

// WithPrimaryTimeout bounds each call to the primary (and each ping probe)
// to d, even when the caller's deadline is later; zero or negative keeps
// [DefaultPrimaryTimeout].
func WithPrimaryTimeout(d time.Duration) FallbackOption {
	return func(o *fallbackOptions) {
		if d > 0 {
			o.timeout = d
		}
	}
}

// WithVerifyTimeout bounds each verification of a [Verifier] primary to d;
// zero or negative keeps [DefaultVerifyTimeout].
func WithVerifyTimeout(d time.Duration) FallbackOption {
	return func(o *fallbackOptions) {
		if d > 0 {
			o.verifyTimeout = d
		}
	}
}

// WithProbeBackoff sets the wait between recovery probes: first minWait,
// doubling up to maxWait. Zero or negative values keep [DefaultProbeMin]
// and [DefaultProbeMax]; maxWait below minWait counts as minWait.
func WithProbeBackoff(minWait, maxWait time.Duration) FallbackOption {
	return func(o *fallbackOptions) {
		if minWait > 0 {
			o.probeMin = minWait
		}
		if maxWait > 0 {
			o.probeMax = maxWait
		}
	}
}

// WithFlapDamping sets the hysteresis against a primary that passes its
// probe but fails calls again at once: a failure less than stableAfter
// after a recovery counts as a flap, and after the n-th flap in a row the
// primary must pass every probe for a hold-down of maxWait × 2^(n-1)
// (maxWait from [WithProbeBackoff]), at most maxHold, before the Fallback
// returns to it. Zero or negative values keep [DefaultStableAfter] and
// [DefaultMaxHoldDown].
func WithFlapDamping(stableAfter, maxHold time.Duration) FallbackOption {
	return func(o *fallbackOptions) {
		if stableAfter > 0 {
			o.stableAfter = stableAfter
		}
		if maxHold > 0 {
			o.maxHold = maxHold
		}
	}
}

// WithHealthInterval makes a healthy Fallback check its primary every d,
// whether calls flow or not, so that an idle replica notices an outage: a
// Ping on a [Pinger] (bounded by the primary timeout), else the check the
// recovery probe makes. A failed check is repeated at once, and a second
// failure in a row degrades the Fallback as a failed call does (recovery
// then needs the probe, flap damping included). The check does not run
// while the Fallback is degraded (the probe runs then) or starting. Zero
// keeps [DefaultHealthInterval]; a negative d turns the check off.
func WithHealthInterval(d time.Duration) FallbackOption {
	return func(o *fallbackOptions) {
		if d != 0 {
			o.healthEvery = d
		}
	}
}

// WithStartWait makes the Fallback start unverified ([Health].Starting):
// from NewFallback on, it checks its primary as the recovery probe does
// (Verify on a [Verifier]), again with the probe's backoff while the check
// fails, for at most d. Until a check passes, every call waits for it
// (within its ctx: a call whose ctx ends first fails with an error
// wrapping [ErrUnavailable]; none is served from local state). When a
// check passes, the Fallback is healthy and calls go to the primary. When
// d passes first, or a check fails with a cause that waiting does not fix
// (anything but CauseUnreachable, CauseClusterDown, CauseLoading and
// CauseMasterDown), the Fallback degrades with that cause as after a
// failed call: calls are served from local state (or fail, fail-closed)
// and the probe takes over. Zero or negative: the Fallback starts healthy
// (the default).
func WithStartWait(d time.Duration) FallbackOption {
	return func(o *fallbackOptions) { o.startWait = d }
}

// Fallback is a Store that uses a primary (shared, Redis) store while it
// answers and a local (memory) store while it does not.
//
// A primary call that fails or takes longer than the primary timeout marks
// the Fallback degraded, with the cause the error names (see [Health] and
// [CauseOf]), and the call is served from local state (or fails with
// [ErrUnavailable] when the call or the Fallback is fail-closed). While
// degraded, calls go straight to local state, and a background probe
// checks the primary with exponential backoff. A primary that is a
// [Verifier] must pass Verify (its own operations, writes included), so a
// server that answers PING but refuses writes (out of memory, read-only)
// stays degraded; other primaries are pinged. When the probe passes, the
// Fallback is healthy again and calls return to the primary. A failure soon
// after a recovery is a flap: the next recovery then waits for a hold-down
// (see [WithFlapDamping]). A failure that coincides with the end of the
// caller's own ctx (cancelled, or a deadline shorter than the primary
// timeout) is returned as is; the primary is then probed in the
// background, and the Fallback degrades only if that probe fails too.
// Without calls, the health check of [WithHealthInterval] notices an
// outage; with [WithStartWait], no call is served before the first
// verification ends.
//
// Tickets record which backend issued them, and Complete goes to that
// backend. Completing a primary ticket while degraded applies the
// observation and budget locally; the primary's registration then ages out
// after its ticket TTL. An empty ticket (nothing registered) stays empty,
// and Complete with it goes where a call without a ticket would: to the
// primary while healthy, to local state while degraded. Gate closings the
// primary reports are mirrored into local state, so gates closed before an
// outage stay closed during it. This includes gates closed because the
// known quota is used up by the calls in flight: locally such a gate stays
// closed until the quota's reset, since local state cannot see the
// primary's calls in flight. The quotas that observations report are
// mirrored too, so that during an outage local state still admits no more
// than the last known remaining count (plus the calls that were in flight
// on the primary when it failed). State is otherwise not copied in either
// direction: in-flight counts, budgets and pacing restart from local counts
// during an outage, and from the primary's after.
//
// Fallback routes; its health (healthy, starting, degraded and why, the
// flaps, the probes and the listeners) is a state machine of its own,
// primaryHealth (health.go), which Fallback asks where a call goes and
// tells of each primary failure.
type Fallback struct {
	primary, local Store
	opts           fallbackOptions
	h              *primaryHealth
}

var _ Store = (*Fallback)(nil)

// NewFallback returns a Fallback over primary and local, healthy until a
// primary call (or [Fallback.Verify], or the health check of
// [WithHealthInterval]) fails, or starting ([WithStartWait]). It starts
// the health check (and the first verification) in the background. The
// Fallback owns both stores: Close stops what it started and closes them.
func NewFallback(primary, local Store, opts ...FallbackOption) *Fallback {
	o := fallbackOptions{
		timeout: DefaultPrimaryTimeout, verifyTimeout: DefaultVerifyTimeout,
		probeMin: DefaultProbeMin, probeMax: DefaultProbeMax,
		stableAfter: DefaultStableAfter, maxHold: DefaultMaxHoldDown,
		healthEvery: DefaultHealthInterval,
	}
	for _, opt := range opts {
		opt(&o)
	}
	o.probeMax = max(o.probeMax, o.probeMin)
	f := &Fallback{primary: primary, local: local, opts: o}
	f.h = newPrimaryHealth(o, f.check1, f.ping)
	return f
}

// Started returns a channel closed when the Fallback stops starting (at
// once without [WithStartWait]): its first verification passed, or it
// degraded.
func (f *Fallback) Started() <-chan struct{} { return f.h.started }

// Primary returns the store f serves from while it is healthy.
func (f *Fallback) Primary() Store { return f.primary }

// Degraded reports whether the primary is currently not in use.
func (f *Fallback) Degraded() bool { return f.h.degraded.Load() }

// Health returns the current state and, while degraded, its cause.
func (f *Fallback) Health() Health { return f.h.get() }

// OnStateChange registers fn to be called on each change between healthy
// (false) and degraded (true), in order, from the goroutine that made the
// change. fn must not block for long nor call the Fallback's Store
// methods (it may call Degraded and Health); it is not called for the state
// current at registration (read Degraded for that).
func (f *Fallback) OnStateChange(fn func(degraded bool)) { f.h.onStateChange(fn) }

// OnHealthChange registers fn to be called, as OnStateChange's listeners
// are, on each change between healthy and degraded and on each change of
// cause while degraded, with the new Health.
func (f *Fallback) OnHealthChange(fn func(Health)) { f.h.onHealthChange(fn) }

// Verify checks the primary now, as the recovery probe does (Verify on a
// [Verifier], else a ping), bounded by ctx and the verify timeout. When
// the check fails the Fallback degrades with the error's cause (if it was
// not degraded already) and probes for recovery, and the error is
// returned; while starting ([WithStartWait]) a failure ends the start,
// degraded. A Fallback made without a start wait is verified this way at
// start, so that a misconfigured shared store is named at once rather than
// at the first call; one made with it verifies itself.
func (f *Fallback) Verify(ctx context.Context) error {
	err := f.check1(ctx)
	if err == nil || errors.Is(err, ErrClosed) {
		return err
	}
	f.h.degrade(err)
	return err
}

// Admit implements Store.
func (f *Fallback) Admit(ctx context.Context, req AdmitRequest) (Admission, error) {
	return call(f, ctx, "admit", req.FailClosed,
		func(pctx context.Context) (Admission, error) {
			a, err := f.primary.Admit(pctx, req)
			if err == nil {
				a.Ticket.ID = issued(primaryTicket, a.Ticket.ID)
				f.mirror(ctx, req.Gate, a.GateClosedUntil, req.Now)
			}
			return a, err
		},
		func(ctx context.Context) (Admission, error) {
			a, err := f.local.Admit(ctx, req)
			if err == nil {
				a.Ticket.ID = issued(localTicket, a.Ticket.ID)
			}
			return a, err
		})
}

// issued prefixes a non-empty ticket id with the backend that issued it;
// an empty ticket stays empty.
func issued(backend, id string) string {
	if id == "" {
		return ""
	}
	return backend + id
}

// Complete implements Store. A ticket goes back to the backend that issued
// it; an empty ticket goes to the primary while healthy, to local state
// while degraded.
func (f *Fallback) Complete(ctx context.Context, req CompleteRequest) (CompleteResult, error) {
	if id, ok := strings.CutPrefix(req.Ticket.ID, localTicket); ok {
		req.Ticket.ID = id
		r, err := f.local.Complete(ctx, req)
		if err != nil {
			return r, fmt.Errorf("store: complete (local): %w", err)
		}
		return r, nil
	}
	req.Ticket.ID = strings.TrimPrefix(req.Ticket.ID, primaryTicket)
	return call(f, ctx, "complete", req.FailClosed,
		func(pctx context.Context) (CompleteResult, error) {
			r, err := f.primary.Complete(pctx, req)
			if err == nil {
				f.mirrorObs(ctx, req.Gate, r.GateClosedUntil, req.Obs, req.Now)
			}
			return r, err
		},
		func(ctx context.Context) (CompleteResult, error) {
			local := req
			local.Ticket = Ticket{} // registered on the primary: it ages out there
			return f.local.Complete(ctx, local)
		})
}

// Observe implements Store.
func (f *Fallback) Observe(ctx context.Context, req ObserveRequest) (GateStatus, error) {
	return call(f, ctx, "observe", req.FailClosed,
		func(pctx context.Context) (GateStatus, error) {
			st, err := f.primary.Observe(pctx, req)
			if err == nil {
				f.mirrorObs(ctx, req.Gate, st.ClosedUntil, req.Obs, req.Now)
			}
			return st, err
		},
		func(ctx context.Context) (GateStatus, error) { return f.local.Observe(ctx, req) })
}

// GateState implements Store. It fails closed only when the Fallback is
// ([WithFailClosed]): it reports state and changes nothing.
func (f *Fallback) GateState(ctx context.Context, gate GateKey, now time.Time) (GateStatus, error) {
	return call(f, ctx, "gate state", false,
		func(pctx context.Context) (GateStatus, error) {
			st, err := f.primary.GateState(pctx, gate, now)
			if err == nil {
				f.mirror(ctx, gate, st.ClosedUntil, now)
			}
			return st, err
		},
		func(ctx context.Context) (GateStatus, error) { return f.local.GateState(ctx, gate, now) })
}

// call is the one path of every operation: on the primary while healthy,
// bounded by the primary timeout; on local state while degraded or when the
// primary fails; or, when the call (failClosed) or the Fallback is
// fail-closed, an error wrapping ErrUnavailable instead of local state. An
// error that must reach the caller unchanged (its own ctx ended, or the
// store is closed) is returned without trying local state.
func call[R any](f *Fallback, ctx context.Context, op string, failClosed bool,
	primary, local func(ctx context.Context) (R, error),
) (R, error) {
	var zero R
	var cause error
	if f.h.starting.Load() {
		if err := f.h.awaitStart(ctx, op); err != nil {
			return zero, err
		}
	}
	if !f.h.degraded.Load() {
		pctx, cancel := context.WithTimeout(ctx, f.opts.timeout)
		r, err := primary(pctx)
		cancel()
		if err == nil {
			return r, nil
		}
		if cause = f.failed(ctx, err); cause == nil {
			return zero, fmt.Errorf("store: %s: %w", op, err)
		}
	}
	if failClosed || f.opts.failClosed {
		return zero, f.unavailable(op, cause)
	}
	r, err := local(ctx)
	if err != nil {
		return r, fmt.Errorf("store: %s (local): %w", op, err)
	}
	return r, nil
}

// InFlight implements InFlightCounter from the backend in use (the primary
// while healthy), for stores that count; others report 0.
func (f *Fallback) InFlight(ctx context.Context, gate GateKey, now time.Time) (int64, error) {
	s := f.inUse()
	c, ok := s.(InFlightCounter)
	if !ok {
		return 0, nil
	}
	return c.InFlight(ctx, gate, now)
}

// InspectGate implements Inspector from the backend in use (the primary
// while healthy), for stores that inspect; others report nothing.
func (f *Fallback) InspectGate(ctx context.Context, gate GateKey, now time.Time) (GateInfo, error) {
	s := f.inUse()
	in, ok := s.(Inspector)
	if !ok {
		return GateInfo{}, nil
	}
	return in.InspectGate(ctx, gate, now)
}

// ListGates implements GateLister from the backend in use (the primary
// while healthy), for stores that list; others list nothing. A listing
// that spans a switch of backend continues in the other's order: its
// pages may then miss or repeat gates.
func (f *Fallback) ListGates(ctx context.Context, req ListGatesRequest) (GatePage, error) {
	s := f.inUse()
	l, ok := s.(GateLister)
	if !ok {
		return GatePage{}, nil
	}
	return l.ListGates(ctx, req)
}

// inUse is the backend calls go to now: the primary while healthy.
func (f *Fallback) inUse() Store {
	if f.h.degraded.Load() {
		return f.local
	}
	return f.primary
}

// Close stops the probe and closes both stores. It is idempotent.
func (f *Fallback) Close() error {
	if !f.h.close() {
		return nil
	}
	return errors.Join(f.primary.Close(), f.local.Close())
}

// failed classifies a primary failure. It returns nil when the error must
// go back to the caller unchanged (the caller's ctx ended, or the store is
// closed); otherwise it degrades the Fallback and returns the cause.
func (f *Fallback) failed(ctx context.Context, err error) error {
	if errors.Is(err, ErrClosed) {
		return nil
	}
	if ctx.Err() != nil {
		// The caller gave up first: maybe it was impatient, maybe the
		// primary hangs. Check the primary on our own time.
		f.h.check()
		return nil
	}
	f.h.degrade(err)
	return err
}

// unavailable is the error of a fail-closed call: cause is this call's
// primary error, or nil when the Fallback was already degraded.
func (f *Fallback) unavailable(op string, cause error) error {
	if cause == nil {
		h := f.Health()
		return fmt.Errorf("store: %s: %w (degraded: %s, waiting for the shared store to recover)", op, ErrUnavailable, h.Cause)
	}
	if errors.Is(cause, ErrUnavailable) {
		return fmt.Errorf("store: %s: %w", op, cause)
	}
	return fmt.Errorf("store: %s: %w: %w", op, ErrUnavailable, cause)
}

// mirror copies a closed gate reported by the primary into local state.
func (f *Fallback) mirror(ctx context.Context, gate GateKey, until, now time.Time) {
	f.mirrorObs(ctx, gate, until, Observation{}, now)
}

// mirrorObs copies a closed gate reported by the primary, and the quota
// obs reports, into local state.
func (f *Fallback) mirrorObs(ctx context.Context, gate GateKey, until time.Time, obs Observation, now time.Time) {
	if until.IsZero() && !obs.HasQuota {
		return
	}
	_, _ = f.local.Observe(ctx, ObserveRequest{Gate: gate, Obs: Observation{
		CloseUntil: until, HasQuota: obs.HasQuota, Remaining: obs.Remaining, Reset: obs.Reset,
	}, MaxGate: MaxMirrorGate, Now: now})
}

// ping checks that the primary answers: Ping on a Pinger, bounded by the
// primary timeout, else check1.
func (f *Fallback) ping(ctx context.Context) error {
	p, ok := f.primary.(Pinger)
	if !ok {
		return f.check1(ctx)
	}
	ctx, cancel := context.WithTimeout(ctx, f.opts.timeout)
	defer cancel()
	return p.Ping(ctx)
}

// check1 checks the primary once: Verify on a Verifier (bounded by the
// verify timeout), else Ping (bounded by the primary timeout), else
// GateState on a reserved key.
func (f *Fallback) check1(ctx context.Context) error {
	if v, ok := f.primary.(Verifier); ok {
		ctx, cancel := context.WithTimeout(ctx, f.opts.verifyTimeout)
		defer cancel()
		return v.Verify(ctx)
	}
	ctx, cancel := context.WithTimeout(ctx, f.opts.timeout)
	defer cancel()
	if p, ok := f.primary.(Pinger); ok {
		return p.Ping(ctx)
	}
	_, err := f.primary.GateState(ctx, GateKey{Tenant: "\x00probe"}, time.Now())
	return err
}

// errDetail returns err's text, at most maxDetail bytes (cut at a rune
// boundary).
func errDetail(err error) string {
	s := err.Error()
	if len(s) <= maxDetail {
		return s
	}
	cut := maxDetail
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
