package storetest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/internal/store"
)

// quota returns an observation of a provider's quota.
func quota(remaining int64, reset time.Time) store.Observation {
	return store.Observation{HasQuota: true, Remaining: remaining, Reset: reset}
}

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// mustRefuse checks that Admit refuses the attempt because the gate is
// closed until want, without registering or reserving anything.
func mustRefuse(t *testing.T, s store.Store, req store.AdmitRequest, want time.Time) {
	t.Helper()
	a := admit(t, s, req)
	if a.Admitted() || a.PaceDenied || a.PaceWait != 0 {
		t.Fatalf("Admit at %s = %+v, want refused by the gate only", fmtTime(req.Now), a)
	}
	wantTime(t, fmt.Sprintf("Admit at %s: GateClosedUntil", fmtTime(req.Now)), a.GateClosedUntil, want)
}

func refuseAt(t *testing.T, s store.Store, g store.GateKey, now, want time.Time) {
	t.Helper()
	mustRefuse(t, s, store.AdmitRequest{Gate: g, Now: now}, want)
}

// testQuotaAdmitsUpToRemaining: a known remaining count of 3 with nothing in
// flight admits exactly 3 attempts; the 4th finds the gate closed until the
// reset, and reserves, counts and registers nothing.
func testQuotaAdmitsUpToRemaining(t *testing.T, s store.Store) {
	reset := T0.Add(time.Minute)
	wantTime(t, "Observe remaining 3, none in flight", observe(t, s, gh, quota(3, reset), T0), time.Time{})
	var tickets []store.Ticket
	for i := range 3 {
		tickets = append(tickets, mustAdmit(t, s, gh, T0.Add(ms(i+1))))
	}
	budget := store.BudgetConfig{Ratio: 1, Window: 10 * time.Second}
	pace := store.PaceConfig{Rate: 1.0 / 60, Burst: 1} // one a minute
	req := store.AdmitRequest{Gate: gh, PaceHost: "h", Pace: pace, PaceMaxWait: time.Hour, FirstAttempt: true, Budget: budget, Now: T0.Add(ms(10))}
	for range 3 {
		mustRefuse(t, s, req, reset)
	}
	wantTime(t, "GateState", gateState(t, s, gh, T0.Add(ms(10))), reset)

	// One response reports 2 left: the 2 others in flight use them.
	r := complete(t, s, store.CompleteRequest{Gate: gh, Ticket: tickets[0], Obs: quota(2, reset), Now: T0.Add(ms(20))})
	wantTime(t, "Complete with remaining 2, 2 others in flight", r.GateClosedUntil, reset)
	refuseAt(t, s, gh, T0.Add(ms(21)), reset)
	// A call that then fails in transit gives its share back: exactly one
	// more attempt may go. (Had the failed call used quota, that attempt is
	// the single refusal per window the design allows; the close is not
	// sticky, because registered calls may already have been served.)
	r = complete(t, s, store.CompleteRequest{Gate: gh, Ticket: tickets[1], Now: T0.Add(ms(22))})
	wantTime(t, "Complete without a response", r.GateClosedUntil, time.Time{})
	mustAdmit(t, s, gh, T0.Add(ms(23)))
	refuseAt(t, s, gh, T0.Add(ms(24)), reset)
	wantTime(t, "GateState just before the reset", gateState(t, s, gh, reset.Add(-time.Microsecond)), reset)

	// The refusals counted no request for the budget.
	if complete(t, s, store.CompleteRequest{Gate: gh, SpendRetry: true, Budget: budget, Now: T0.Add(ms(30))}).RetryAllowed {
		t.Fatal("Admits refused by the known quota were counted as requests")
	}

	// At the reset the known quota is stale: admitted freely, and the
	// refusals reserved no pacing slot.
	wantTime(t, "GateState at the reset", gateState(t, s, gh, reset), time.Time{})
	req.Now = reset
	if a := admit(t, s, req); !a.Admitted() || a.PaceWait != 0 {
		t.Fatalf("first Admit at the reset = %+v, want admitted at once", a)
	}
	for i := range 5 {
		mustAdmit(t, s, gh, reset.Add(ms(i)))
	}
}

