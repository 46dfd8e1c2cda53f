package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Fallback defaults.
const (
	// MaxMirrorGate bounds the gate times mirrored into local state: the
	// primary already bounded them by each call's max_gate.
	MaxMirrorGate = 7 * 24 * time.Hour
	// DefaultPrimaryTimeout bounds each call to the primary store, whatever
	// the caller's deadline.
	DefaultPrimaryTimeout = 250 * time.Millisecond
	// DefaultProbeMin is the first wait between two recovery probes.
	DefaultProbeMin = 100 * time.Millisecond
	// DefaultProbeMax is the longest wait between two recovery probes.
	DefaultProbeMax = 2 * time.Second
)

// Ticket id prefixes: which backend issued a ticket.
const (
	primaryTicket = "p"
	localTicket   = "l"
)

// Pinger is implemented by stores that can check their backend cheaply.
// Fallback probes a primary that implements it with Ping, and otherwise
// with GateState on a reserved key.
type Pinger interface {
	// Ping returns nil when the backend answers.
	Ping(ctx context.Context) error
}

// FallbackOption configures a Fallback.
type FallbackOption func(*fallbackOptions)

type fallbackOptions struct {
	failClosed         bool
	timeout            time.Duration
	probeMin, probeMax time.Duration
}

// WithFailClosed makes the Fallback return an error wrapping
// [ErrUnavailable] while the primary is unreachable, instead of serving
// from local state. It still reports itself degraded and probes for
// recovery.
func WithFailClosed() FallbackOption {
	return func(o *fallbackOptions) { o.failClosed = true }
}

