package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/internal/store"
)

// brk is the breaker of the suite's breaker tests: it opens once at least 4
// calls in 10 s failed at half or more, for 1 s, doubling up to 4 s.
var brk = store.BreakerConfig{
	Enabled: true, MinCalls: 4, FailureRatio: 0.5, Window: 10 * time.Second,
	OpenFor: time.Second, MaxOpen: 4 * time.Second,
}

func breq(g store.GateKey, now time.Time) store.AdmitRequest {
	return store.AdmitRequest{Gate: g, Breaker: brk, Now: now}
}

// bpass admits an attempt on g with the breaker on and checks that it went
// as an ordinary call (no probe).
func bpass(t *testing.T, s store.Store, g store.GateKey, now time.Time) store.Ticket {
	t.Helper()
	a := admit(t, s, breq(g, now))
	if !a.Admitted() || a.Probe || !a.BreakerOpenUntil.IsZero() {
		t.Fatalf("Admit at %s with the breaker closed = %+v, want admitted, no probe", fmtTime(now), a)
	}
	return a.Ticket
}

func bcomplete(t *testing.T, s store.Store, g store.GateKey, tk store.Ticket, result store.Result, now time.Time) store.CompleteResult {
	t.Helper()
	return complete(t, s, store.CompleteRequest{Gate: g, Ticket: tk, Result: result, Breaker: brk, Now: now})
}

func bobserve(t *testing.T, s store.Store, g store.GateKey, result store.Result, now time.Time) store.GateStatus {
	t.Helper()
	st, err := s.Observe(ctxT(t), store.ObserveRequest{Gate: g, Result: result, Breaker: brk, Now: now})
	if err != nil {
		t.Fatalf("Observe: %v", err)
	}
	return st
}

// mustBreakerOpen checks that Admit answers BreakerOpenUntil = until and
// nothing else, and that GateState reports the same.
func mustBreakerOpen(t *testing.T, s store.Store, g store.GateKey, now, until time.Time) {
	t.Helper()
	a := admit(t, s, breq(g, now))
	if a.Admitted() || a.Held || a.Probe || a.PaceDenied || a.PaceWait != 0 || a.Ticket.ID != "" || !a.GateClosedUntil.IsZero() {
		t.Fatalf("Admit at %s on an open breaker = %+v, want only BreakerOpenUntil", fmtTime(now), a)
	}
	wantTime(t, "Admission.BreakerOpenUntil", a.BreakerOpenUntil, until)
	st, err := s.GateState(ctxT(t), g, now)
	if err != nil {
		t.Fatal(err)
	}
	wantTime(t, "GateState.BreakerOpenUntil", st.BreakerOpenUntil, until)
	wantTime(t, "GateState.ClosedUntil", st.ClosedUntil, time.Time{})
}

// tripBreaker opens g's breaker at now: 4 calls, 2 of them failed. It
// returns when the breaker opened (the second failure's time).
func tripBreaker(t *testing.T, s store.Store, g store.GateKey, now time.Time) time.Time {
	t.Helper()
	var tickets []store.Ticket
	for i := range 4 {
		tickets = append(tickets, bpass(t, s, g, now.Add(ms(i))))
	}
	if r := bcomplete(t, s, g, tickets[0], store.ResultFailed, now.Add(ms(10))); !r.BreakerOpenUntil.IsZero() || r.BreakerChange != store.BreakerUnchanged {
		t.Fatalf("1 failure in 4 calls opened the breaker: %+v", r)
	}
	at := now.Add(ms(11))
	r := bcomplete(t, s, g, tickets[1], store.ResultFailed, at)
	wantTime(t, "2 failures in 4 calls: BreakerOpenUntil", r.BreakerOpenUntil, at.Add(brk.OpenFor))
	if r.BreakerChange != store.BreakerOpened {
		t.Fatalf("the failure that opened the breaker reported change %q, want opened", r.BreakerChange)
	}
	wantTime(t, "2 failures in 4 calls: GateClosedUntil", r.GateClosedUntil, time.Time{})
	return at
}