// testQuotaCountsInFlight: each call in flight holds one unit of the known
// remaining count; a call completed without a response gives it back.
func testQuotaCountsInFlight(t *testing.T, s store.Store) {
	reset := T0.Add(time.Minute)
	observe(t, s, gh, quota(2, reset), T0)
	t1 := mustAdmit(t, s, gh, T0)
	t2 := mustAdmit(t, s, gh, T0)
	refuseAt(t, s, gh, T0, reset)

	// t1 was not sent: its share comes back.
	r := complete(t, s, store.CompleteRequest{Gate: gh, Ticket: t1, Now: T0.Add(ms(1))})
	wantTime(t, "Complete without a response", r.GateClosedUntil, time.Time{})
	wantTime(t, "GateState", gateState(t, s, gh, T0.Add(ms(1))), time.Time{})
	t3 := mustAdmit(t, s, gh, T0.Add(ms(2)))
	refuseAt(t, s, gh, T0.Add(ms(3)), reset)

	// Expired tickets no longer count.
	expired := T0.Add(store.DefaultTicketTTL + ms(10))
	later := expired.Add(time.Minute)
	observe(t, s, gh, quota(2, later), expired)
	mustAdmit(t, s, gh, expired)
	mustAdmit(t, s, gh, expired)
	refuseAt(t, s, gh, expired, later)

	// Completing old tickets late is harmless.
	complete(t, s, store.CompleteRequest{Gate: gh, Ticket: t2, Now: expired})
	complete(t, s, store.CompleteRequest{Gate: gh, Ticket: t3, Now: expired})
	refuseAt(t, s, gh, expired.Add(ms(1)), later)

	// A remaining count of 0 with nothing in flight refuses everything.
	g := store.GateKey{Tenant: "acme", Scope: "zero"}
	wantTime(t, "Observe remaining 0", observe(t, s, g, quota(0, reset), T0), reset)
	refuseAt(t, s, g, T0.Add(time.Second), reset)
}

// testQuotaOutOfOrder: within a window the smallest remaining count wins and
// the later reset; a later window replaces; an older one changes nothing.
func testQuotaOutOfOrder(t *testing.T, s store.Store) {
	reset := T0.Add(time.Minute)
	rounded := reset.Add(500 * time.Millisecond) // the same window, rounded otherwise
	wantTime(t, "remaining 5", observe(t, s, gh, quota(5, reset), T0), time.Time{})
	wantTime(t, "remaining 2", observe(t, s, gh, quota(2, rounded), T0.Add(ms(1))), time.Time{})
	wantTime(t, "late remaining 4", observe(t, s, gh, quota(4, reset), T0.Add(ms(2))), time.Time{})
	mustAdmit(t, s, gh, T0.Add(ms(3)))
	mustAdmit(t, s, gh, T0.Add(ms(3)))
	refuseAt(t, s, gh, T0.Add(ms(3)), rounded)

	// A later window (the provider's clock runs ahead) replaces the count:
	// 10 left, 2 of them held by the calls in flight.
	next := reset.Add(time.Hour)
	wantTime(t, "next window, remaining 10", observe(t, s, gh, quota(10, next), T0.Add(ms(4))), time.Time{})
	for range 8 {
		mustAdmit(t, s, gh, T0.Add(ms(5)))
	}
	refuseAt(t, s, gh, T0.Add(ms(5)), next)

	// A response from an older window, still in the future (another quota
	// on the same gate, or a slow response), changes nothing.
	g := store.GateKey{Tenant: "acme", Scope: "search"}
	observe(t, s, g, quota(4, T0.Add(time.Hour)), T0)
	wantTime(t, "older window, remaining 1", observe(t, s, g, quota(1, T0.Add(time.Minute)), T0), time.Time{})
	for range 4 {
		mustAdmit(t, s, g, T0.Add(ms(1)))
	}
	refuseAt(t, s, g, T0.Add(ms(1)), T0.Add(time.Hour))

	// Window identity stays with the first reset seen: resets drifting
	// forward (a rolling window) start a new window once past the tolerance,
	// even though each is within the tolerance of the previous one.
	d := store.GateKey{Tenant: "acme", Scope: "rolling"}
	first := T0.Add(10 * time.Second)
	tol := store.QuotaWindowTolerance
	observe(t, s, d, quota(5, first), T0)
	observe(t, s, d, quota(3, first.Add(tol*8/10)), T0.Add(ms(1)))
	drift := first.Add(tol * 16 / 10)
	observe(t, s, d, quota(9, drift), T0.Add(ms(2)))
	for range 9 {
		mustAdmit(t, s, d, T0.Add(ms(3)))
	}
	refuseAt(t, s, d, T0.Add(ms(3)), drift)

	// Exactly at the tolerance is still the same window.
	e := store.GateKey{Tenant: "acme", Scope: "edge"}
	observe(t, s, e, quota(5, first), T0)
	observe(t, s, e, quota(1, first.Add(tol)), T0)
	mustAdmit(t, s, e, T0)
	refuseAt(t, s, e, T0, first.Add(tol))
}

