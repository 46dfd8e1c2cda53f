package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// primaryHealth is a Fallback's health, as a state machine of its own:
// whether the primary is in use, starting (WithStartWait) or degraded and
// why (Health); the flaps and their hold-down (WithFlapDamping); the
// background checks that move it (the first verification, the health check
// of a healthy primary, the recovery probe of a degraded one, the check
// after a caller's early exit); and the listeners told of each change, in
// order. It knows nothing of routing: the Fallback reads degraded and
// starting to route each call, and tells it of a primary failure (degrade,
// check). It checks the primary only through check1 and ping, the
// Fallback's.
type primaryHealth struct {
	opts         fallbackOptions
	check1, ping func(context.Context) error

	degraded atomic.Bool
	checking atomic.Bool   // a check started by a caller's early exit runs
	starting atomic.Bool   // the first verification has not ended (WithStartWait)
	started  chan struct{} // closed when it ends

	mu          sync.Mutex // guards the fields below and state changes
	closed      bool
	state       Health
	recoveredAt time.Time       // the last return to the primary
	flaps       int             // failures in a row that came soon after a recovery
	life        context.Context // cancelled by close: stops the probe and checks
	kill        context.CancelFunc
	listeners   []func(degraded bool)
	watchers    []func(Health)
	wg          sync.WaitGroup // the probe and check goroutines

	notifyMu sync.Mutex // keeps notifications in the order of the changes
}

// newPrimaryHealth returns the health of a primary checked by check1 (a
// full check) and ping (the health check's), healthy or, with a start
// wait, starting; it starts the first verification and the health check in
// the background.
func newPrimaryHealth(o fallbackOptions, check1, ping func(context.Context) error) *primaryHealth {
	life, kill := context.WithCancel(context.Background())
	h := &primaryHealth{
		opts: o, check1: check1, ping: ping, life: life, kill: kill,
		state: Health{Since: time.Now()}, started: make(chan struct{}),
	}
	if o.startWait > 0 {
		h.starting.Store(true)
		h.state.Starting = true
		h.wg.Add(1)
		go h.start(o.startWait)
	} else {
		close(h.started)
	}
	if o.healthEvery > 0 {
		h.wg.Add(1)
		go h.watchPrimary(o.healthEvery)
	}
	return h
}

// get returns the current state.
func (h *primaryHealth) get() Health {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.state
}

// onStateChange and onHealthChange register listeners (see
// Fallback.OnStateChange and Fallback.OnHealthChange).
func (h *primaryHealth) onStateChange(fn func(degraded bool)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.listeners = append(h.listeners, fn)
}

func (h *primaryHealth) onHealthChange(fn func(Health)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.watchers = append(h.watchers, fn)
}

// close stops the background checks and waits for them. It reports
// false when the health was closed already.
func (h *primaryHealth) close() bool {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return false
	}
	h.closed = true
	h.kill()
	h.mu.Unlock()
	h.wg.Wait()
	return true
}

// awaitStart waits until the Fallback stops starting, within ctx.
func (h *primaryHealth) awaitStart(ctx context.Context, op string) error {
	select {
	case <-h.started:
		return nil
	case <-h.life.Done():
		return fmt.Errorf("store: %s: %w", op, ErrClosed)
	case <-ctx.Done():
		return fmt.Errorf("store: %s: %w (the shared store is not verified yet: the broker is starting): %w", op, ErrUnavailable, ctx.Err())
	}
}

// check probes the primary in the background, at most one check at a
// time, and degrades the Fallback when the probe fails.
func (h *primaryHealth) check() {
	if !h.checking.CompareAndSwap(false, true) {
		return
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		h.checking.Store(false)
		return
	}
	h.wg.Add(1)
	h.mu.Unlock()
	go func() {
		defer h.wg.Done()
		defer h.checking.Store(false)
		if err := h.check1(h.life); err != nil && h.life.Err() == nil {
			h.degrade(err)
		}
	}()
}

// degrade marks the Fallback degraded with err's cause, counts a flap when
// it comes soon after a recovery, starts the probe, and notifies; while
// already degraded it only records a change of cause.
func (h *primaryHealth) degrade(err error) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.degradeLocked(err)
}

// degradeLocked is degrade, called with h.mu held; it releases it. While
// starting it ends the start, degraded.
func (h *primaryHealth) degradeLocked(err error) {
	cause, detail := CauseOf(err), errDetail(err)
	now := time.Now()
	was := h.state
	if was.Degraded {
		if was.Cause == cause {
			h.state.Detail = detail // the same trouble, in fresher words
			h.mu.Unlock()
			return
		}
		h.state = Health{Degraded: true, Cause: cause, Detail: detail, Since: now}
		h.notify(false)
		return
	}
	if !h.recoveredAt.IsZero() && now.Sub(h.recoveredAt) < h.opts.stableAfter {
		h.flaps++
	} else {
		h.flaps = 0
	}
	h.state = Health{Degraded: true, Cause: cause, Detail: detail, Since: now}
	h.degraded.Store(true)
	h.endStartLocked()
	h.wg.Add(1)
	go h.probe(h.holdDown())
	h.notify(true)
}