// testBreakerUnderMinCalls: fewer calls than MinCalls never open the
// breaker, whatever failed; calls leave the window as it slides.
func testBreakerUnderMinCalls(t *testing.T, s store.Store) {
	var tickets []store.Ticket
	for i := range 3 {
		tickets = append(tickets, bpass(t, s, gh, T0.Add(ms(i))))
	}
	for i, tk := range tickets {
		if r := bcomplete(t, s, gh, tk, store.ResultFailed, T0.Add(ms(10+i))); !r.BreakerOpenUntil.IsZero() {
			t.Fatalf("failure %d of 3 calls opened the breaker: %+v", i+1, r)
		}
	}
	bpass(t, s, gh, T0.Add(ms(20)))
	// 4 calls at T0, failures 10 s later: the calls left the window.
	g := store.GateKey{Tenant: "acme", Scope: "slides"}
	tickets = tickets[:0]
	for range 4 {
		tickets = append(tickets, bpass(t, s, g, T0))
	}
	for i, tk := range tickets {
		if r := bcomplete(t, s, g, tk, store.ResultFailed, T0.Add(10*time.Second)); !r.BreakerOpenUntil.IsZero() {
			t.Fatalf("failure %d, with the calls out of the window, opened the breaker: %+v", i+1, r)
		}
	}
	bpass(t, s, g, T0.Add(10*time.Second))
}

// testBreakerOpensAtRatio: at MinCalls or more, the breaker opens when the
// failures reach FailureRatio of the calls; while open, Admit answers
// BreakerOpenUntil and reserves, counts and registers nothing.
func testBreakerOpensAtRatio(t *testing.T, s store.Store) {
	var tickets []store.Ticket
	for i := range 5 {
		tickets = append(tickets, bpass(t, s, gh, T0.Add(ms(i))))
	}
	for i := range 2 {
		if r := bcomplete(t, s, gh, tickets[i], store.ResultFailed, T0.Add(ms(10+i))); !r.BreakerOpenUntil.IsZero() {
			t.Fatalf("%d failures in 5 calls opened the breaker", i+1)
		}
	}
	// Accepted results and results of nothing sent change nothing.
	bcomplete(t, s, gh, tickets[2], store.ResultAccepted, T0.Add(ms(12)))
	bcomplete(t, s, gh, tickets[3], store.ResultNone, T0.Add(ms(13)))
	at := T0.Add(ms(14))
	r := bcomplete(t, s, gh, tickets[4], store.ResultFailed, at) // 3 in 5
	until := at.Add(brk.OpenFor)
	wantTime(t, "3 failures in 5 calls: BreakerOpenUntil", r.BreakerOpenUntil, until)
	mustBreakerOpen(t, s, gh, at.Add(ms(500)), until)

	budget := store.BudgetConfig{Ratio: 1, Window: 10 * time.Second}
	pace := store.PaceConfig{Rate: 1, Burst: 1}
	for range 3 {
		a := admit(t, s, store.AdmitRequest{Gate: gh, Breaker: brk, PaceHost: "h", Pace: pace, FirstAttempt: true, Budget: budget, Now: at.Add(ms(600))})
		wantTime(t, "Admit on the open breaker", a.BreakerOpenUntil, until)
	}
	if complete(t, s, store.CompleteRequest{Gate: gh, SpendRetry: true, Budget: budget, Now: at.Add(ms(700))}).RetryAllowed {
		t.Fatal("Admits refused by the breaker were counted as requests")
	}
	if a := admit(t, s, store.AdmitRequest{Gate: store.GateKey{Tenant: gh.Tenant, Scope: "x"}, PaceHost: "h", Pace: pace, Now: at.Add(ms(800))}); !a.Admitted() || a.PaceWait != 0 {
		t.Fatalf("Admits refused by the breaker reserved pacing: %+v", a)
	}
	// The gate's hint and the breaker are reported apart.
	r = complete(t, s, store.CompleteRequest{Gate: gh, Result: store.ResultRefused, Breaker: brk, Obs: store.Observation{CloseUntil: at.Add(ms(900))}, Now: at.Add(ms(850))})
	wantTime(t, "GateClosedUntil", r.GateClosedUntil, at.Add(ms(900)))
	wantTime(t, "BreakerOpenUntil", r.BreakerOpenUntil, until)
	wantTime(t, "Admit on a closed gate with an open breaker", admit(t, s, breq(gh, at.Add(ms(860)))).GateClosedUntil, at.Add(ms(900)))

	// Exactly at the ratio: 2 failures in 4 calls open it.
	tripBreaker(t, s, other, T0)
}