// testQuotaPastResetClears: a response saying the window already reset
// clears the known quota; one from an older window does not.
func testQuotaPastResetClears(t *testing.T, s store.Store) {
	reset := T0.Add(10 * time.Second)
	observe(t, s, gh, quota(2, reset), T0)
	mustAdmit(t, s, gh, T0)
	mustAdmit(t, s, gh, T0)
	now := T0.Add(9500 * time.Millisecond)
	refuseAt(t, s, gh, now, reset)
	// The provider rounds its reset down: for it, the window already reset.
	wantTime(t, "Observe with a passed reset", observe(t, s, gh, quota(0, T0.Add(9*time.Second)), now), time.Time{})
	wantTime(t, "GateState", gateState(t, s, gh, now), time.Time{})
	for range 5 {
		mustAdmit(t, s, gh, now)
	}

	// A slow response from the previous window, whose reset passed, does
	// not clear the current window's quota.
	g := store.GateKey{Tenant: "acme", Scope: "late"}
	start := T0.Add(time.Minute)
	next := start.Add(time.Minute)
	observe(t, s, g, quota(1, next), start.Add(time.Second))
	mustAdmit(t, s, g, start.Add(time.Second))
	refuseAt(t, s, g, start.Add(time.Second), next)
	wantTime(t, "late response from the previous window", observe(t, s, g, quota(50, start), start.Add(2*time.Second)), next)
	refuseAt(t, s, g, start.Add(2*time.Second), next)

	// Observations without a usable quota change nothing.
	observe(t, s, g, store.Observation{HasQuota: true, Remaining: 100}, start.Add(3*time.Second))
	observe(t, s, g, store.Observation{Remaining: 100, Reset: next.Add(time.Hour)}, start.Add(3*time.Second))
	refuseAt(t, s, g, start.Add(3*time.Second), next)
}

// testQuotaIsolation: known quotas belong to one (tenant, scope,
// credential) gate.
func testQuotaIsolation(t *testing.T, s store.Store) {
	reset := T0.Add(time.Minute)
	observe(t, s, gh, quota(1, reset), T0)
	mustAdmit(t, s, gh, T0)
	refuseAt(t, s, gh, T0, reset)
	for _, g := range []store.GateKey{
		other, // same scope, other tenant
		{Tenant: "acme", Scope: "github", Credential: "aa11"},
		{Tenant: "acme", Scope: "gitlab"},
	} {
		for range 3 {
			mustAdmit(t, s, g, T0)
		}
		// Their quotas do not reach gh either.
		observe(t, s, g, quota(100, reset.Add(time.Hour)), T0)
		refuseAt(t, s, gh, T0, reset)
	}

	// Keys that a naive join would confuse.
	pairs := [][2]store.GateKey{
		{{Tenant: "a:b", Scope: "c"}, {Tenant: "a", Scope: "b:c"}},
		{{Tenant: "t", Scope: "s:x"}, {Tenant: "t", Scope: "s", Credential: "x"}},
		{{Tenant: "t", Scope: "s", Credential: "x:y"}, {Tenant: "t", Scope: "s:x", Credential: "y"}},
	}
	for i, p := range pairs {
		observe(t, s, p[0], quota(1, reset), T0)
		mustAdmit(t, s, p[0], T0)
		refuseAt(t, s, p[0], T0, reset)
		for range 3 {
			if a := admit(t, s, store.AdmitRequest{Gate: p[1], Now: T0}); !a.Admitted() {
				t.Fatalf("pair %d: %+v refused (%+v) by the quota of %+v", i, p[1], a, p[0])
			}
		}
	}
}