// WithPrimaryTimeout bounds each call to the primary (and each probe) to d,
// even when the caller's deadline is later; zero or negative keeps
// [DefaultPrimaryTimeout].
func WithPrimaryTimeout(d time.Duration) FallbackOption {
	return func(o *fallbackOptions) {
		if d > 0 {
			o.timeout = d
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

// Fallback is a Store that uses a primary (shared, Redis) store while it
// answers and a local (memory) store while it does not.
//
// A primary call that fails or takes longer than the primary timeout marks
// the Fallback degraded, and the call is served from local state (or fails
// with [ErrUnavailable] under [WithFailClosed]). While degraded, calls go
// straight to local state, and a background probe checks the primary with
// exponential backoff; when it answers, the Fallback is healthy again and
// calls return to the primary. A failure that coincides with the end of the
// caller's own ctx (cancelled, or a deadline shorter than the primary
// timeout) is returned as is; the primary is then pinged in the background,
// and the Fallback degrades only if that ping fails too.
//
// Tickets record which backend issued them, and Complete goes to that
// backend. Completing a primary ticket while degraded applies the
// observation and budget locally; the primary's registration then ages out
// after its ticket TTL. An empty ticket (nothing registered) stays empty,
// and Complete with it goes where a call without a ticket would: to the
// primary while healthy, to local state while degraded. Gate closings the primary reports are mirrored into
// local state, so gates closed before an outage stay closed during it. This
// includes gates closed because the known quota is used up by the calls in
// flight: locally such a gate stays closed until the quota's reset, since
// local state cannot see the primary's calls in flight. The quotas that
// observations report are mirrored too, so that during an outage local
// state still admits no more than the last known remaining count (plus the
// calls that were in flight on the primary when it failed). State is
// otherwise not copied in either direction: in-flight counts, budgets and
// pacing restart from local counts during an outage, and from the
// primary's after.
type Fallback struct {
	primary, local Store
	opts           fallbackOptions

	degraded atomic.Bool
	checking atomic.Bool // a check started by a caller's early exit runs

	mu        sync.Mutex // guards the fields below and state changes
	closed    bool
	life      context.Context // cancelled by Close: stops the probe
	kill      context.CancelFunc
	listeners []func(degraded bool)
	wg        sync.WaitGroup // the probe and check goroutines

	notifyMu sync.Mutex // keeps notifications in the order of the changes
}

var _ Store = (*Fallback)(nil)

// NewFallback returns a Fallback over primary and local, healthy until a
// primary call fails. The Fallback owns both stores: Close closes them.
func NewFallback(primary, local Store, opts ...FallbackOption) *Fallback {
	o := fallbackOptions{timeout: DefaultPrimaryTimeout, probeMin: DefaultProbeMin, probeMax: DefaultProbeMax}
	for _, opt := range opts {
		opt(&o)
	}
	o.probeMax = max(o.probeMax, o.probeMin)
	life, kill := context.WithCancel(context.Background())
	return &Fallback{primary: primary, local: local, opts: o, life: life, kill: kill}
}

// Degraded reports whether the primary is currently considered unreachable.
func (f *Fallback) Degraded() bool { return f.degraded.Load() }

// OnStateChange registers fn to be called on each change between healthy
// (false) and degraded (true), in order, from the goroutine that made the
// change. fn must not block for long nor call the Fallback's Store
// methods (it may call Degraded); it is not called for the state current at
// registration (read Degraded for that).
func (f *Fallback) OnStateChange(fn func(degraded bool)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.listeners = append(f.listeners, fn)
}

// Admit implements Store.
func (f *Fallback) Admit(ctx context.Context, req AdmitRequest) (Admission, error) {
	var cause error
	if !f.degraded.Load() {
		pctx, cancel := context.WithTimeout(ctx, f.opts.timeout)
		a, err := f.primary.Admit(pctx, req)
		cancel()
		if err == nil {
			if a.Ticket.ID != "" { // an empty ticket stays empty
				a.Ticket.ID = primaryTicket + a.Ticket.ID
			}
			f.mirror(ctx, req.Gate, a.GateClosedUntil, req.Now)
			return a, nil
		}
		if cause = f.failed(ctx, err); cause == nil {
			return Admission{}, fmt.Errorf("store: admit: %w", err)
		}
	}
	if f.opts.failClosed || req.FailClosed {
		return Admission{}, f.unavailable("admit", cause)
	}
	a, err := f.local.Admit(ctx, req)
	if err != nil {
		return a, fmt.Errorf("store: admit (local): %w", err)
	}
	if a.Ticket.ID != "" {
		a.Ticket.ID = localTicket + a.Ticket.ID
	}
	return a, nil
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
	var cause error
	if !f.degraded.Load() {
		pctx, cancel := context.WithTimeout(ctx, f.opts.timeout)
		r, err := f.primary.Complete(pctx, req)
		cancel()
		if err == nil {
			f.mirrorObs(ctx, req.Gate, r.GateClosedUntil, req.Obs, req.Now)
			return r, nil
		}
		if cause = f.failed(ctx, err); cause == nil {
			return CompleteResult{}, fmt.Errorf("store: complete: %w", err)
		}
	}
	if f.opts.failClosed || req.FailClosed {
		return CompleteResult{}, f.unavailable("complete", cause)
	}
	req.Ticket = Ticket{} // registered on the primary: it ages out there
	r, err := f.local.Complete(ctx, req)
	if err != nil {
		return r, fmt.Errorf("store: complete (local): %w", err)
	}
	return r, nil
}

// Observe implements Store.
func (f *Fallback) Observe(ctx context.Context, req ObserveRequest) (GateStatus, error) {
	var cause error
	if !f.degraded.Load() {
		pctx, cancel := context.WithTimeout(ctx, f.opts.timeout)
		st, err := f.primary.Observe(pctx, req)
		cancel()
		if err == nil {
			f.mirrorObs(ctx, req.Gate, st.ClosedUntil, req.Obs, req.Now)
			return st, nil
		}
		if cause = f.failed(ctx, err); cause == nil {
			return GateStatus{}, fmt.Errorf("store: observe: %w", err)
		}
	}
	if f.opts.failClosed || req.FailClosed {
		return GateStatus{}, f.unavailable("observe", cause)
	}
	st, err := f.local.Observe(ctx, req)
	if err != nil {
		return st, fmt.Errorf("store: observe (local): %w", err)
	}
	return st, nil
}

// GateState implements Store. It never fails closed: it reports state and
// changes nothing.
func (f *Fallback) GateState(ctx context.Context, gate GateKey, now time.Time) (GateStatus, error) {
	var cause error
	if !f.degraded.Load() {
		pctx, cancel := context.WithTimeout(ctx, f.opts.timeout)
		st, err := f.primary.GateState(pctx, gate, now)
		cancel()
		if err == nil {
			f.mirror(ctx, gate, st.ClosedUntil, now)
			return st, nil
		}
		if cause = f.failed(ctx, err); cause == nil {
			return GateStatus{}, fmt.Errorf("store: gate state: %w", err)
		}
	}
	if f.opts.failClosed {
		return GateStatus{}, f.unavailable("gate state", cause)
	}
	st, err := f.local.GateState(ctx, gate, now)
	if err != nil {
		return st, fmt.Errorf("store: gate state (local): %w", err)
	}
	return st, nil
}

// InFlight implements InFlightCounter from the backend in use (the primary
// while healthy), for stores that count; others report 0.
func (f *Fallback) InFlight(ctx context.Context, gate GateKey, now time.Time) (int64, error) {
	var s Store = f.local
	if !f.degraded.Load() {
		s = f.primary
	}
	c, ok := s.(InFlightCounter)
	if !ok {
		return 0, nil
	}
	return c.InFlight(ctx, gate, now)
}

// Close stops the probe and closes both stores. It is idempotent.
func (f *Fallback) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	f.kill()
	f.mu.Unlock()
	f.wg.Wait()
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
		f.check()
		return nil
	}
	f.setDegraded(true)
	return err
}

// check pings the primary in the background, at most one check at a time,
// and degrades the Fallback when the ping fails.
func (f *Fallback) check() {
	if !f.checking.CompareAndSwap(false, true) {
		return
	}
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		f.checking.Store(false)
		return
	}
	f.wg.Add(1)
	f.mu.Unlock()
	go func() {
		defer f.wg.Done()
		defer f.checking.Store(false)
		if err := f.ping(); err != nil && f.life.Err() == nil {
			f.setDegraded(true)
		}
	}()
}