// testBreakerHalfOpenCloses: after the open time the breaker is half open:
// one probe goes, the others are held; the probe's success (or a refusal:
// the destination answered) closes the breaker and clears its counts.
func testBreakerHalfOpenCloses(t *testing.T, s store.Store) {
	at := tripBreaker(t, s, gh, T0)
	half := at.Add(brk.OpenFor)
	mustBreakerOpen(t, s, gh, half.Add(-time.Microsecond), half)
	probe := mustProbe(t, s, breq(gh, half))
	if probe.Epoch != 0 {
		t.Fatalf("breaker probe without learning in epoch %d", probe.Epoch)
	}
	mustHold(t, s, breq(gh, half.Add(ms(1))), heldPoll)
	st, err := s.GateState(ctxT(t), gh, half.Add(ms(2)))
	if err != nil || !st.Open() {
		t.Fatalf("GateState while half open = %+v, %v; want open (the probe decides)", st, err)
	}
	r := bcomplete(t, s, gh, probe, store.ResultAccepted, half.Add(ms(10)))
	if !r.BreakerOpenUntil.IsZero() || !r.GateClosedUntil.IsZero() {
		t.Fatalf("accepted probe: %+v, want the breaker closed", r)
	}
	// Closed, with its counts cleared: 3 new calls and 2 failures stay
	// under MinCalls (with the old counts, 8 calls and 4 failures, they
	// would open it).
	var tickets []store.Ticket
	for i := range 3 {
		tickets = append(tickets, bpass(t, s, gh, half.Add(ms(20+i))))
	}
	for i := range 2 {
		if r := bcomplete(t, s, gh, tickets[i], store.ResultFailed, half.Add(ms(30+i))); !r.BreakerOpenUntil.IsZero() {
			t.Fatalf("failure %d after closing opened the breaker: its counts were not cleared", i+1)
		}
	}

	// A refused probe closes the breaker too; the refusal's hint closes the gate.
	at = tripBreaker(t, s, other, T0)
	half = at.Add(brk.OpenFor)
	probe = mustProbe(t, s, breq(other, half))
	until := half.Add(time.Minute)
	r = complete(t, s, store.CompleteRequest{Gate: other, Ticket: probe, Result: store.ResultRefused, Breaker: brk, Obs: store.Observation{CloseUntil: until}, Now: half.Add(ms(1))})
	wantTime(t, "refused probe: GateClosedUntil", r.GateClosedUntil, until)
	wantTime(t, "refused probe: BreakerOpenUntil", r.BreakerOpenUntil, time.Time{})
	bpass(t, s, other, until)
}

// testBreakerDoubling: each failed probe opens the breaker again for twice
// as long, up to MaxOpen; a success resets the doubling. The open time is
// bounded by MaxGate.
func testBreakerDoubling(t *testing.T, s store.Store) {
	at := tripBreaker(t, s, gh, T0)
	now := at.Add(brk.OpenFor)
	for i, want := range []time.Duration{2 * time.Second, 4 * time.Second, 4 * time.Second, 4 * time.Second} {
		probe := mustProbe(t, s, breq(gh, now))
		r := bcomplete(t, s, gh, probe, store.ResultFailed, now.Add(ms(5)))
		until := now.Add(ms(5)).Add(want)
		wantTime(t, "failed probe: BreakerOpenUntil", r.BreakerOpenUntil, until)
		if r.BreakerChange != store.BreakerReopened {
			t.Fatalf("failed probe %d reported change %q, want reopened", i+1, r.BreakerChange)
		}
		mustBreakerOpen(t, s, gh, until.Add(-time.Microsecond), until)
		if i == 0 {
			mustBreakerOpen(t, s, gh, now.Add(time.Second), until)
		}
		now = until
	}
	probe := mustProbe(t, s, breq(gh, now))
	if r := bcomplete(t, s, gh, probe, store.ResultAccepted, now.Add(ms(1))); !r.BreakerOpenUntil.IsZero() || r.BreakerChange != store.BreakerClosed {
		t.Fatalf("accepted probe: %+v, want the breaker closed (change closed)", r)
	}
	// Closed: the next time it opens for OpenFor again.
	at = tripBreaker(t, s, gh, now.Add(ms(10)))
	mustBreakerOpen(t, s, gh, at, at.Add(brk.OpenFor))

	// MaxGate bounds the open time like a gate's.
	long := brk
	long.OpenFor, long.MaxOpen = time.Hour, 10*time.Hour
	g := store.GateKey{Tenant: "acme", Scope: "long"}
	var tickets []store.Ticket
	for range 4 {
		a := admit(t, s, store.AdmitRequest{Gate: g, Breaker: long, Now: T0})
		tickets = append(tickets, a.Ticket)
	}
	var r store.CompleteResult
	for _, tk := range tickets {
		r = complete(t, s, store.CompleteRequest{Gate: g, Ticket: tk, Result: store.ResultFailed, Breaker: long, MaxGate: 10 * time.Second, Now: T0})
	}
	wantTime(t, "BreakerOpenUntil bounded by MaxGate", r.BreakerOpenUntil, T0.Add(10*time.Second))
}

