package engine

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/retrybroker/retrybroker/internal/credential"
	"github.com/retrybroker/retrybroker/internal/providers"
	"github.com/retrybroker/retrybroker/internal/store"
)

// callState is the state of one call: what was fixed when it started, and
// what its attempts have produced so far.
type callState struct {
	r *Runner
	c *Call
	p *Policy

	// caller is the caller's own context, to tell its cancellation apart;
	// vctx is it with the call's values (the credential). ctx, made on
	// first use (callCtx), ends at the policy's total timeout (or the
	// caller's deadline, or the broker's drain deadline): a call that
	// never waits, Execute's fast path, needs none, and its attempt's
	// context carries those ends itself (attemptContext). totalBy is the
	// total timeout in real time (contexts run on it, not on the clock).
	ctx, caller, vctx context.Context
	release           func() // ends ctx (nil while there is none)
	totalBy           time.Time

	header http.Header // sent (a copy) on every attempt
	hasKey bool        // the request carries an idempotency key
	// tellBy is when a waiting call must have ended to be told in time:
	// the call's deadline (the caller's, or the total timeout) less the
	// answer reserve (answerReserve). Waits, retry decisions and pacing
	// are bounded by it.
	tellBy  time.Time
	maxBody int64
	gate    store.GateKey
	res     *Result // &result
	result  Result

	n      int           // the attempt being prepared or sent (1-based)
	waited time.Duration // waited before attempt n
	w      waiter        // where every wait of the call waits
	at     *attempt      // attempt n, from its admission until it is recorded (from attempts)

	// d is how the call hands its final response over, chosen once when
	// the call starts: whole in the Result (Run: wholeDelivery) or
	// streamed to a sink (Stream: *streamState).
	d    delivery
	hold *bodyHold // the call's room in the body budget, once reserved (&holdRoom)
	// holdRoom and finalRoom are the room of hold and of the final response
	// (readFinal), in the call's own allocation.
	holdRoom  bodyHold
	finalRoom FinalResponse

	// cred is the per-call state of the policy's credential (nil without
	// one); repeated is the number of attempts repeated because the
	// upstream rejected the credential (at most 1: they are attempts, not
	// retries, so max_retries does not count them).
	cred     *credential.Call
	repeated int
}

