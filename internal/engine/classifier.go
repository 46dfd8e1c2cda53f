package engine

import (
	"context"
	"net/http"
	"time"

	"github.com/retrybroker/retrybroker/internal/providers"
	"github.com/retrybroker/retrybroker/internal/store"
)

// Classifier applies a policy to one attempt's result: it reads the
// response's hints, decides by the policy's rules, turns what the response
// said into the observation its gate records (on the broker's clock), and
// applies the gate's state to the decision. Execute's runner and
// ClassifyResponse share it, so each rule exists once. Get one from
// Runner.Classifier; it is safe for concurrent use.
type Classifier struct {
	store     store.Store
	clock     Clock
	rand      Rand
	storeTime time.Duration
	observer  Observer
	// storeBlocks is as in Runner.
	storeBlocks bool
}

// assessment is what one attempt's result means.
type assessment struct {
	// Decision is the policy's decision, before gates and budgets.
	Decision Decision
	// Obs is what the response said about its gate, with times on the
	// broker's clock.
	Obs store.Observation
	// Result is what the outcome tells the learned quota and the breaker.
	Result store.Result
}

// assess reads and decides in, then computes the gate observation. in.Now
// (or in.Response.Now) is the clock absolute hints and the deadline are read
// against: the caller's for ClassifyResponse. now is the broker's clock:
// gate times are always now plus the hint's delay, so a caller's clock can
// shape its own decision but never shared state.
//
// The reading is made into reading when it is not nil (an attempt's own
// room), else into a new one.
func (c *Classifier) assess(p *Policy, in *Input, now time.Time, reading *providers.Reading) assessment {
	if in.Response != nil {
		// Catalog rules see the request's method and the attempt number
		// (GitHub's secondary limits wait longer on repeats).
		in.Response.Method, in.Response.Attempt = in.Method, max(in.Attempt, 1)
	}
	if in.Transport == TransportNone && in.Response != nil && in.Reading == nil {
		reader := in.Reader
		if reader == nil {
			reader = p.Reader()
		}
		if reading == nil {
			reading = new(providers.Reading)
		}
		*reading = reader.Read(in.Response)
		in.Reading = reading
	}
	var a assessment
	p.decide(in, c.rand, &a.Decision)
	status := 0
	respNow := now
	if in.Transport == TransportNone && in.Response != nil {
		status, respNow = in.Response.Status, in.Response.Now
		a.Obs = observation(status, in.Reading, respNow, now)
	}
	a.Result = resultOf(status, in.Transport, in.Reading, &a.Obs)
	return a
}

// observation turns a reading into what the store records for the gate,
// re-based from the response's clock (respNow) onto the broker's (now): a
// hint on 429, 403 or 503 (or on a response the provider marks retryable)
// closes the gate for the hint's delay; a reported quota is tracked, its
// reset moved by the same offset. The store bounds both by max_gate.
func observation(status int, r *providers.Reading, respNow, now time.Time) store.Observation {
	var obs store.Observation
	if r == nil {
		return obs
	}
	if r.HasHint && r.Hint.Delay > 0 &&
		(status == http.StatusTooManyRequests || status == http.StatusForbidden || status == http.StatusServiceUnavailable ||
			r.Verdict == providers.VerdictRetry) {
		obs.CloseUntil = now.Add(r.Hint.Delay)
	}
	if r.HasQuota && !r.Quota.Reset.IsZero() {
		obs.HasQuota, obs.Remaining = true, r.Quota.Remaining
		obs.Reset = now.Add(r.Quota.Reset.Sub(respNow))
	}
	return obs
}

// resultOf says what an attempt's outcome tells the learned quota and the
// breaker: a response that closes its gate is a refusal; an attempt cut by
// the caller's cancel or deadline is lost (the provider may have counted
// it); a retryable transport error after the request may have been sent is
// broken (a failure that keeps its share of the learned quota); another
// retryable transport error, a 5xx, 408 or 429 without a hint, or a 4xx
// the provider marks retryable is a failure; a transport error that says
// nothing about the destination (refused by the guard, TLS, no such host)
// is nothing; any other response was accepted.
func resultOf(status int, transport TransportError, r *providers.Reading, obs *store.Observation) store.Result {
	switch {
	case transport == TransportCanceled:
		// The caller's cancel or deadline cut the attempt: the provider
		// may have counted it, and nothing is known of its answer.
		return store.ResultLost
	case maybeSent(transport):
		return store.ResultBroken
	case transport != TransportNone && transport.Retryable():
		return store.ResultFailed
	case transport != TransportNone:
		return store.ResultNone
	case !obs.CloseUntil.IsZero():
		return store.ResultRefused
	case status >= 500, status == http.StatusTooManyRequests, status == http.StatusRequestTimeout:
		return store.ResultFailed
	case status >= 400 && r != nil && r.Verdict == providers.VerdictRetry:
		return store.ResultFailed
	}
	return store.ResultAccepted
}

// maybeSent reports whether a transport failure of kind t may have come
// after the request reached the provider: a reset, an unexpected EOF, a
// timeout (which may be the response header's), a body cut short. Such a
// failure says nothing about the quota (the provider may have counted the
// call), unlike a refused connection or a DNS failure.
func maybeSent(t TransportError) bool {
	switch t {
	case TransportConnectionReset, TransportEOF, TransportTimeout, TransportBodyIncomplete:
		return true
	}
	return false
}