// endStartLocked ends the start (once), with h.mu held: calls waiting for
// it go on, to the backend h.degraded names.
func (h *primaryHealth) endStartLocked() {
	if h.starting.Swap(false) {
		close(h.started)
	}
}

// start runs the first verification (see WithStartWait) until it passes,
// fails with a cause that waiting does not fix, wait passes, or the
// Fallback closes.
func (h *primaryHealth) start(wait time.Duration) {
	defer h.wg.Done()
	deadline := time.Now().Add(wait)
	backoff := h.opts.probeMin
	for {
		ctx, cancel := context.WithDeadline(h.life, deadline)
		err := h.check1(ctx)
		cancel()
		if h.life.Err() != nil {
			return
		}
		left := time.Until(deadline)
		h.mu.Lock()
		if h.closed || !h.starting.Load() {
			h.mu.Unlock()
			return
		}
		switch {
		case err == nil:
			h.endStartLocked()
			h.state = Health{Since: time.Now()}
			h.notify(false)
			return
		case left <= 0 || !passing(CauseOf(err)):
			h.degradeLocked(err)
			return
		}
		cause, detail := CauseOf(err), errDetail(err)
		changed := h.state.Cause != cause
		h.state.Cause, h.state.Detail = cause, detail
		if changed {
			h.notify(false)
		} else {
			h.mu.Unlock()
		}
		timer := time.NewTimer(min(backoff, left))
		select {
		case <-h.life.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
		backoff = min(2*backoff, h.opts.probeMax)
	}
}

// passing reports whether a failure of cause c may pass by itself soon
// (the server starting, a failover), so that a start is worth waiting for.
func passing(c Cause) bool {
	switch c {
	case CauseUnreachable, CauseClusterDown, CauseLoading, CauseMasterDown:
		return true
	}
	return false
}

// watchPrimary checks the healthy primary every interval until the
// Fallback closes (see WithHealthInterval).
func (h *primaryHealth) watchPrimary(every time.Duration) {
	defer h.wg.Done()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-h.life.Done():
			return
		case <-tick.C:
		}
		if h.degraded.Load() || h.starting.Load() {
			continue
		}
		if h.ping(h.life) == nil {
			continue
		}
		err := h.ping(h.life) // once more: one slow answer is no outage
		if err == nil || errors.Is(err, ErrClosed) || h.life.Err() != nil || h.degraded.Load() {
			continue
		}
		h.degrade(err)
	}
}

// recover returns the Fallback to the primary and notifies.
func (h *primaryHealth) recover() {
	h.mu.Lock()
	if h.closed || !h.state.Degraded {
		h.mu.Unlock()
		return
	}
	now := time.Now()
	h.recoveredAt = now
	h.state = Health{Since: now}
	h.degraded.Store(false)
	h.notify(true)
}

// notify calls the listeners (state listeners only when flipped) in order.
// It is called with h.mu held and releases it.
func (h *primaryHealth) notify(flipped bool) {
	st := h.state
	var listeners []func(bool)
	if flipped {
		listeners = append(listeners, h.listeners...)
	}
	watchers := append([]func(Health){}, h.watchers...)
	h.notifyMu.Lock()
	h.mu.Unlock()
	defer h.notifyMu.Unlock()
	for _, fn := range listeners {
		fn(st.Degraded)
	}
	for _, fn := range watchers {
		fn(st)
	}
}

// holdDown returns how long the primary must pass every probe before the
// Fallback returns to it: nothing after a stable period, maxWait ×
// 2^(flaps-1) up to maxHold while it flaps. Called with h.mu held.
func (h *primaryHealth) holdDown() time.Duration {
	if h.flaps == 0 {
		return 0
	}
	d := h.opts.probeMax
	for range h.flaps - 1 {
		if d >= h.opts.maxHold {
			break
		}
		d *= 2
	}
	return min(d, h.opts.maxHold)
}

// probe checks the primary with exponential backoff until it passes for
// the hold-down (once, with none) or the Fallback closes. A failed check
// updates the cause.
func (h *primaryHealth) probe(hold time.Duration) {
	defer h.wg.Done()
	wait := h.opts.probeMin
	var passing time.Time // since when every check passed
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		select {
		case <-h.life.Done():
			return
		case <-timer.C:
		}
		err := h.check1(h.life)
		if h.life.Err() != nil {
			return
		}
		now := time.Now()
		switch {
		case err != nil:
			passing = time.Time{}
			h.degrade(err)
			wait = min(2*wait, h.opts.probeMax)
		case hold <= 0 || !passing.IsZero() && now.Sub(passing) >= hold:
			h.recover()
			return
		default:
			if passing.IsZero() {
				passing = now
			}
			wait = max(min(h.opts.probeMax, hold-now.Sub(passing)), h.opts.probeMin)
		}
		timer.Reset(wait)
	}
}