// newCall starts the state of call c, delivered by d. It is not inlined:
// its locals would join the frame of Run, which stays on the stack for the
// whole call (see callState.run).
//
//go:noinline
func (r *Runner) newCall(ctx context.Context, c *Call, d delivery) *callState {
	p := c.Policy
	s := &callState{r: r, c: c, p: p, caller: ctx, vctx: ctx, d: d}
	s.res = &s.result
	now := r.clock.Now()
	if r.realClock {
		s.totalBy = now.Add(p.TotalTimeout)
	} else {
		s.totalBy = time.Now().Add(p.TotalTimeout)
	}
	deadline := now.Add(p.TotalTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	s.tellBy = deadline.Add(-answerReserve(deadline.Sub(now)))
	// With a credential, every attempt's context names it, so that a
	// redirect to another origin drops every header it set (egress
	// redirectPolicy).
	if p.Credential != nil {
		s.vctx = credential.WithCredential(ctx, p.Credential)
	}

	s.header = c.Header
	if s.header == nil {
		s.header = http.Header{}
	}
	s.hasKey = s.header.Get(p.IdempotencyHeader) != ""
	if !s.hasKey && p.GenerateIdempotencyKey {
		s.header = s.header.Clone() // never write the caller's header
		s.header.Set(p.IdempotencyHeader, uuid.NewString())
		s.hasKey = true
	}
	s.maxBody = p.MaxResponseBody
	if c.MaxResponseBody > 0 && c.MaxResponseBody < s.maxBody {
		s.maxBody = c.MaxResponseBody
	}
	s.gate = c.destination().gateKey(p)
	if p.Credential != nil {
		s.cred = credential.NewCall(c.Body)
	}
	return s
}

// callCtx returns the call's context, made on first use: the caller's
// (with the call's values), ended at the total timeout and by the drain
// deadline. The total timeout bounds attempts in progress too (a slow
// upstream cannot hold the call past it), and so does the drain deadline.
func (s *callState) callCtx() context.Context {
	if s.ctx == nil {
		ctx, cancel := context.WithDeadline(s.vctx, s.totalBy)
		stop := context.AfterFunc(s.r.drain.hard, cancel)
		s.ctx, s.release = ctx, func() { stop(); cancel() }
	}
	return s.ctx
}

// ctxErr is the error of the call's context (callCtx), without making one:
// the caller's, context.Canceled once the drain deadline passed, and
// context.DeadlineExceeded once the total timeout did.
func (s *callState) ctxErr() error {
	if s.ctx != nil {
		return s.ctx.Err()
	}
	if err := s.vctx.Err(); err != nil {
		return err
	}
	if s.r.drain.hard.Err() != nil {
		return context.Canceled
	}
	if !time.Now().Before(s.totalBy) {
		return context.DeadlineExceeded
	}
	return nil
}

// end releases the call's context, if it made one.
func (s *callState) end() {
	if s.release != nil {
		s.release()
	}
}

// attemptContext returns the context of attempt at, a child of parent,
// and registers at in the runner's attempts in flight (attemptSet), which
// cancel it at the earlier of the attempt timeout (counted from now, the
// attempt's start) and the call's total timeout (cause
// context.DeadlineExceeded, as a context's own deadline would give:
// net/http returns the cause, and the attempt classifies as a timeout)
// and at the drain deadline (context.Canceled). The context
// carries no deadline of its own (Deadline reports parent's): nothing
// below the engine reads it, and a context with one costs a runtime timer
// per attempt. at.end cancels it and takes it out of the set.
//
// Execute's attempts are children of the call's context once it has one
// (callCtx, made when the call first waits), and of the caller's before.
// A stream's are children of the caller's always: a stream's timeouts
// bound it up to its head and not its body (streamState.final).
func (s *callState) attemptContext(at *attempt, parent context.Context, now time.Time) (context.Context, context.CancelCauseFunc) {
	d := now.Add(s.p.AttemptTimeout)
	if s.totalBy.Before(d) {
		d = s.totalBy
	}
	ctx, cancel := context.WithCancelCause(parent)
	s.r.drain.attempts.add(&at.drain, cancel, d, now)
	return ctx, cancel
}

// Bounds of the answer reserve (answerReserve).
const (
	minAnswerReserve = 10 * time.Millisecond
	maxAnswerReserve = 250 * time.Millisecond
)

// answerReserve is how long before its deadline a call that waits (in its
// gate's queue, for a hint, a backoff or pacing) stops waiting, so that its
// caller is told the outcome and the retry_after while it still listens,
// even on a loaded machine: 5% of the call's time (d, from its start to its
// deadline), at least 10 ms and at most 250 ms, and never more than a
// quarter of d.
func answerReserve(d time.Duration) time.Duration {
	return min(max(d/20, minAnswerReserve), maxAnswerReserve, max(d/4, 0))
}

// attempt is one sent attempt: its record, its response (nil after a
// transport error), the body bytes read for hints, its input and its
// assessment, and the span and context it runs under until concluded.
type attempt struct {
	rec     AttemptRecord
	adm     store.Admission
	resp    *http.Response
	peek    []byte
	peekErr error
	in      Input
	a       assessment
	span    trace.Span
	cancel  context.CancelCauseFunc // cancels the attempt's context
	stamp   credential.Stamp        // what the policy's credential put on it
	drain   attemptLink             // its place among the attempts in flight (attemptSet)
	// response and reading are what in.Response and in.Reading point to
	// once a response arrived.
	response providers.Response
	reading  providers.Reading
}

// attempts holds attempt states between attempts: one is taken when an
// attempt is admitted and given back, zeroed, when it is recorded
// (admitAttempt, recordAttempt), so that a call's attempts cost no
// allocation and a waiting call holds none.
var attempts = sync.Pool{New: func() any { return new(attempt) }}

// run is the attempt loop: admit, send, decide, complete, wait.
//
// The stack budget. Execute's handler often runs on a fresh goroutine
// (when every gRPC stream worker is busy), whose stack the runtime starts
// small and grows by copying it whole, walking every frame on it: at 256
// callers that copy was the largest single cost of the broker's own share
// (issue 22). The deepest point of a call is inside the HTTP client,
// below run, attemptOnce and send, so those three frames, and the frames
// above them (Runner.Run, the gRPC handler), hold next to nothing: the
// attempt's state is on the heap (s.at, from a pool), and the work
// before and after the send is in helpers of their own (admitAttempt,
// attemptRequest, received, conclude, waitNext), called one after another
// rather than one inside another. The whole path then fits in the 8 KiB
// stack a minimal gRPC-to-HTTP forwarder needs, which the gRPC server's
// own reading of the request has grown it to already (TestExecuteStackDepth).
// The //go:noinline marks keep profile-guided inlining from folding the
// helpers' frames back into the path.
//
//go:noinline
func (s *callState) run() (*Result, error) {
	for s.n = 1; ; s.n++ {
		if end, err := s.admitAttempt(); end {
			return s.res, err
		}
		if done, err := s.attemptOnce(); done {
			return s.res, err
		}
		if end, err := s.waitNext(); end {
			return s.res, err
		}
	}
}

// admitAttempt admits attempt s.n (admit) and reserves room for its
// bodies, and starts s.at for it. end reports that the call is over (err
// as run returns it).
//
//go:noinline
func (s *callState) admitAttempt() (end bool, err error) {
	adm, stop, err := s.admit()
	if err != nil || stop {
		return true, err
	}
	if end, err := s.reserveBodies(adm); end { // bodybudget.go: room for the bodies before each send
		return true, err
	}
	s.at = attempts.Get().(*attempt)
	s.at.adm = adm
	return false, nil
}

// attemptOnce sends attempt s.n (in s.at) and concludes it: it records the
// attempt (the wait before the next one reads its decision there), and
// drops the rest (the response, the peeked bytes, the span) before any
// wait. done reports that the call is over (err as run returns it).
//
//go:noinline
func (s *callState) attemptOnce() (done bool, err error) {
	if err := s.send(s.at); err != nil {
		s.recordAttempt()
		if err == errNotSent {
			return true, s.callerErr()
		}
		return true, err
	}
	done, err = s.conclude(s.at)
	s.recordAttempt()
	return done || err != nil, err
}

// recordAttempt appends the record of s.at to the result and ends s.at.
// The record is copied in place, without the temporary an append of it
// makes in the caller's frame (see run).
//
//go:noinline
func (s *callState) recordAttempt() {
	n := len(s.res.Attempts)
	s.res.Attempts = slices.Grow(s.res.Attempts, 1)[:n+1]
	s.res.Attempts[n] = s.at.rec
	s.at.drain.remove() // at.end left it already on every path; never pool a linked one
	*s.at = attempt{}
	attempts.Put(s.at)
	s.at = nil
}

// waitNext waits before attempt s.n+1 as the decision on attempt s.n (the
// last recorded) says, without holding room for a response. end reports
// that the call is over (err as run returns it).
//
//go:noinline
func (s *callState) waitNext() (end bool, err error) {
	s.freeResponseRoom() // bodybudget.go: no response room held while waiting
	last := &s.res.Attempts[len(s.res.Attempts)-1].Decision
	d := last.Delay
	cause := causeBackoff
	if last.Reason == ReasonServerHint {
		cause = causeHint
	}
	if end, err := s.sleep(cause, d); end {
		return true, err
	}
	s.waited += d
	return false, nil
}

// admit asks the store to admit attempt s.n and does what admissionStep
// decides with each answer: send, wait in the gate's queue (or for
// pacing) and ask again, or end the call. A call that finds calls of this
// process waiting on its gate queues behind them before it asks (see
// gateQueues). stop reports that the call ended (s.res filled in).
func (s *callState) admit() (store.Admission, bool, error) {
	if s.r.store == nil {
		return store.Admission{}, false, nil
	}
	p, g, w, clock := s.p, &s.r.events, &s.w, s.r.clock
	w.seq, w.deadline, w.maxDelay = g.arrive(), s.tellBy, p.MaxDelay
	if s.r.orderID != "" {
		w.arrived = clock.Now()
	}
	queued, cause := false, ""
	if adm, ok := g.join(s.gate, w, clock.Now()); ok {
		st := admissionStep(p, adm, s.stepInput(clock.Now()))
		if st.kind != stepSleep { // the gate's time does not fit the call
			g.leave(w, false, time.Time{}, "", clock.Now())
			return adm, true, s.endStep(st)
		}
		queued, cause = true, st.cause
	}
	for {
		if queued {
			if end, err := s.gateWait(cause); end {
				return store.Admission{}, true, err
			}
		}
		now := clock.Now()
		sctx, cancel := s.storeContext()
		began := now // real time: the round trip's latency is a measurement
		if !s.r.realClock {
			began = time.Now()
		}
		adm, err := s.r.store.Admit(sctx, store.AdmitRequest{
			Gate: s.gate, PaceHost: s.c.URL.Host, Pace: p.Pace, PaceMaxWait: s.tellBy.Sub(now),
			FirstAttempt: s.n == 1, Budget: p.Budget, Learning: p.Learning, Breaker: p.Breaker,
			FailClosed: p.FailClosed, Order: g.order(w, s.r.orderID), Now: now,
		})
		cancel()
		s.r.observer.StoreRoundTrip("admit", time.Since(began), err != nil)
		if err == nil && adm.Held {
			s.r.observer.GateHeld()
		}
		if err != nil {
			g.leave(w, true, time.Time{}, "", now)
			if s.caller.Err() != nil {
				s.res.Outcome = OutcomeCanceled
				return adm, true, s.caller.Err()
			}
			if s.ctxErr() != nil {
				return adm, true, s.endEarly(OutcomeDeadlineTooShort, 0, false)
			}
			return adm, true, &StoreError{Err: err}
		}
		st := admissionStep(p, adm, s.stepInput(now))
		switch st.kind {
		case stepSleep:
			g.hold(s.gate, w, st, now) // keeps its place when it has one
			queued, cause = true, st.cause
			continue
		case stepEnd:
			// A hold it does not wait out is the gate's news for the
			// queue; any other end passes the turn on.
			g.leave(w, st.until.IsZero(), st.until, st.cause, now)
			if adm.Admitted() {
				_ = s.complete(adm, store.Observation{}, store.ResultNone, false) // not sent: give it back
			}
			return adm, true, s.endStep(st)
		}
		g.leave(w, true, time.Time{}, "", now) // admitted: the next in line asks at once
		if st.d > 0 {
			if end, err := s.sleep(causePacing, st.d); end {
				// Admitted but not sent: give the registration back.
				_ = s.complete(adm, store.Observation{}, store.ResultNone, false)
				return adm, true, err
			}
			s.waited += st.d
		}
		return adm, false, nil
	}
}

// stepInput is what admissionStep decides with at now, besides the answer.
func (s *callState) stepInput(now time.Time) stepInput {
	return stepInput{now: now, deadline: s.tellBy, draining: s.r.drain.started(), attempt: s.n, heldPoll: s.r.heldPoll}
}

// endStep ends the call as st says: a *PacingError for a first attempt
// that pacing cannot admit, otherwise its outcome and retry_after.
func (s *callState) endStep(st step) error {
	if st.pacing {
		return &PacingError{Wait: st.d}
	}
	return s.endEarly(st.outcome, st.d, st.hasRetryAfter)
}

// endEarly ends the call without another attempt, with retryAfter when set.
func (s *callState) endEarly(o Outcome, retryAfter time.Duration, hasRetryAfter bool) error {
	s.res.Outcome = o
	s.res.RetryAfter, s.res.HasRetryAfter = retryAfter, hasRetryAfter
	return nil
}

// sleep waits d on the call's waiter (its timer, the call's context and
// the drain) inside a span, so waits show in traces. end reports that the
// call is over: canceled by the caller (err is the context's), cut by the
// total timeout, or ended by the drain (s.res filled in, err nil). The
// drain ends every wait at once, with what was left of it as retry_after:
// a waiting call has nothing in flight.
func (s *callState) sleep(cause string, d time.Duration) (end bool, err error) {
	if d <= 0 {
		return s.waitEnded(s.ctxErr(), d)
	}
	if s.r.drain.started() {
		return true, s.endEarly(OutcomeShuttingDown, d, true)
	}
	start := s.r.clock.Now()
	ctx := s.callCtx()
	_, span := s.r.tracer.Start(ctx, "retrybroker.wait", trace.WithAttributes(
		attrWaitCause.String(cause), attrWaitMS.Int64(d.Milliseconds())))
	defer span.End()
	s.r.observer.Waiting(cause, 1)
	defer s.r.observer.Waiting(cause, -1)
	select {
	case <-s.w.arm(s.r.clock, d):
		return false, nil
	case <-ctx.Done():
		s.w.stopTimer()
		return s.waitEnded(ctx.Err(), d-s.r.clock.Now().Sub(start))
	case <-s.r.drain.soft.Done():
		s.w.stopTimer()
		return true, s.endEarly(OutcomeShuttingDown, max(d-s.r.clock.Now().Sub(start), 0), true)
	}
}

// gateWait waits in the gate's queue (gateQueues.await) for the call's
// turn to ask the store, inside a span and counted as waiting for cause.
// end reports that the call is over: the gate's time passed its deadline
// or max_delay (OUTCOME_GATE_CLOSED, or BREAKER_OPEN, with the gate's time
// as retry_after), the drain began (OUTCOME_SHUTTING_DOWN, the same
// retry_after), or the context ended (waitEnded).
func (s *callState) gateWait(cause string) (end bool, err error) {
	g, clock := &s.r.events, s.r.clock
	start := clock.Now()
	ctx := s.callCtx()
	_, span := s.r.tracer.Start(ctx, "retrybroker.wait", trace.WithAttributes(
		attrWaitCause.String(cause), attrWaitMS.Int64(g.gateTime(&s.w, start).Milliseconds())))
	s.r.observer.Waiting(cause, 1)
	why := g.await(ctx, s.r.drain.soft.Done(), clock, &s.w)
	s.r.observer.Waiting(cause, -1)
	span.End()
	now := clock.Now()
	s.waited += now.Sub(start)
	if why == wokeTurn {
		return false, nil
	}
	retryAfter := g.gateTime(&s.w, now)
	g.leave(&s.w, true, time.Time{}, "", now)
	switch why {
	case wokeExpired:
		return true, s.endEarly(gateOutcome(cause), retryAfter, true)
	case wokeDrain:
		return true, s.endEarly(OutcomeShuttingDown, retryAfter, true)
	}
	if s.caller.Err() == nil && s.r.drain.hard.Err() == nil {
		// The total timeout came first (a question to the store that took
		// long): the call still ends with the gate's time.
		return true, s.endEarly(gateOutcome(cause), retryAfter, true)
	}
	return s.waitEnded(ctx.Err(), retryAfter)
}

// gateOutcome is the outcome of a call that cannot wait out its gate.
func gateOutcome(cause string) Outcome {
	if cause == causeBreaker {
		return OutcomeBreakerOpen
	}
	return OutcomeGateClosed
}

// waitEnded reports how a wait that ended with err (nil: its time came)
// ends the call: not at all, canceled by the caller, cut by the drain
// deadline (OUTCOME_SHUTTING_DOWN with d as retry_after) or by the total
// timeout.
func (s *callState) waitEnded(err error, d time.Duration) (bool, error) {
	switch {
	case err == nil:
		return false, nil
	case s.caller.Err() != nil:
		s.res.Outcome = OutcomeCanceled
		return true, s.caller.Err()
	case s.r.drain.hard.Err() != nil:
		return true, s.endEarly(OutcomeShuttingDown, max(d, 0), true)
	}
	return true, s.endEarly(OutcomeDeadlineTooShort, 0, false) // the total timeout ended the wait
}

// send sends attempt s.n, recorded in at (s.at), and assesses its
// result. It returns an error only when the attempt was not sent and the
// call is over (errNotSent, a credential that cannot sign the caller's
// request) or the destination guard refused the address; the attempt is
// then concluded already. Its frame is on the call's deepest path (see
// run): it only calls the helpers before and after the send.
//
//go:noinline
func (s *callState) send(at *attempt) error {
	req, ended, err := s.attemptRequest(at)
	if ended {
		return err
	}
	var resp *http.Response
	if err == nil {
		resp, err = s.c.Client.Do(req)
	}
	return s.received(at, req, resp, err)
}

// attemptRequest starts attempt s.n (its context and span) and builds its
// request: the call's headers, with the attempt's own (attempt number,
// trace context, credential) written into a copy. err without ended is a
// request that cannot be built (req nil; the attempt's transport
// failure). ended reports that the attempt will not be sent and is
// concluded already: err is then send's.
//
//go:noinline
func (s *callState) attemptRequest(at *attempt) (req *http.Request, ended bool, err error) {
	r, c, p := s.r, s.c, s.p
	at.rec.Number, at.rec.Waited, at.rec.Probe = s.n, s.waited, at.adm.Probe
	s.waited = 0
	// The attempt starts when its timeout starts: its record's duration
	// (from Start) is then never shorter than the timeout that cut it.
	start := time.Now()
	actx, cancel := s.attemptContext(at, s.d.attemptParent(s), start)
	s.d.started(actx, cancel)
	actx, at.span = r.startAttemptSpan(actx, c, s.n, at.adm.Probe)
	at.cancel = cancel
	// A repeat after a rejected credential is an attempt, not a retry:
	// the rules count retries (max_retries) without it.
	at.in = Input{Method: c.Method, Attempt: s.n - s.repeated, HasIdempotencyKey: s.hasKey, Reader: c.Reader, Deadline: s.tellBy}

	at.rec.Start = start
	if !r.realClock {
		at.rec.Start = r.clock.Now()
	}
	req, err = newRequest(actx, c)
	if err != nil {
		return nil, false, err
	}
	// Each attempt writes its own headers (attempt number, trace context,
	// credential) into a copy; with nothing to write it sends the call's
	// headers as they are (the transport only reads them).
	req.Header = s.header
	if p.Credential != nil || p.AttemptHeader != "" || trace.SpanContextFromContext(actx).IsValid() {
		req.Header = s.header.Clone()
		if p.AttemptHeader != "" {
			req.Header.Set(p.AttemptHeader, strconv.Itoa(s.n))
		}
		r.propagator.Inject(actx, propagation.HeaderCarrier(req.Header))
	}
	if p.Credential == nil {
		return req, false, nil
	}
	// Last: a signature covers the final headers.
	if at.stamp, err = p.Credential.Apply(actx, req, s.cred); err != nil {
		if credential.IsComponentError(err) {
			// The caller's request cannot be signed (a covered header it
			// lacks): its error, not the credential's.
			_ = s.complete(at.adm, store.Observation{}, store.ResultNone, false) // not sent: give it back
			at.rec.Duration = r.clock.Now().Sub(at.rec.Start)
			at.rec.Decision = Decision{Action: ActionDoNotRetry}
			at.rec.Error = err.Error()
			at.end()
			return nil, true, err
		}
		s.credentialFailed(at, err)
		return nil, true, errNotSent
	}
	if r.credObs != nil {
		r.credObs.CredentialApplied(c.Tenant, p.Credential.Name())
	}
	return req, false, nil
}

// received records what the send of at (req, nil when it could not be
// built) brought, resp or err, and assesses it. Error bodies, and the
// bodies the provider's rules read on other statuses (Shopify throttles
// inside a 200), are peeked for hints; the final body is what was peeked
// plus the rest. It returns a *DestinationError when the guard refused the
// address (the attempt is then concluded).
//
//go:noinline
func (s *callState) received(at *attempt, req *http.Request, resp *http.Response, err error) error {
	r, c := s.r, s.c
	now := r.clock.Now()
	at.rec.Duration = now.Sub(at.rec.Start)
	at.in.Now = now
	if err != nil {
		kind := TransportInvalidURL // a request that cannot even be built
		if req != nil {
			kind = c.Classify(err)
		}
		s.transportFailure(at, kind, err)
		if kind == TransportDestinationRefused {
			_ = s.complete(at.adm, store.Observation{}, store.ResultNone, false)
			at.end()
			return &DestinationError{Err: err}
		}
	} else {
		at.resp = resp
		at.rec.Status = resp.StatusCode
		if resp.StatusCode >= 400 || providers.NeedsBody(c.Reader, resp.StatusCode) {
			at.peek, at.peekErr = io.ReadAll(io.LimitReader(resp.Body, min(r.hintPeek, s.maxBody+1)))
		}
		at.response = providers.Response{Status: resp.StatusCode, Header: resp.Header, Body: at.peek, Now: now}
		at.in.Response = &at.response
		setSpanStatus(at.span, resp.StatusCode)
	}
	at.a = r.classifier.assess(s.p, &at.in, now, &at.reading)
	at.rec.Decision = at.a.Decision
	return nil
}

// errNotSent is send's report that the attempt was not sent and the call
// is over (s.res and the attempt's record filled in).
var errNotSent = errors.New("engine: attempt not sent")

// callerErr is what a call that ended before sending returns: the
// caller's cancellation, or nil.
func (s *callState) callerErr() error {
	if s.res.Outcome == OutcomeCanceled {
		return s.caller.Err()
	}
	return nil
}

// credentialFailed ends a call whose attempt could not get its credential
// (err is an *credential.UnavailableError or the attempt context's end):
// the attempt is not sent, its admission is given back, and the call ends
// with OutcomeCredentialsUnavailable, the attempt's record carrying the
// cause (which never holds a secret), unless the caller canceled or the
// drain deadline cut it.
func (s *callState) credentialFailed(at *attempt, err error) {
	r, name := s.r, s.p.Credential.Name()
	_ = s.complete(at.adm, store.Observation{}, store.ResultNone, false) // not sent: give it back
	at.rec.Duration = r.clock.Now().Sub(at.rec.Start)
	switch {
	case s.caller.Err() != nil:
		s.res.Outcome = OutcomeCanceled
		at.rec.Decision = Decision{Action: ActionDoNotRetry, Reason: ReasonCanceled}
	case r.drain.hard.Err() != nil:
		s.res.Outcome = OutcomeShuttingDown
		at.rec.Decision = Decision{Action: ActionDoNotRetry, Reason: ReasonShuttingDown}
	default:
		if !credential.IsUnavailable(err) {
			err = &credential.UnavailableError{Credential: name, Cause: err}
		}
		s.res.Outcome = OutcomeCredentialsUnavailable
		at.rec.Decision = Decision{Action: ActionDoNotRetry, Reason: ReasonCredentialsUnavailable}
		at.rec.Error = errorText(err, s.c.URL)
		if r.credObs != nil {
			r.credObs.CredentialUnavailable(s.c.Tenant, name, err)
		}
		s.d.failed(at.rec.Error)
	}
	if at.span.IsRecording() {
		at.span.SetAttributes(attrErrorType.String("credentials_unavailable"))
		at.span.SetStatus(codes.Error, "credentials unavailable")
	}
	RecordDecision(at.span, at.rec.Decision)
	at.end()
}

// credentialRejected reports whether at, a 401 to an attempt that carried
// the policy's credential, is to be repeated at once with a renewed
// credential: only the call's first such 401, and only when the
// credential says it renewed itself (Credential.Rejected).
func (s *callState) credentialRejected(at *attempt) bool {
	if s.p.Credential == nil || at.resp == nil || at.resp.StatusCode != http.StatusUnauthorized || s.repeated > 0 {
		return false
	}
	if !s.p.Credential.Rejected(at.stamp) {
		return false
	}
	s.repeated++
	return true
}

// newRequest builds an attempt's request from the call's validated URL (not
// parsed again), with its body replayable for redirects and for the
// transport's own retry on a dead pooled connection.
func newRequest(ctx context.Context, c *Call) (*http.Request, error) {
	if c.URL == nil || c.URL.Host == "" {
		return nil, errors.New("engine: request without a host")
	}
	req := &http.Request{
		Method: c.Method, URL: c.URL, Host: c.URL.Host,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Body: http.NoBody, GetBody: noBody,
	}
	if n := len(c.Body); n > 0 {
		body := c.Body
		req.ContentLength = int64(n)
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	return req.WithContext(ctx), nil
}

func noBody() (io.ReadCloser, error) { return http.NoBody, nil }

// end ends the attempt's span, leaves the attempts in flight and cancels
// its context.
func (at *attempt) end() {
	at.span.End()
	at.drain.remove()
	at.cancel(context.Canceled)
}

// transportFailure records a transport error of kind for the attempt and
// makes its input a transport failure (canceled when the caller canceled,
// shutting down when the drain cut it).
func (s *callState) transportFailure(at *attempt, kind TransportError, err error) {
	if s.caller.Err() != nil || s.r.drain.hard.Err() != nil {
		kind = TransportCanceled
	}
	at.rec.Transport, at.rec.Error = kind, errorText(err, s.c.URL)
	at.in.Transport, at.in.Response, at.in.Reading = kind, nil, nil
	endSpanError(at.span, kind)
}

// conclude finishes an assessed attempt: reads the final response's body
// (a body that breaks off makes the attempt a transport failure, which may
// be retried), completes the attempt in the store (spending a retry from
// the budget when the decision is to retry), and either drains the
// response for the next attempt or keeps it as the call's final response.
// done reports that the call is over.
func (s *callState) conclude(at *attempt) (done bool, err error) {
	defer at.end()
	if s.credentialRejected(at) {
		// Repeated at once (admitted by the gate as any send), with no
		// retry spent: the 401 said nothing of the upstream's health.
		d := Decision{Action: ActionRetry, Reason: ReasonCredentialRejected}
		at.rec.Decision = d
		_ = s.complete(at.adm, store.Observation{}, store.ResultNone, false)
		RecordDecision(at.span, d)
		s.r.observer.AttemptDone(at.rec.Status, at.rec.Transport, d)
		_, _ = io.Copy(io.Discard, io.LimitReader(at.resp.Body, s.r.drainLimit))
		_ = at.resp.Body.Close()
		return false, nil
	}
	final := (*FinalResponse)(nil)
	if at.resp != nil && at.a.Decision.Action != ActionRetry {
		final = s.d.final(s, at)
	}
	d := &at.rec.Decision
	*d = at.a.Decision
	if at.rec.Transport == TransportCanceled && s.r.drain.hard.Err() != nil && s.caller.Err() == nil {
		*d = Decision{Action: ActionDoNotRetry, Reason: ReasonShuttingDown} // cut by the drain
	}
	allowed := s.complete(at.adm, at.a.Obs, at.a.Result, d.Action == ActionRetry)
	if !allowed {
		budget := Decision{Action: ActionDoNotRetry, Reason: ReasonRetryBudgetExhausted, Hint: d.Hint, HasHint: d.HasHint, Rule: d.Rule}
		if at.resp != nil && final == nil {
			final = s.d.final(s, at) // a broken body changes nothing now: no retry is left
		}
		*d = budget
	}
	RecordDecision(at.span, *d)
	s.r.observer.AttemptDone(at.rec.Status, at.rec.Transport, *d)
	if at.adm.Probe {
		s.r.observer.Probe(at.a.Result)
	}
	if d.Action == ActionRetry {
		if at.resp != nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(at.resp.Body, s.r.drainLimit))
			_ = at.resp.Body.Close()
		}
		return false, nil
	}
	s.res.Response = final
	s.res.Outcome = outcomeOf(*d)
	if final != nil && final.Incomplete && s.res.Outcome == OutcomeSuccess {
		s.res.Outcome = OutcomeNotRetryable // never report a cut-short body as a success
	}
	if d.HasHint && (d.Reason == ReasonHintExceedsMaxDelay || d.Reason == ReasonDeadlineTooShort ||
		d.Reason == ReasonRetryBudgetExhausted || d.Reason == ReasonShuttingDown) {
		s.res.RetryAfter, s.res.HasRetryAfter = d.Hint, true
	}
	if final != nil {
		s.d.deliver(s, at, final) // a stream's head, then its body; before the span ends
	}
	if at.rec.Transport == TransportCanceled && s.caller.Err() != nil {
		return true, s.caller.Err()
	}
	return true, nil
}