// provider simulates an upstream with a quota per window: it refuses calls
// beyond the quota and reports what is left.
type provider struct {
	mu                sync.Mutex
	left              int64
	accepted, refused int64
	admitted, notSent int64
}

// send sends one admitted attempt (or, when skipped, drops it unsent) and
// returns what the response says.
func (p *provider) send(skipped bool, reset time.Time) store.Observation {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.admitted++
	if skipped {
		p.notSent++
		return store.Observation{}
	}
	if p.left <= 0 {
		p.refused++
		obs := quota(0, reset)
		obs.CloseUntil = reset // a 429 with Retry-After
		return obs
	}
	p.left--
	p.accepted++
	return quota(p.left, reset)
}

// simWindow is one quota window of testQuotaConcurrentWindow.
type simWindow struct {
	s            store.Store
	g            store.GateKey
	reset        time.Time
	now          func() time.Time
	p            *provider
	skip         bool  // every fifth admitted attempt of a worker is not sent
	sent         []int // per worker: attempts admitted so far
	errs         chan error
	workers      int
	batch        int
	unregistered atomic.Int64 // attempts admitted with an empty ticket
	completes    atomic.Int64 // Complete calls made
}

// admitBatch admits up to w.batch attempts for worker i; refused reports
// that the gate refused one.
func (w *simWindow) admitBatch(i int) (tickets []store.Ticket, refused bool) {
	for range w.batch {
		a, err := w.s.Admit(context.Background(), store.AdmitRequest{Gate: w.g, Now: w.now()})
		if err != nil {
			w.errs <- fmt.Errorf("worker %d: Admit: %w", i, err)
			return tickets, true
		}
		if !a.Admitted() {
			if !a.GateClosedUntil.Equal(w.reset) || a.PaceDenied {
				w.errs <- fmt.Errorf("worker %d: Admit = %+v, want the gate closed until %s", i, a, fmtTime(w.reset))
			}
			return tickets, true
		}
		if a.Ticket.ID == "" {
			w.unregistered.Add(1)
		}
		tickets = append(tickets, a.Ticket)
	}
	return tickets, false
}

// sendAndComplete sends worker i's attempts in order and completes them in
// reverse order, so that responses arrive out of order. Like the engine, it
// skips Complete for an attempt with an empty ticket and nothing to observe.
func (w *simWindow) sendAndComplete(i int, tickets []store.Ticket) {
	obs := make([]store.Observation, len(tickets))
	for k := range tickets {
		w.sent[i]++
		obs[k] = w.p.send(w.skip && w.sent[i]%5 == 0, w.reset)
	}
	for k := len(tickets) - 1; k >= 0; k-- {
		if tickets[k].ID == "" && obs[k] == (store.Observation{}) {
			continue
		}
		w.completes.Add(1)
		if _, err := w.s.Complete(context.Background(), store.CompleteRequest{Gate: w.g, Ticket: tickets[k], Obs: obs[k], Now: w.now()}); err != nil {
			w.errs <- fmt.Errorf("worker %d: Complete: %w", i, err)
			return
		}
	}
}

// runFree lets each worker admit, send and complete batches on its own
// until the gate refuses it.
func (w *simWindow) runFree() {
	var wg sync.WaitGroup
	for i := range w.workers {
		wg.Go(func() {
			for {
				tickets, refused := w.admitBatch(i)
				w.sendAndComplete(i, tickets)
				if refused {
					return
				}
			}
		})
	}
	wg.Wait()
}