// testBreakerSingleProbe: while half open, concurrent Admits let exactly one
// probe go; a probe not sent frees the slot (the breaker stays half open);
// so does a probe whose registration expired.
func testBreakerSingleProbe(t *testing.T, s store.Store) {
	half := tripBreaker(t, s, gh, T0).Add(brk.OpenFor)
	const workers = 16
	var mu sync.Mutex
	var probes, held int
	var probe store.Ticket
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			a, err := s.Admit(context.Background(), breq(gh, half))
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case a.Held:
				held++
			case a.Admitted() && a.Probe && a.Ticket.ID != "":
				probes++
				probe = a.Ticket
			default:
				t.Errorf("Admit on a half-open breaker = %+v", a)
			}
		})
	}
	wg.Wait()
	if probes != 1 || held != workers-1 {
		t.Fatalf("%d probes, %d held; want 1 and %d", probes, held, workers-1)
	}
	if r := bcomplete(t, s, gh, probe, store.ResultNone, half.Add(ms(1))); !r.BreakerOpenUntil.IsZero() {
		t.Fatalf("probe not sent: %+v, want still half open", r)
	}
	p2 := mustProbe(t, s, breq(gh, half.Add(ms(2))))
	mustHold(t, s, breq(gh, half.Add(ms(3))), heldPoll)
	expires := half.Add(ms(2)).Add(store.DefaultTicketTTL)
	mustHold(t, s, breq(gh, expires.Add(-ms(30))), ms(30))
	p3 := mustProbe(t, s, breq(gh, expires))
	if p3.ID == p2.ID {
		t.Fatal("the expired probe's ticket was issued again")
	}
}

// testBreakerObserve: Observe feeds the breaker (ClassifyResponse callers
// are not admitted: each answer counts as a call, a failure as a failure),
// and, while the breaker is half open, decides it like a probe.
func testBreakerObserve(t *testing.T, s store.Store) {
	for i := range 3 {
		if st := bobserve(t, s, gh, store.ResultFailed, T0.Add(ms(i))); !st.Open() {
			t.Fatalf("Observe failure %d of 3 calls: %+v", i+1, st)
		}
	}
	at := T0.Add(ms(3))
	st := bobserve(t, s, gh, store.ResultFailed, at)
	wantTime(t, "4 observed failures: BreakerOpenUntil", st.BreakerOpenUntil, at.Add(brk.OpenFor))
	mustBreakerOpen(t, s, gh, at.Add(ms(1)), at.Add(brk.OpenFor))
	// While open, an observed success changes nothing.
	wantTime(t, "Observe accepted while open", bobserve(t, s, gh, store.ResultAccepted, at.Add(ms(2))).BreakerOpenUntil, at.Add(brk.OpenFor))
	// Half open: an observed failure opens it for twice as long, an
	// observed success (or refusal) closes it.
	half := at.Add(brk.OpenFor)
	wantTime(t, "Observe failed while half open", bobserve(t, s, gh, store.ResultFailed, half).BreakerOpenUntil, half.Add(2*time.Second))
	half = half.Add(2 * time.Second)
	if st := bobserve(t, s, gh, store.ResultAccepted, half); !st.Open() {
		t.Fatalf("Observe accepted while half open: %+v, want closed", st)
	}
	bpass(t, s, gh, half.Add(ms(1)))

	// Observed successes count as calls: after 6 successes, 5 failures stay
	// below the ratio; the 6th (6 in 12) opens it. None counts nothing.
	for i := range 6 {
		bobserve(t, s, other, store.ResultAccepted, T0.Add(ms(i)))
	}
	for i := range 10 {
		bobserve(t, s, other, store.ResultNone, T0.Add(ms(5)))
		if i < 5 {
			if st := bobserve(t, s, other, store.ResultFailed, T0.Add(ms(10+i))); !st.Open() {
				t.Fatalf("observed failure %d after 6 successes opened the breaker", i+1)
			}
		}
	}
	st = bobserve(t, s, other, store.ResultFailed, T0.Add(ms(20)))
	wantTime(t, "6 failures in 12 observed calls", st.BreakerOpenUntil, T0.Add(ms(20)).Add(brk.OpenFor))

	// A refusal observed while half open closes it.
	g := store.GateKey{Tenant: "acme", Scope: "refused"}
	for range 4 {
		bobserve(t, s, g, store.ResultFailed, T0)
	}
	until := T0.Add(brk.OpenFor).Add(time.Second)
	st, err := s.Observe(ctxT(t), store.ObserveRequest{Gate: g, Result: store.ResultRefused, Breaker: brk, Obs: store.Observation{CloseUntil: until}, Now: T0.Add(brk.OpenFor)})
	if err != nil {
		t.Fatal(err)
	}
	wantTime(t, "observed refusal while half open: BreakerOpenUntil", st.BreakerOpenUntil, time.Time{})
	wantTime(t, "observed refusal while half open: ClosedUntil", st.ClosedUntil, until)
}