// delivery is how a call hands its final response over. It is chosen
// once, when the call starts (Run: wholeDelivery; Stream: *streamState),
// so that the attempt path asks it rather than checking which kind of call
// it runs.
type delivery interface {
	// attemptParent is the parent of an attempt's context (see
	// callState.attemptContext).
	attemptParent(s *callState) context.Context
	// started is told of each attempt's context as it starts.
	started(ctx context.Context, cancel context.CancelCauseFunc)
	// reservesBodies reports whether the call takes room in the body
	// budget for the bodies it holds (bodybudget.go).
	reservesBodies() bool
	// final returns the final response of at, and deliver hands it over
	// once the attempt is concluded (before its span ends).
	final(s *callState, at *attempt) *FinalResponse
	deliver(s *callState, at *attempt, f *FinalResponse)
	// failed is told why a call ends without a response it could deliver
	// (the attempt record's error: never a secret).
	failed(msg string)
}

// wholeDelivery is Execute's delivery: the final response is read whole
// (readFinal, within the body budget) and returned in the Result.
type wholeDelivery struct{}

// attemptParent: the call's context once it has one (callCtx, made when
// the call first waits), the caller's before.
func (wholeDelivery) attemptParent(s *callState) context.Context {
	if s.ctx != nil {
		return s.ctx
	}
	return s.vctx
}
func (wholeDelivery) started(context.Context, context.CancelCauseFunc) {}
func (wholeDelivery) reservesBodies() bool                             { return true }
func (wholeDelivery) final(s *callState, at *attempt) *FinalResponse   { return s.readFinal(at) }
func (wholeDelivery) deliver(*callState, *attempt, *FinalResponse)     {}
func (wholeDelivery) failed(string)                                    {}