func (f *Fallback) unavailable(op string, cause error) error {
	if cause == nil {
		return fmt.Errorf("store: %s: %w (degraded, waiting for the shared store to recover)", op, ErrUnavailable)
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

// setDegraded changes the state, starts or ends probing, and notifies the
// listeners in order.
func (f *Fallback) setDegraded(d bool) {
	f.mu.Lock()
	if f.closed || f.degraded.Load() == d {
		f.mu.Unlock()
		return
	}
	f.degraded.Store(d)
	if d {
		f.wg.Add(1)
		go f.probe()
	}
	listeners := append([]func(bool){}, f.listeners...)
	f.notifyMu.Lock()
	f.mu.Unlock()
	defer f.notifyMu.Unlock()
	for _, fn := range listeners {
		fn(d)
	}
}

// probe checks the primary with exponential backoff until it answers or
// the Fallback closes.
func (f *Fallback) probe() {
	defer f.wg.Done()
	wait := f.opts.probeMin
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		select {
		case <-f.life.Done():
			return
		case <-timer.C:
		}
		if f.ping() == nil {
			f.setDegraded(false)
			return
		}
		wait = min(2*wait, f.opts.probeMax)
		timer.Reset(wait)
	}
}

func (f *Fallback) ping() error {
	ctx, cancel := context.WithTimeout(f.life, f.opts.timeout)
	defer cancel()
	if p, ok := f.primary.(Pinger); ok {
		return p.Ping(ctx)
	}
	_, err := f.primary.GateState(ctx, GateKey{Tenant: "\x00probe"}, time.Now())
	return err
}