// runPhased alternates rounds where every worker admits a batch at once,
// then every worker sends and completes: many Admits meet between two
// responses. It stops after a round admitted nothing.
func (w *simWindow) runPhased() {
	for {
		tickets := make([][]store.Ticket, w.workers)
		var wg sync.WaitGroup
		for i := range w.workers {
			wg.Go(func() { tickets[i], _ = w.admitBatch(i) })
		}
		wg.Wait()
		total := 0
		for i := range w.workers {
			total += len(tickets[i])
			wg.Go(func() { w.sendAndComplete(i, tickets[i]) })
		}
		wg.Wait()
		if total == 0 || len(w.errs) > 0 {
			return
		}
	}
}

// testQuotaConcurrentWindow runs workers that admit a few attempts each,
// send them to a simulated provider with a quota of Q per window and
// complete them with what it answered, over several windows. Once the
// quota is known (the window's first response, here an Observe), the
// provider must never refuse a call: at most Q attempts are sent per
// window, and at most Q admitted when all are sent. Workers either run
// freely or in phases (all admit, then all complete); in some windows every
// fifth admitted attempt is not sent and gives its share back.
//
// In the windows marked unknown, no Observe comes first: the first attempts
// are admitted without a known quota, unregistered, until responses make
// it known. The provider may then refuse calls, but no more than the
// attempts admitted unregistered (see the package documentation of store,
// "Quotas and the in-flight rule").
func testQuotaConcurrentWindow(t *testing.T, s store.Store) {
	const workers, batch, q = 12, 4, 100
	g := store.GateKey{Tenant: "acme", Scope: "sim"}
	for n, mode := range []struct{ phased, skip, unknown bool }{
		{phased: true},
		{phased: true, skip: true},
		{},
		{skip: true},
		{phased: true, unknown: true},
		{phased: true, skip: true, unknown: true},
		{unknown: true},
		{skip: true, unknown: true},
	} {
		start := T0.Add(time.Duration(n) * time.Minute)
		reset := start.Add(time.Minute)
		var clock atomic.Int64
		w := &simWindow{
			s: s, g: g, reset: reset, p: &provider{left: q}, skip: mode.skip,
			now:     func() time.Time { return start.Add(time.Duration(clock.Add(100)) * time.Microsecond) },
			sent:    make([]int, workers),
			errs:    make(chan error, 4*workers),
			workers: workers, batch: batch,
		}
		if !mode.unknown {
			wantTime(t, fmt.Sprintf("window %d: first response", n), observe(t, s, g, quota(q, reset), start), time.Time{})
		}
		if mode.phased {
			w.runPhased()
		} else {
			w.runFree()
		}
		close(w.errs)
		for err := range w.errs {
			t.Fatal(err)
		}
		p := w.p
		unreg := w.unregistered.Load()
		t.Logf("window %d %+v: admitted %d (%d unregistered), sent %d, not sent %d, refused %d, completes %d",
			n, mode, p.admitted, unreg, p.accepted+p.refused, p.notSent, p.refused, w.completes.Load())
		if !mode.unknown && unreg != 0 {
			t.Fatalf("window %d %+v: %d attempts admitted unregistered with a known quota", n, mode, unreg)
		}
		if p.refused > unreg {
			t.Fatalf("window %d %+v: the provider refused %d calls, more than the %d admitted without a known quota (accepted %d of %d, admitted %d, %d not sent)",
				n, mode, p.refused, unreg, p.accepted, q, p.admitted, p.notSent)
		}
		if !mode.skip && p.admitted-unreg > q {
			t.Fatalf("window %d %+v: admitted %d registered attempts with a known quota of %d", n, mode, p.admitted-unreg, q)
		}
		// The gate closes early by at most the calls in flight when it did.
		if p.accepted < q-workers*batch {
			t.Fatalf("window %d %+v: only %d of %d calls used (admitted %d, %d not sent)", n, mode, p.accepted, q, p.admitted, p.notSent)
		}
		assertInFlight(t, s, g, reset, 0)
	}
}