// readFinal reads the final response's body, up to the call's limit, and
// closes it. When the body broke off (reset, short Content-Length, the
// attempt timing out while reading), the attempt becomes a transport
// failure (TransportBodyIncomplete) and is decided again, so it is retried
// where the rules allow; the response keeps what arrived, marked
// incomplete.
func (s *callState) readFinal(at *attempt) *FinalResponse {
	resp := at.resp
	f := &s.finalRoom // a call has one final response; a broken one retried is dropped
	*f = FinalResponse{Status: resp.StatusCode, Header: resp.Header}
	body, err := at.peek, at.peekErr
	if err == nil {
		length := resp.ContentLength
		if resp.Body == http.NoBody {
			length = 0 // a HEAD response: its Content-Length describes no body here
		}
		body, f.Truncated, err = readBody(resp.Body, body, length, s.maxBody) // one buffer
	} else if int64(len(body)) > s.maxBody {
		body, f.Truncated = body[:s.maxBody], true
	}
	f.Body = body
	s.bodyRead(body) // bodybudget.go
	if err == nil && f.Truncated {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, s.r.drainLimit))
	}
	_ = resp.Body.Close()
	if err != nil {
		f.Incomplete = true
		s.transportFailure(at, TransportBodyIncomplete, bodyError{err})
		at.rec.Status = resp.StatusCode // the status did arrive
		at.a = s.r.classifier.assess(s.p, &at.in, s.r.clock.Now(), &at.reading)
	}
	return f
}