// gateClosure reports whether an observation recorded at now closed its
// gate, as the store answered (closedUntil, zero = open): by the
// response's hint ("hint"), or by its reported quota being used up
// ("quota"), and for how long from now. A gate the store keeps open (or
// closed only by earlier news) is no closure.
func gateClosure(obs store.Observation, closedUntil, now time.Time) (source string, hold time.Duration, ok bool) {
	if !closedUntil.After(now) {
		return "", 0, false
	}
	switch {
	case !obs.CloseUntil.IsZero():
		return "hint", closedUntil.Sub(now), true
	case obs.HasQuota && obs.Remaining <= 0 && obs.Reset.After(now):
		return "quota", closedUntil.Sub(now), true
	}
	return "", 0, false
}

// holdOf returns how long a gate's state keeps a caller at now from sending
// and why: its closed gate, or else its open breaker. Zero means open.
func holdOf(st store.GateStatus, now time.Time) (time.Duration, Reason) {
	switch {
	case st.Open():
		return 0, ReasonUnspecified
	case !st.ClosedUntil.IsZero() && !st.ClosedUntil.Before(st.BreakerOpenUntil):
		return max(st.ClosedUntil.Sub(now), 0), ReasonGateClosed
	}
	return max(st.BreakerOpenUntil.Sub(now), 0), ReasonBreakerOpen
}

// waitFits reports whether the policy lets a caller at now wait w: no
// longer than max_delay, and ending before the deadline (when there is one).
func (p *Policy) waitFits(w time.Duration, now, deadline time.Time) bool {
	return w <= p.MaxDelay && (deadline.IsZero() || now.Add(w).Before(deadline))
}

// applyHold applies a gate's hold (from holdOf) to a retry decision: a
// retry sooner than the hold waits for it instead, or gives up with the
// hold as its hint when the policy does not let the caller wait that long.
func (p *Policy) applyHold(d Decision, hold time.Duration, reason Reason, now, deadline time.Time) Decision {
	if d.Action != ActionRetry || hold <= d.Delay {
		return d
	}
	if !p.waitFits(hold, now, deadline) {
		return Decision{Action: ActionDoNotRetry, Reason: reason, Hint: hold, HasHint: true, Rule: d.Rule}
	}
	return Decision{Action: ActionRetry, Reason: reason, Delay: hold, Hint: d.Hint, HasHint: d.HasHint, Rule: d.Rule}
}

// Classification is a response (or transport failure) a caller got itself.
type Classification struct {
	// Policy is the caller's policy.
	Policy *Policy
	// Reader reads the response's hints; nil means the policy's reader.
	Reader providers.HintReader
	// Input is the attempt's result. Input.Now (or Input.Response.Now) is
	// the caller's clock; a zero Input.Now means the broker's.
	Input Input
	// Destination, when set, names the call's gate: the broker records what
	// the response says (a refusal closes the gate, a failure counts for its
	// breaker) and applies the gate's state to the decision, as Execute
	// does. ClassifyResponse spends no retry budget and admits nothing, so
	// it never holds a call.
	Destination *Destination
}

// storeContext bounds one store call as Runner.storeContext does.
func (c *Classifier) storeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if !c.storeBlocks {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, c.storeTime)
}

// Classify decides a caller's response. It fails only when the policy
// fails closed and the shared store cannot be reached (*StoreError); any
// other store failure leaves the decision to stand on its own.
func (c *Classifier) Classify(ctx context.Context, cl *Classification) (Decision, error) {
	now := c.clock.Now()
	in := cl.Input
	if in.Reader == nil {
		in.Reader = cl.Reader
	}
	if in.Now.IsZero() {
		in.Now = now
	}
	if in.Response != nil && in.Response.Now.IsZero() {
		in.Response.Now = in.Now
	}
	p := cl.Policy
	a := c.assess(p, &in, now, nil)
	if cl.Destination == nil || c.store == nil {
		return a.Decision, nil
	}
	sctx, cancel := c.storeContext(ctx)
	began := time.Now() // real time: the round trip's latency is a measurement
	st, err := c.store.Observe(sctx, store.ObserveRequest{
		Gate: cl.Destination.gateKey(p), Obs: a.Obs, Result: a.Result,
		Learning: p.Learning, Breaker: p.Breaker, MaxGate: p.MaxGate, FailClosed: p.FailClosed, Now: now,
	})
	cancel()
	c.observer.StoreRoundTrip("observe", time.Since(began), err != nil)
	if err != nil {
		c.observer.StoreError("observe")
		if p.FailClosed {
			return Decision{}, &StoreError{Err: err}
		}
		return a.Decision, nil
	}
	if st.BreakerChange != store.BreakerUnchanged {
		c.observer.BreakerChange(st.BreakerChange)
	}
	if src, hold, ok := gateClosure(a.Obs, st.ClosedUntil, now); ok {
		c.observer.GateClosed(src, hold)
	}
	hold, reason := holdOf(st, now)
	return p.applyHold(a.Decision, hold, reason, in.Now, in.Deadline), nil
}