// testQuotaFirstBurstNotCounted: attempts admitted before the gate's quota
// is known are not registered, and do not count in flight once a response
// makes it known; the attempts admitted after it are counted.
func testQuotaFirstBurstNotCounted(t *testing.T, s store.Store) {
	reset := T0.Add(time.Minute)
	for i := range 5 { // the first burst of the window
		mustNotRegister(t, s, store.AdmitRequest{Gate: gh, Now: T0.Add(ms(i))})
	}
	// The first response says 2 left. The 4 other calls of the burst are
	// still out, but not counted: the gate stays open.
	r := complete(t, s, store.CompleteRequest{Gate: gh, Obs: quota(2, reset), Now: T0.Add(ms(10))})
	wantTime(t, "first response, remaining 2, 4 unregistered calls out", r.GateClosedUntil, time.Time{})
	assertInFlight(t, s, gh, T0.Add(ms(11)), 0)
	// From now on every admitted attempt is registered and counted.
	t1 := mustRegister(t, s, gh, T0.Add(ms(12)))
	mustRegister(t, s, gh, T0.Add(ms(12)))
	refuseAt(t, s, gh, T0.Add(ms(12)), reset)
	// The burst's responses lower the known count; they have no ticket.
	r = complete(t, s, store.CompleteRequest{Gate: gh, Obs: quota(1, reset), Now: T0.Add(ms(13))})
	wantTime(t, "remaining 1, 2 registered calls in flight", r.GateClosedUntil, reset)
	// t1 completes without a response: its share comes back, but the gate
	// the response closed stays closed.
	complete(t, s, store.CompleteRequest{Gate: gh, Ticket: t1, Now: T0.Add(ms(14))})
	refuseAt(t, s, gh, T0.Add(ms(14)), reset)
}

// testAdmitUnknownQuotaRegistersNothing: without a known quota, Admit
// registers nothing and returns an empty ticket, but still counts the
// first attempt for the budget and reserves pacing.
func testAdmitUnknownQuotaRegistersNothing(t *testing.T, s store.Store) {
	budget := store.BudgetConfig{Ratio: 1, Window: 10 * time.Second}
	pace := store.PaceConfig{Rate: 1, Burst: 2}
	req := store.AdmitRequest{Gate: gh, PaceHost: "h", Pace: pace, FirstAttempt: true, Budget: budget, Now: T0}
	mustNotRegister(t, s, req)
	mustNotRegister(t, s, req)
	// Pacing was reserved: the burst of 2 is used up.
	if a := admit(t, s, req); !a.PaceDenied || a.PaceWait != time.Second || a.Ticket.ID != "" {
		t.Fatalf("third paced Admit = %+v, want denied with 1s", a)
	}
	for i := range 5 {
		mustNotRegister(t, s, store.AdmitRequest{Gate: gh, Now: T0.Add(ms(i))})
	}
	assertInFlight(t, s, gh, T0.Add(ms(10)), 0)
	// The budget counted the 2 admitted first attempts (not the denied one).
	for i := range 2 {
		if !complete(t, s, store.CompleteRequest{Gate: gh, SpendRetry: true, Budget: budget, Now: T0.Add(ms(20))}).RetryAllowed {
			t.Fatalf("retry %d refused after 2 first attempts at ratio 1", i+1)
		}
	}
	if complete(t, s, store.CompleteRequest{Gate: gh, SpendRetry: true, Budget: budget, Now: T0.Add(ms(20))}).RetryAllowed {
		t.Fatal("retry 3 allowed after 2 first attempts at ratio 1")
	}

	// A known quota whose reset passed is no quota: nothing is registered.
	g := store.GateKey{Tenant: "acme", Scope: "stale"}
	reset := T0.Add(time.Second)
	observe(t, s, g, quota(5, reset), T0)
	mustRegister(t, s, g, T0)
	mustNotRegister(t, s, store.AdmitRequest{Gate: g, Now: reset})
	mustNotRegister(t, s, store.AdmitRequest{Gate: g, Now: reset.Add(time.Hour)})

	// Nor after a response said the window reset (which clears the quota;
	// the provider rounded its reset down, within the tolerance).
	c := store.GateKey{Tenant: "acme", Scope: "cleared"}
	observe(t, s, c, quota(5, T0.Add(ms(500))), T0)
	mustRegister(t, s, c, T0)
	observe(t, s, c, quota(5, T0.Add(ms(300))), T0.Add(ms(400)))
	mustNotRegister(t, s, store.AdmitRequest{Gate: c, Now: T0.Add(ms(400))})

	// Observations without a usable quota make none known.
	z := store.GateKey{Tenant: "acme", Scope: "noquota"}
	observe(t, s, z, store.Observation{CloseUntil: T0.Add(time.Second)}, T0)
	observe(t, s, z, store.Observation{HasQuota: true, Remaining: 5}, T0)
	observe(t, s, z, store.Observation{Remaining: 5, Reset: T0.Add(time.Hour)}, T0)
	mustNotRegister(t, s, store.AdmitRequest{Gate: z, Now: T0.Add(time.Second)})
}