// bodyError marks an error met while reading a response body.
type bodyError struct{ err error }

func (e bodyError) Error() string { return "response body ended early: " + e.err.Error() }
func (e bodyError) Unwrap() error { return e.err }

// complete ends an admitted attempt, even when the call's context is
// already done, and reports whether a retry may be spent. A store failure
// (the store's Fallback already serves on local state while Redis is
// unreachable, so this is a fail-closed policy's outage, or a store that is
// closing) is counted (Observer.StoreError) and spends nothing: the retry
// is allowed, and its Admit then fails closed or serves locally by the
// policy, as any Admit does.
//
// An attempt the store did not register, that is no probe, and that has
// nothing to record and no retry to pay for needs no round trip at all.
// It is not inlined: its request to the store would join the frame of
// conclude, which a stream's body runs under (see run on the stack).
//
//go:noinline
func (s *callState) complete(adm store.Admission, obs store.Observation, result store.Result, spend bool) bool {
	p := s.p
	if s.r.store == nil {
		return true
	}
	interesting := adm.Ticket.ID != "" || adm.Probe || spend || !obs.CloseUntil.IsZero() || obs.HasQuota ||
		(result.BreakerFailure() && p.Breaker.Enabled) || (result == store.ResultRefused && p.Learning.Enabled)
	if !interesting {
		return true
	}
	sctx, cancel := s.r.storeContext(context.WithoutCancel(s.vctx))
	defer cancel()
	now, began := s.r.clock.Now(), time.Now()
	out, err := s.r.store.Complete(sctx, store.CompleteRequest{
		Gate: s.gate, Ticket: adm.Ticket, Obs: obs, Result: result, SpendRetry: spend, Budget: p.Budget,
		Learning: p.Learning, Breaker: p.Breaker, MaxGate: p.MaxGate, FailClosed: p.FailClosed, Now: now,
	})
	s.r.observer.StoreRoundTrip("complete", time.Since(began), err != nil)
	s.r.events.signal(s.gate)
	if err != nil {
		s.r.observer.StoreError("complete")
		return true
	}
	if out.BreakerChange != store.BreakerUnchanged {
		s.r.observer.BreakerChange(out.BreakerChange)
	}
	if src, hold, ok := gateClosure(obs, out.GateClosedUntil, now); ok {
		s.r.observer.GateClosed(src, hold)
	}
	return out.RetryAllowed || !spend
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
	case ReasonBreakerOpen:
		return OutcomeBreakerOpen
	case ReasonCanceled:
		return OutcomeCanceled
	case ReasonShuttingDown:
		return OutcomeShuttingDown
	case ReasonCredentialsUnavailable:
		return OutcomeCredentialsUnavailable
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
		msg = strings.ReplaceAll(msg, u.RawQuery, "REDACTED")
	}
	return msg
}