// testBreakerOff: requests with the breaker off neither feed it nor wait on
// it (another policy on the same gate may have it on).
func testBreakerOff(t *testing.T, s store.Store) {
	for i := range 10 {
		a := mustNotRegister(t, s, store.AdmitRequest{Gate: gh, Now: T0.Add(ms(i))})
		if r := complete(t, s, store.CompleteRequest{Gate: gh, Ticket: a.Ticket, Result: store.ResultFailed, Now: T0.Add(ms(i))}); !r.BreakerOpenUntil.IsZero() {
			t.Fatalf("failure %d with the breaker off opened it", i+1)
		}
		if st, err := s.Observe(ctxT(t), store.ObserveRequest{Gate: gh, Result: store.ResultFailed, Now: T0.Add(ms(i))}); err != nil || !st.Open() {
			t.Fatalf("observed failure %d with the breaker off: %+v, %v", i+1, st, err)
		}
	}
	bpass(t, s, gh, T0.Add(ms(20)))
	at := tripBreaker(t, s, other, T0)
	mustBreakerOpen(t, s, other, at, at.Add(brk.OpenFor))
	a := mustNotRegister(t, s, store.AdmitRequest{Gate: other, Now: at})
	if a.Probe || a.Held {
		t.Fatalf("Admit with the breaker off on an open breaker = %+v", a)
	}
}

// testProbeShared: when a half-open breaker and a learning gate both want
// a probe, one call probes for both, and its success closes the breaker
// and raises L.
func testProbeShared(t *testing.T, s store.Store) {
	_, reopen := learnQuota(t, s, gh, T0, 3, 1) // L = 2
	both := brk
	both.MinCalls = 2
	req := func(now time.Time) store.AdmitRequest {
		return store.AdmitRequest{Gate: gh, Learning: learnOn, Breaker: both, Now: now}
	}
	var tickets []store.Ticket
	for i := range 2 {
		a := admit(t, s, req(reopen.Add(ms(i))))
		if !a.Admitted() || a.Probe {
			t.Fatalf("Admit %d within L = %+v", i+1, a)
		}
		tickets = append(tickets, a.Ticket)
	}
	var r store.CompleteResult
	for _, tk := range tickets {
		r = complete(t, s, store.CompleteRequest{Gate: gh, Ticket: tk, Result: store.ResultFailed, Learning: learnOn, Breaker: both, Now: reopen.Add(ms(5))})
	}
	half := reopen.Add(ms(5)).Add(both.OpenFor)
	wantTime(t, "2 failures in 2 calls", r.BreakerOpenUntil, half)
	// Half open, and L (2) used: one probe, for both.
	probe := mustProbe(t, s, req(half))
	mustHold(t, s, req(half.Add(ms(1))), heldPoll)
	r = complete(t, s, store.CompleteRequest{Gate: gh, Ticket: probe, Result: store.ResultAccepted, Learning: learnOn, Breaker: both, Now: half.Add(ms(2))})
	if !r.BreakerOpenUntil.IsZero() {
		t.Fatalf("accepted shared probe: %+v, want the breaker closed", r)
	}
	// The breaker closed; L is 3 and the epoch admitted 3: the next call
	// probes again (for learning only), then the others are held.
	mustProbe(t, s, req(half.Add(ms(3))))
	mustHold(t, s, req(half.Add(ms(4))), heldPoll)
}