// testAdmitKnownQuotaRegisters: once a response reports the gate's quota,
// Admit registers each admitted attempt (a distinct non-empty ticket) and
// counts it against the known remaining count.
func testAdmitKnownQuotaRegisters(t *testing.T, s store.Store) {
	reset := T0.Add(time.Minute)
	// The first attempt, unregistered, brings back the quota: 3 left.
	mustNotRegister(t, s, store.AdmitRequest{Gate: gh, Now: T0})
	complete(t, s, store.CompleteRequest{Gate: gh, Obs: quota(3, reset), Now: T0.Add(ms(1))})
	seen := map[string]bool{}
	var tickets []store.Ticket
	for range 3 {
		tk := mustRegister(t, s, gh, T0.Add(ms(2)))
		if seen[tk.ID] {
			t.Fatalf("ticket %q issued twice", tk.ID)
		}
		seen[tk.ID] = true
		tickets = append(tickets, tk)
	}
	refuseAt(t, s, gh, T0.Add(ms(2)), reset)
	// Completing one without a response frees its share: one more admitted.
	complete(t, s, store.CompleteRequest{Gate: gh, Ticket: tickets[0], Now: T0.Add(ms(3))})
	mustRegister(t, s, gh, T0.Add(ms(4)))
	refuseAt(t, s, gh, T0.Add(ms(4)), reset)

	// A quota known through Observe registers too, with pacing and budget.
	g := store.GateKey{Tenant: "acme", Scope: "observed"}
	observe(t, s, g, quota(10, reset), T0)
	a := admit(t, s, store.AdmitRequest{
		Gate: g, PaceHost: "h", Pace: store.PaceConfig{Rate: 1, Burst: 1},
		FirstAttempt: true, Budget: store.DefaultBudget(), Now: T0,
	})
	if !a.Admitted() || a.Ticket.ID == "" {
		t.Fatalf("paced Admit with a known quota = %+v, want admitted and registered", a)
	}
	assertInFlight(t, s, g, T0.Add(ms(1)), 1)
	// The known quota lasts until its reset: then nothing is registered.
	mustNotRegister(t, s, store.AdmitRequest{Gate: g, Now: reset})
}

