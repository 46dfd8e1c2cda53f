package engine

import (
	"time"

	"github.com/retrybroker/retrybroker/internal/store"
)

// stepKind is what a call does next at admission.
type stepKind int8

const (
	// stepSend: the attempt is admitted; send it after step.d (pacing).
	stepSend stepKind = iota
	// stepSleep: wait step.d (until step.until), then ask the store again.
	stepSleep
	// stepEnd: end the call without another attempt.
	stepEnd
)

// wakeSource says what ends a sleep besides the call's context and the
// drain.
type wakeSource int8

const (
	// wakeTimer: only the sleep's own time (backoff, hint, pacing).
	wakeTimer wakeSource = iota
	// wakeGate: the call waits in its gate's queue (see gateQueues): it
	// asks again when its turn comes, at the gate's time (the reopening,
	// the breaker's, the poll after a hold), at a completion on the gate in
	// this process, or when the call ahead of it was admitted.
	wakeGate
)

// Wait causes, as Observer.Waiting and the retrybroker.wait span name them.
const (
	causeBackoff  = "backoff"
	causeHint     = "hint"
	causeCooldown = "cooldown"
	causeBreaker  = "breaker"
	causeHeld     = "held"
	causePacing   = "pacing"
)

// step is what admissionStep decided: send, sleep or end.
type step struct {
	kind stepKind
	// d is the wait: before sending (pacing), the sleep, or, for an end
	// with hasRetryAfter, the retry_after.
	d time.Duration
	// until is now+d for a sleep (and for an end instead of one): when
	// the gate's time comes; zero for other ends.
	until time.Time
	// cause names the wait (sleep, and a send after pacing).
	cause string
	wake  wakeSource
	// outcome, hasRetryAfter: the call's end.
	outcome       Outcome
	hasRetryAfter bool
	// pacing: the end is a first attempt that pacing cannot admit within
	// the deadline (a *PacingError, not an outcome).
	pacing bool
}

// stepInput is what admissionStep decides with besides the store's answer.
type stepInput struct {
	now, deadline time.Time
	// draining: the broker's drain has begun; no call starts a wait.
	draining bool
	// attempt is the 1-based number of the attempt being admitted.
	attempt int
	// heldPoll bounds how long a held call waits before asking again.
	heldPoll time.Duration
}

// admissionStep decides what a call does with the store's answer adm to
// its attempt; it is pure (no store, no clock, no waiting).
//
//   - A closed gate or an open breaker: sleep until its time in the gate's
//     queue when the wait fits the policy's max_delay and ends before the
//     deadline; otherwise end with OUTCOME_GATE_CLOSED (BREAKER_OPEN) and
//     the wait as retry_after.
//   - Held: sleep in the gate's queue for the poll interval (HeldFor, at
//     most heldPoll, at least 1 ms) when it ends before the deadline;
//     otherwise end with OUTCOME_GATE_CLOSED and the poll as retry_after.
//   - Pacing denied: the first attempt ends with a *PacingError; a retry
//     ends with OUTCOME_DEADLINE_TOO_SHORT and the pacing wait.
//   - Admitted: send, after PaceWait.
//
// During the drain, every wait ends the call at once instead, with
// OUTCOME_SHUTTING_DOWN and the wait as retry_after; an admitted attempt
// with no wait is still sent.
func admissionStep(p *Policy, adm store.Admission, in stepInput) step {
	hold, reason := holdOf(store.GateStatus{ClosedUntil: adm.GateClosedUntil, BreakerOpenUntil: adm.BreakerOpenUntil}, in.now)
	switch {
	case reason != ReasonUnspecified:
		cause := causeCooldown
		if reason == ReasonBreakerOpen {
			cause = causeBreaker
		}
		if !p.waitFits(hold, in.now, in.deadline) {
			return holdEnd(outcomeOf(Decision{Reason: reason}), hold, cause, in)
		}
		return sleepStep(hold, cause, wakeGate, in)
	case adm.Held:
		poll := min(max(adm.HeldFor, time.Millisecond), in.heldPoll)
		if !in.now.Add(poll).Before(in.deadline) {
			return holdEnd(OutcomeGateClosed, poll, causeHeld, in)
		}
		return sleepStep(poll, causeHeld, wakeGate, in)
	case adm.PaceDenied:
		if in.attempt == 1 {
			return step{kind: stepEnd, d: adm.PaceWait, pacing: true}
		}
		return endStep(OutcomeDeadlineTooShort, adm.PaceWait)
	case adm.PaceWait > 0 && in.draining:
		return endStep(OutcomeShuttingDown, adm.PaceWait)
	}
	return step{kind: stepSend, d: max(adm.PaceWait, 0), cause: causePacing, wake: wakeTimer}
}

// sleepStep is a sleep of d for cause, or, during the drain, the call's
// end with d as retry_after.
func sleepStep(d time.Duration, cause string, wake wakeSource, in stepInput) step {
	if in.draining {
		return holdEnd(OutcomeShuttingDown, d, cause, in)
	}
	return step{kind: stepSleep, d: d, until: in.now.Add(d), cause: cause, wake: wake}
}

// holdEnd ends the call with outcome o and retry_after d instead of a
// wait of d for cause: until and cause keep what the gate said.
func holdEnd(o Outcome, d time.Duration, cause string, in stepInput) step {
	st := endStep(o, d)
	st.until, st.cause = in.now.Add(d), cause
	return st
}

// endStep ends the call with outcome o and retry_after d.
func endStep(o Outcome, d time.Duration) step {
	return step{kind: stepEnd, d: d, outcome: o, hasRetryAfter: true}
}