// testCompleteEmptyTicket: Complete with an empty ticket removes no
// registration but applies the observation and spends from the budget.
func testCompleteEmptyTicket(t *testing.T, s store.Store) {
	reset := T0.Add(time.Minute)
	knowQuota(t, s, gh, T0, reset)
	mustRegister(t, s, gh, T0)
	mustRegister(t, s, gh, T0)
	r := complete(t, s, store.CompleteRequest{Gate: gh, Now: T0.Add(ms(1))})
	if !r.RetryAllowed || !r.GateClosedUntil.IsZero() {
		t.Fatalf("empty Complete = %+v, want open and RetryAllowed", r)
	}
	assertInFlight(t, s, gh, T0.Add(ms(2)), 2)
	// Both registered calls are "others": 2 left closes the gate.
	r = complete(t, s, store.CompleteRequest{Gate: gh, Obs: quota(2, reset), Now: T0.Add(ms(3))})
	wantTime(t, "empty-ticket Complete, remaining 2 with 2 in flight", r.GateClosedUntil, reset)
	refuseAt(t, s, gh, T0.Add(ms(4)), reset)

	// CloseUntil applies.
	c := store.GateKey{Tenant: "acme", Scope: "close"}
	until := T0.Add(30 * time.Second)
	r = complete(t, s, store.CompleteRequest{Gate: c, Obs: store.Observation{CloseUntil: until}, Now: T0})
	wantTime(t, "empty-ticket Complete with CloseUntil", r.GateClosedUntil, until)
	refuseAt(t, s, c, T0.Add(time.Second), until)

	// A quota on a fresh gate: recorded (nothing in flight, so open) and
	// then enforced; remaining 0 closes at once.
	q := store.GateKey{Tenant: "acme", Scope: "fresh"}
	r = complete(t, s, store.CompleteRequest{Gate: q, Obs: quota(2, reset), Now: T0})
	wantTime(t, "empty-ticket Complete, remaining 2, none in flight", r.GateClosedUntil, time.Time{})
	mustRegister(t, s, q, T0)
	mustRegister(t, s, q, T0)
	refuseAt(t, s, q, T0, reset)
	z := store.GateKey{Tenant: "acme", Scope: "zero"}
	r = complete(t, s, store.CompleteRequest{Gate: z, Obs: quota(0, reset), Now: T0})
	wantTime(t, "empty-ticket Complete, remaining 0", r.GateClosedUntil, reset)

	// The budget: spends up to the floor, then refuses.
	b := store.BudgetConfig{FloorPerSecond: 1, Window: 2 * time.Second}
	for i := range 2 {
		if !complete(t, s, store.CompleteRequest{Gate: other, SpendRetry: true, Budget: b, Now: T0}).RetryAllowed {
			t.Fatalf("retry %d of a floor of 2 refused", i+1)
		}
	}
	r = complete(t, s, store.CompleteRequest{Gate: other, SpendRetry: true, Budget: b, Obs: quota(5, reset), Now: T0})
	if r.RetryAllowed {
		t.Fatal("retry 3 of a floor of 2 allowed")
	}
	// ... and the observation of a refused spend still applies.
	mustRegister(t, s, other, T0)
}

// testQuotaOutOfOrderCompletesDoNotStrand: with 10 left and 8 attempts in
// flight, the provider serves 7 of them, but the response reporting the
// lowest count (3) completes first. The gate is closed while the count is
// at or below the attempts still registered, and reopens as the others
// complete: quota is not stranded until the reset.
func testQuotaOutOfOrderCompletesDoNotStrand(t *testing.T, s store.Store) {
	reset := T0.Add(time.Minute)
	observe(t, s, gh, quota(10, reset), T0)
	var tickets []store.Ticket
	for i := range 8 {
		tickets = append(tickets, mustAdmit(t, s, gh, T0.Add(ms(i+1))))
	}
	now := T0.Add(ms(20))
	r := complete(t, s, store.CompleteRequest{Gate: gh, Ticket: tickets[6], Obs: quota(3, reset), Now: now})
	wantTime(t, "remaining 3 with 7 still registered", r.GateClosedUntil, reset)
	// The other served calls complete, each with a higher (older) count.
	for i, rem := range []int64{9, 8, 7, 6, 5} {
		now = now.Add(ms(1))
		complete(t, s, store.CompleteRequest{Gate: gh, Ticket: tickets[i], Obs: quota(rem, reset), Now: now})
	}
	// 2 still registered (tickets 5 and 7) against 3 known left: one more may go.
	assertInFlight(t, s, gh, now, 2)
	mustAdmit(t, s, gh, now.Add(ms(1)))
	refuseAt(t, s, gh, now.Add(ms(2)), reset)
}
