package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/internal/store"
)

// learnOn is the learning configuration of the suite's learning tests of
// epochs and learned quotas; the first-window rule (firstwindow.go) is off.
var learnOn = store.LearningConfig{Enabled: true, FirstWindowOff: true}

// heldPoll is the longest HeldFor the contract allows.
const heldPoll = 100 * time.Millisecond

// ladmit admits an attempt on g with learning on.
func ladmit(t *testing.T, s store.Store, g store.GateKey, now time.Time) store.Admission {
	t.Helper()
	return admit(t, s, store.AdmitRequest{Gate: g, Learning: learnOn, Now: now})
}

// mustPass admits an attempt on g with learning on and checks that it went
// within the learned quota (or in a fresh epoch): admitted, no probe, in
// epoch (any non-zero epoch when epoch is 0). Within a learned quota the
// attempt is registered in flight (its Complete says it is back); in a
// fresh epoch nothing is registered. It returns the admission's ticket
// (its Epoch set).
func mustPass(t *testing.T, s store.Store, g store.GateKey, now time.Time, epoch int64) store.Ticket {
	t.Helper()
	a := ladmit(t, s, g, now)
	if !a.Admitted() || a.Probe || a.Held {
		t.Fatalf("learning Admit at %s = %+v, want admitted within the quota, no probe", fmtTime(now), a)
	}
	if a.Ticket.Epoch == 0 || epoch != 0 && a.Ticket.Epoch != epoch {
		t.Fatalf("learning Admit at %s: epoch %d, want %s", fmtTime(now), a.Ticket.Epoch, epochWant(epoch))
	}
	return a.Ticket
}

// mustPassFresh is mustPass in a fresh epoch: nothing registered.
func mustPassFresh(t *testing.T, s store.Store, g store.GateKey, now time.Time, epoch int64) store.Ticket {
	t.Helper()
	tk := mustPass(t, s, g, now, epoch)
	if tk.ID != "" {
		t.Fatalf("fresh-epoch Admit at %s registered %q, want nothing registered", fmtTime(now), tk.ID)
	}
	return tk
}

// mustPassLearned is mustPass within a learned quota: registered.
func mustPassLearned(t *testing.T, s store.Store, g store.GateKey, now time.Time, epoch int64) store.Ticket {
	t.Helper()
	tk := mustPass(t, s, g, now, epoch)
	if tk.ID == "" {
		t.Fatalf("Admit within a learned quota at %s registered nothing; the probe could not wait for it", fmtTime(now))
	}
	return tk
}

// back completes learned calls as accepted at now: they are back.
func back(t *testing.T, s store.Store, g store.GateKey, now time.Time, tickets ...store.Ticket) {
	t.Helper()
	for _, tk := range tickets {
		r := lcomplete(t, s, g, tk, store.ResultAccepted, store.Observation{}, now)
		if !r.RetryAllowed {
			t.Fatal("Complete without a retry to spend refused a retry")
		}
	}
}

func epochWant(epoch int64) string {
	if epoch == 0 {
		return "a non-zero epoch"
	}
	return fmt.Sprint(epoch)
}

// mustProbe admits an attempt on g with learning (and breaker bc) on and
// checks that it went as the gate's probe: admitted, registered.
func mustProbe(t *testing.T, s store.Store, req store.AdmitRequest) store.Ticket {
	t.Helper()
	a := admit(t, s, req)
	if !a.Admitted() || !a.Probe || a.Ticket.ID == "" {
		t.Fatalf("Admit at %s = %+v, want admitted as the probe, with a ticket", fmtTime(req.Now), a)
	}
	return a.Ticket
}

// mustHold checks that Admit answers Held: nothing admitted, reserved or
// registered, with a HeldFor in (0, want].
func mustHold(t *testing.T, s store.Store, req store.AdmitRequest, want time.Duration) {
	t.Helper()
	a := admit(t, s, req)
	if a.Admitted() || !a.Held || a.Ticket.ID != "" || a.PaceDenied || a.PaceWait != 0 || a.Probe ||
		!a.GateClosedUntil.IsZero() || !a.BreakerOpenUntil.IsZero() {
		t.Fatalf("Admit at %s = %+v, want only Held", fmtTime(req.Now), a)
	}
	if a.HeldFor <= 0 || a.HeldFor > want {
		t.Fatalf("Admit at %s: HeldFor %v, want in (0, %v]", fmtTime(req.Now), a.HeldFor, want)
	}
}

func lreq(g store.GateKey, now time.Time) store.AdmitRequest {
	return store.AdmitRequest{Gate: g, Learning: learnOn, Now: now}
}

// lcomplete completes an attempt with result and obs, learning on.
func lcomplete(t *testing.T, s store.Store, g store.GateKey, tk store.Ticket, result store.Result, obs store.Observation, now time.Time) store.CompleteResult {
	t.Helper()
	return complete(t, s, store.CompleteRequest{Gate: g, Ticket: tk, Obs: obs, Result: result, Learning: learnOn, Now: now})
}

// refuse completes tk as refused with a hint closing g until until, and
// checks that the gate closed until then.
func refuse(t *testing.T, s store.Store, g store.GateKey, tk store.Ticket, now, until time.Time) {
	t.Helper()
	r := lcomplete(t, s, g, tk, store.ResultRefused, store.Observation{CloseUntil: until}, now)
	if r.GateClosedUntil.Before(until) {
		t.Fatalf("refusal at %s closing until %s: GateClosedUntil %s", fmtTime(now), fmtTime(until), fmtTime(r.GateClosedUntil))
	}
}

// learnQuota runs a fresh epoch on g from at: n calls admitted, the first
// refused with a hint of 2 s, then the others of refused more refused and
// the rest accepted (no Complete, as the engine sends none). The gate is
// closed until at+2s, when the next epoch admits n-refused calls. It
// returns the fresh epoch's id and the reopening time.
func learnQuota(t *testing.T, s store.Store, g store.GateKey, at time.Time, n, refused int) (int64, time.Time) {
	t.Helper()
	if refused < 1 || refused > n {
		t.Fatalf("learnQuota: %d refused of %d", refused, n)
	}
	var tickets []store.Ticket
	for i := range n {
		tickets = append(tickets, mustPassFresh(t, s, g, at.Add(ms(i)), 0))
	}
	epoch := tickets[0].Epoch
	for i, tk := range tickets {
		if tk.Epoch != epoch {
			t.Fatalf("call %d of the fresh epoch in epoch %d, want %d", i+1, tk.Epoch, epoch)
		}
	}
	reopen := at.Add(2 * time.Second)
	refuse(t, s, g, tickets[0], at.Add(ms(100)), reopen)
	for i := 1; i < refused; i++ {
		// The calls in flight are refused too; their hints reach no further.
		refuse(t, s, g, tickets[i], at.Add(ms(100+i)), reopen)
	}
	refuseAt(t, s, g, at.Add(time.Second), reopen)
	mustRefuse(t, s, lreq(g, reopen.Add(-time.Microsecond)), reopen)
	return epoch, reopen
}

// testLearnFreshEpoch: the first learning Admit on a gate starts a fresh
// epoch, in which nothing is known: every Admit passes, unregistered, in
// that epoch.
func testLearnFreshEpoch(t *testing.T, s store.Store) {
	first := mustPassFresh(t, s, gh, T0, 0)
	for i := range 50 {
		mustPassFresh(t, s, gh, T0.Add(ms(i)), first.Epoch)
	}
	wantTime(t, "GateState", gateState(t, s, gh, T0.Add(ms(60))), time.Time{})
	// Another gate has its own epoch.
	if tk := mustPassFresh(t, s, other, T0, 0); tk.Epoch == 0 {
		t.Fatal("no epoch on another gate")
	}
}

// testLearnFloor: the fresh epoch's accepted calls (admitted − refused)
// become the floor L; when the gate reopens, a new epoch admits exactly L
// calls, then one probe, and holds the rest.
func testLearnFloor(t *testing.T, s store.Store) {
	fresh, reopen := learnQuota(t, s, gh, T0, 6, 3) // L = 3
	p := mustPassLearned(t, s, gh, reopen, 0)
	if p.Epoch == fresh {
		t.Fatalf("the reopening started no new epoch (still %d)", fresh)
	}
	p2 := mustPassLearned(t, s, gh, reopen.Add(ms(1)), p.Epoch)
	p3 := mustPassLearned(t, s, gh, reopen.Add(ms(2)), p.Epoch)
	// The probe waits until the learned calls are back: an accepted probe
	// must show room beyond them, not win a race against one of them.
	mustHold(t, s, lreq(gh, reopen.Add(ms(3))), heldPoll)
	back(t, s, gh, reopen.Add(ms(3)), p, p2)
	mustHold(t, s, lreq(gh, reopen.Add(ms(3))), heldPoll)
	back(t, s, gh, reopen.Add(ms(3)), p3)
	probe := mustProbe(t, s, lreq(gh, reopen.Add(ms(3))))
	if probe.Epoch != p.Epoch {
		t.Fatalf("probe in epoch %d, want %d", probe.Epoch, p.Epoch)
	}
	// Held calls reserve no pacing slot and count no request.
	budget := store.BudgetConfig{Ratio: 1, Window: 10 * time.Second}
	for i := range 5 {
		mustHold(t, s, store.AdmitRequest{
			Gate: gh, Learning: learnOn, PaceHost: "h", Pace: store.PaceConfig{Rate: 1, Burst: 1},
			FirstAttempt: true, Budget: budget, Now: reopen.Add(ms(4 + i)),
		}, heldPoll)
	}
	if complete(t, s, store.CompleteRequest{Gate: gh, SpendRetry: true, Budget: budget, Now: reopen.Add(ms(10))}).RetryAllowed {
		t.Fatal("held Admits were counted as requests")
	}
	sameTenant := store.GateKey{Tenant: gh.Tenant, Scope: "x"}
	if a := admit(t, s, store.AdmitRequest{Gate: sameTenant, PaceHost: "h", Pace: store.PaceConfig{Rate: 1, Burst: 1}, Now: reopen.Add(ms(11))}); !a.Admitted() || a.PaceWait != 0 {
		t.Fatalf("held Admits reserved pacing: %+v", a)
	}
	wantTime(t, "GateState while held", gateState(t, s, gh, reopen.Add(ms(12))), time.Time{})
}

// testLearnProbeAccepted: an accepted probe raises L by one and frees the
// slot at once: the next call probes.
func testLearnProbeAccepted(t *testing.T, s store.Store) {
	_, reopen := learnQuota(t, s, gh, T0, 4, 2) // L = 2
	b1 := mustPassLearned(t, s, gh, reopen, 0)
	e := b1.Epoch
	b2 := mustPassLearned(t, s, gh, reopen, e)
	// Calls within L that come back accepted prove nothing new: L stays 2.
	back(t, s, gh, reopen.Add(ms(1)), b1, b2)
	now := reopen
	for i := range 3 {
		now = now.Add(ms(10))
		probe := mustProbe(t, s, lreq(gh, now))
		mustHold(t, s, lreq(gh, now.Add(ms(1))), heldPoll)
		r := lcomplete(t, s, gh, probe, store.ResultAccepted, store.Observation{}, now.Add(ms(2)))
		if !r.GateClosedUntil.IsZero() || !r.BreakerOpenUntil.IsZero() {
			t.Fatalf("accepted probe %d: %+v, want the gate open", i+1, r)
		}
	}
	// L is now 5: the next epoch (after a refusal) admits 5, then probes.
	probe := mustProbe(t, s, lreq(gh, now.Add(ms(10))))
	until := now.Add(3 * time.Second)
	refuse(t, s, gh, probe, now.Add(ms(20)), until)
	c1 := mustPassLearned(t, s, gh, until, 0)
	cs := []store.Ticket{c1}
	for i := range 4 {
		cs = append(cs, mustPassLearned(t, s, gh, until.Add(ms(i+1)), c1.Epoch))
	}
	back(t, s, gh, until.Add(ms(9)), cs...)
	mustProbe(t, s, lreq(gh, until.Add(ms(10))))
}

// testLearnProbeRefused: a refused probe closes the gate with its hint and
// ends the epoch; the next epoch admits exactly what the ended one had
// accepted (an exact L, since that epoch began at a reopening).
func testLearnProbeRefused(t *testing.T, s store.Store) {
	_, reopen := learnQuota(t, s, gh, T0, 5, 2) // L = 3
	b1 := mustPassLearned(t, s, gh, reopen, 0)
	e := b1.Epoch
	back(t, s, gh, reopen, b1, mustPassLearned(t, s, gh, reopen, e), mustPassLearned(t, s, gh, reopen, e))
	p1 := mustProbe(t, s, lreq(gh, reopen.Add(ms(1))))
	lcomplete(t, s, gh, p1, store.ResultAccepted, store.Observation{}, reopen.Add(ms(2))) // L = 4
	p2 := mustProbe(t, s, lreq(gh, reopen.Add(ms(3))))
	until := reopen.Add(2 * time.Second)
	r := lcomplete(t, s, gh, p2, store.ResultRefused, store.Observation{CloseUntil: until}, reopen.Add(ms(4)))
	wantTime(t, "refused probe: GateClosedUntil", r.GateClosedUntil, until)
	refuseAt(t, s, gh, reopen.Add(ms(5)), until)
	// Accepted 4 of 5: the next epoch admits 4, then probes.
	c1 := mustPassLearned(t, s, gh, until, 0)
	if c1.Epoch == e {
		t.Fatal("the refused probe did not end its epoch")
	}
	cs := []store.Ticket{c1}
	for i := range 3 {
		cs = append(cs, mustPassLearned(t, s, gh, until.Add(ms(i)), c1.Epoch))
	}
	back(t, s, gh, until.Add(ms(4)), cs...)
	mustProbe(t, s, lreq(gh, until.Add(ms(5))))
	mustHold(t, s, lreq(gh, until.Add(ms(6))), heldPoll)
}

// testLearnShrink: a quota that shrinks shows up as an earlier refusal,
// which lowers L.
func testLearnShrink(t *testing.T, s store.Store) {
	_, reopen := learnQuota(t, s, gh, T0, 8, 2) // L = 6
	first := mustPassLearned(t, s, gh, reopen, 0)
	tickets := []store.Ticket{first}
	for i := range 3 {
		tickets = append(tickets, mustPassLearned(t, s, gh, reopen.Add(ms(i+1)), first.Epoch))
	}
	// The provider now takes only 2: the 3rd and 4th are refused.
	until := reopen.Add(2 * time.Second)
	back(t, s, gh, reopen.Add(ms(40)), tickets[0], tickets[1])
	refuse(t, s, gh, tickets[2], reopen.Add(ms(50)), until)
	refuse(t, s, gh, tickets[3], reopen.Add(ms(51)), until)
	// 4 admitted, 2 refused: L = 2.
	c1 := mustPassLearned(t, s, gh, until, 0)
	back(t, s, gh, until, c1, mustPassLearned(t, s, gh, until, c1.Epoch))
	mustProbe(t, s, lreq(gh, until.Add(ms(1))))
}

// testLearnLateResults: results for the just-ended epoch still count in it
// (before the next epoch starts, and after: they then lower its L); a late
// refusal from an earlier epoch closes the gate but does not end the
// current epoch; results for older epochs change nothing.
func testLearnLateResults(t *testing.T, s store.Store) {
	// Epoch A (fresh): 6 calls, a1 refused at once (the gate closes until
	// T0+2s); a2 is refused, a3 fails and a4 is not sent, all while the
	// gate is closed: they count in A. a5, a6 are still out at reopening.
	var a []store.Ticket
	for i := range 6 {
		a = append(a, mustPass(t, s, gh, T0.Add(ms(i)), 0))
	}
	reopen := T0.Add(2 * time.Second)
	refuse(t, s, gh, a[0], T0.Add(ms(100)), reopen)
	refuse(t, s, gh, a[1], T0.Add(ms(101)), reopen)
	lcomplete(t, s, gh, a[2], store.ResultFailed, store.Observation{}, T0.Add(ms(102)))
	lcomplete(t, s, gh, a[3], store.ResultNone, store.Observation{}, T0.Add(ms(103)))
	// A: admitted 6 − 1 given back, 3 not accepted: L = 2.
	b1 := mustPassLearned(t, s, gh, reopen, 0)
	// a5 comes back failed after B started: L = 1, which b1 used.
	lcomplete(t, s, gh, a[4], store.ResultFailed, store.Observation{}, reopen.Add(ms(1)))
	mustHold(t, s, lreq(gh, reopen.Add(ms(1))), heldPoll) // b1 is still out
	back(t, s, gh, reopen.Add(ms(2)), b1)
	probe := mustProbe(t, s, lreq(gh, reopen.Add(ms(2))))
	if probe.Epoch != b1.Epoch {
		t.Fatalf("probe in epoch %d, want %d", probe.Epoch, b1.Epoch)
	}
	lcomplete(t, s, gh, probe, store.ResultAccepted, store.Observation{}, reopen.Add(ms(3))) // L = 2
	// a6 comes back refused with a hint: the gate closes again, but the
	// refusal belongs to A: B goes on (and counts it: L = 1).
	again := reopen.Add(time.Second)
	refuse(t, s, gh, a[5], reopen.Add(ms(4)), again)
	refuseAt(t, s, gh, reopen.Add(ms(5)), again)
	// B: admitted b1 and the probe (2); L = 1: the next call probes.
	p2 := mustProbe(t, s, lreq(gh, again))
	if p2.Epoch != b1.Epoch {
		t.Fatalf("a late refusal from the epoch before ended the current one: epoch %d, want %d", p2.Epoch, b1.Epoch)
	}
	// B ends with p2 refused: admitted 3, not accepted 1: L = 2 for C.
	until := again.Add(2 * time.Second)
	refuse(t, s, gh, p2, again.Add(ms(10)), until)
	c1 := mustPassLearned(t, s, gh, until, 0)
	// Results from A, now older than the epoch before, change nothing: not
	// even a refusal ends C.
	lcomplete(t, s, gh, a[4], store.ResultFailed, store.Observation{}, until.Add(ms(1)))
	lcomplete(t, s, gh, a[3], store.ResultNone, store.Observation{}, until.Add(ms(1)))
	lcomplete(t, s, gh, store.Ticket{Epoch: a[0].Epoch}, store.ResultRefused, store.Observation{}, until.Add(ms(1)))
	back(t, s, gh, until.Add(ms(2)), c1, mustPassLearned(t, s, gh, until.Add(ms(2)), c1.Epoch))
	mustProbe(t, s, lreq(gh, until.Add(ms(3))))
}

// testLearnNoneGivesShareBack: a call not sent (Result None) gives its
// share of L back; a probe not sent frees the slot.
func testLearnNoneGivesShareBack(t *testing.T, s store.Store) {
	_, reopen := learnQuota(t, s, gh, T0, 4, 2) // L = 2
	b1 := mustPassLearned(t, s, gh, reopen, 0)
	b2 := mustPassLearned(t, s, gh, reopen, b1.Epoch)
	lcomplete(t, s, gh, b1, store.ResultNone, store.Observation{}, reopen.Add(ms(1)))
	back(t, s, gh, reopen.Add(ms(2)), b2, mustPassLearned(t, s, gh, reopen.Add(ms(2)), b1.Epoch))
	p := mustProbe(t, s, lreq(gh, reopen.Add(ms(3))))
	mustHold(t, s, lreq(gh, reopen.Add(ms(4))), heldPoll)
	lcomplete(t, s, gh, p, store.ResultNone, store.Observation{}, reopen.Add(ms(5)))
	// L is still 2 (a probe not sent proves nothing): the next call probes.
	p2 := mustProbe(t, s, lreq(gh, reopen.Add(ms(6))))
	// A failed probe frees the slot too, and counts as not accepted.
	lcomplete(t, s, gh, p2, store.ResultFailed, store.Observation{}, reopen.Add(ms(7)))
	mustProbe(t, s, lreq(gh, reopen.Add(ms(8))))
}

// testLearnProbeExpiry: a probe that never completes holds the others no
// longer than its registration lives (HeldFor never beyond it); then the
// slot is free, and the expired probe's late result neither raises L nor
// frees the new probe's slot.
func testLearnProbeExpiry(t *testing.T, s store.Store) {
	_, reopen := learnQuota(t, s, gh, T0, 2, 1) // L = 1
	back(t, s, gh, reopen, mustPassLearned(t, s, gh, reopen, 0))
	p := mustProbe(t, s, lreq(gh, reopen))
	expires := reopen.Add(store.DefaultTicketTTL)
	mustHold(t, s, lreq(gh, reopen.Add(time.Second)), heldPoll)
	mustHold(t, s, lreq(gh, expires.Add(-40*time.Millisecond)), 40*time.Millisecond)
	p2 := mustProbe(t, s, lreq(gh, expires))
	if p2.ID == p.ID {
		t.Fatalf("the new probe has the expired one's ticket %q", p.ID)
	}
	lcomplete(t, s, gh, p, store.ResultAccepted, store.Observation{}, expires.Add(ms(1)))
	mustHold(t, s, lreq(gh, expires.Add(ms(2))), heldPoll)
	lcomplete(t, s, gh, p2, store.ResultAccepted, store.Observation{}, expires.Add(ms(3)))
	// Only p2 raised L (to 2); the epoch has admitted 3: the next one probes.
	mustProbe(t, s, lreq(gh, expires.Add(ms(4))))
}

// testLearnIdleExpiry: learned state is forgotten after IdleExpiry without
// Admits on the gate: a fresh epoch then admits everything again.
func testLearnIdleExpiry(t *testing.T, s store.Store) {
	cfg := store.LearningConfig{Enabled: true, IdleExpiry: time.Minute, FirstWindowOff: true}
	req := func(now time.Time) store.AdmitRequest { return store.AdmitRequest{Gate: gh, Learning: cfg, Now: now} }
	a1 := admit(t, s, req(T0))
	admit(t, s, req(T0))
	reopen := T0.Add(time.Second)
	r := complete(t, s, store.CompleteRequest{Gate: gh, Ticket: a1.Ticket, Result: store.ResultRefused, Learning: cfg, Obs: store.Observation{CloseUntil: reopen}, Now: T0})
	wantTime(t, "refusal", r.GateClosedUntil, reopen)
	// L = 1: one passes, then the probe, at the reopening and a minute on
	// (each Admit keeps learned state a minute more).
	last := reopen.Add(time.Minute - time.Microsecond)
	a := admit(t, s, req(reopen))
	if !a.Admitted() || a.Probe || a.Ticket.ID == "" {
		t.Fatalf("first Admit at the reopening = %+v, want admitted within L, registered", a)
	}
	complete(t, s, store.CompleteRequest{Gate: gh, Ticket: a.Ticket, Result: store.ResultAccepted, Learning: cfg, Now: reopen})
	mustProbe(t, s, req(reopen.Add(ms(1))))
	mustHold(t, s, req(last), heldPoll)
	// A minute after the last Admit, L is forgotten: a fresh epoch (the
	// probe slot expired too: its ticket TTL is 2 minutes).
	fresh := last.Add(time.Minute + store.DefaultTicketTTL)
	var epoch int64
	for i := range 10 {
		a := admit(t, s, req(fresh.Add(ms(i))))
		if !a.Admitted() || a.Probe || a.Ticket.ID != "" || a.Ticket.Epoch == 0 {
			t.Fatalf("Admit %d after the idle expiry = %+v, want a fresh epoch's", i+1, a)
		}
		if epoch != 0 && a.Ticket.Epoch != epoch {
			t.Fatalf("Admit %d in epoch %d, want %d", i+1, a.Ticket.Epoch, epoch)
		}
		epoch = a.Ticket.Epoch
	}
	if epoch == a1.Ticket.Epoch {
		t.Fatal("the fresh epoch reuses the forgotten epoch's id")
	}
	// A refusal that closes the gate longer than the idle expiry keeps L:
	// the idle time of the ended epoch runs from the reopening.
	long := store.GateKey{Tenant: "acme", Scope: "long-close"}
	lreq2 := func(now time.Time) store.AdmitRequest { return store.AdmitRequest{Gate: long, Learning: cfg, Now: now} }
	c1 := admit(t, s, lreq2(T0))
	admit(t, s, lreq2(T0))
	hours := T0.Add(3 * time.Hour)
	r = complete(t, s, store.CompleteRequest{Gate: long, Ticket: c1.Ticket, Result: store.ResultRefused, Learning: cfg, Obs: store.Observation{CloseUntil: hours}, Now: T0})
	wantTime(t, "a refusal closing for 3 h", r.GateClosedUntil, hours)
	later := hours.Add(time.Minute - time.Microsecond)
	a = admit(t, s, lreq2(later))
	if !a.Admitted() || a.Probe || a.Ticket.Epoch == c1.Ticket.Epoch {
		t.Fatalf("first Admit after a 3 h close = %+v, want admitted within L = 1, in a new epoch", a)
	}
	complete(t, s, store.CompleteRequest{Gate: long, Ticket: a.Ticket, Result: store.ResultAccepted, Learning: cfg, Now: later})
	mustProbe(t, s, lreq2(later))

	// The idle expiry counts from the last Admit: 59 s on, L still holds.
	g := store.GateKey{Tenant: "acme", Scope: "busy"}
	breq := func(now time.Time) store.AdmitRequest { return store.AdmitRequest{Gate: g, Learning: cfg, Now: now} }
	b1 := admit(t, s, breq(T0))
	complete(t, s, store.CompleteRequest{Gate: g, Ticket: b1.Ticket, Result: store.ResultRefused, Obs: store.Observation{CloseUntil: T0.Add(time.Second)}, Now: T0})
	mustProbe(t, s, breq(T0.Add(59*time.Second))) // L = 0: the first call probes
}

// testLearnAnnouncedQuotaWins: a gate with a live announced quota keeps
// the in-flight rule and ignores learning: calls are registered against
// the quota, never held or probed, and carry no epoch.
func testLearnAnnouncedQuotaWins(t *testing.T, s store.Store) {
	reset := T0.Add(time.Hour)
	knowQuota(t, s, gh, T0, reset)
	var tickets []store.Ticket
	for i := range 3 {
		a := ladmit(t, s, gh, T0.Add(ms(i)))
		if !a.Admitted() || a.Ticket.ID == "" || a.Probe || a.Ticket.Epoch != 0 {
			t.Fatalf("learning Admit %d with a known quota = %+v, want registered, no epoch", i+1, a)
		}
		tickets = append(tickets, a.Ticket)
	}
	reopen := T0.Add(time.Second)
	for _, tk := range tickets {
		refuse(t, s, gh, tk, T0.Add(ms(10)), reopen)
	}
	for i := range 20 {
		a := ladmit(t, s, gh, reopen.Add(ms(i)))
		if !a.Admitted() || a.Ticket.ID == "" || a.Probe || a.Held || a.Ticket.Epoch != 0 {
			t.Fatalf("Admit %d after the reopening with a known quota = %+v, want registered only", i+1, a)
		}
	}
	assertInFlight(t, s, gh, reopen.Add(ms(30)), 20)
	// The known quota still closes the gate as before.
	r := lcomplete(t, s, gh, store.Ticket{}, store.ResultAccepted, quota(20, reset), reopen.Add(ms(40)))
	wantTime(t, "remaining 20 with 20 in flight", r.GateClosedUntil, reset)
}

// testLearnDisabled: without learning, a refusal and a reopening change
// nothing: calls are neither counted, held nor probed, and carry no epoch.
func testLearnDisabled(t *testing.T, s store.Store) {
	var tickets []store.Ticket
	for i := range 4 {
		tickets = append(tickets, mustNotRegister(t, s, store.AdmitRequest{Gate: gh, Now: T0.Add(ms(i))}).Ticket)
	}
	reopen := T0.Add(time.Second)
	r := complete(t, s, store.CompleteRequest{Gate: gh, Ticket: tickets[0], Result: store.ResultRefused, Obs: store.Observation{CloseUntil: reopen}, Now: T0.Add(ms(10))})
	wantTime(t, "refusal", r.GateClosedUntil, reopen)
	for i := range 20 {
		a := mustNotRegister(t, s, store.AdmitRequest{Gate: gh, Now: reopen.Add(ms(i))})
		if a.Probe || a.Held || a.Ticket.Epoch != 0 {
			t.Fatalf("Admit %d without learning = %+v", i+1, a)
		}
	}
	// A gate learned by one policy does not hold another policy's calls
	// that have learning off.
	_, reopen2 := learnQuota(t, s, other, T0, 2, 1) // L = 1
	back(t, s, other, reopen2, mustPassLearned(t, s, other, reopen2, 0))
	mustProbe(t, s, lreq(other, reopen2))
	for i := range 5 {
		a := mustNotRegister(t, s, store.AdmitRequest{Gate: other, Now: reopen2.Add(ms(i))})
		if a.Probe || a.Held {
			t.Fatalf("Admit %d without learning on a learned gate = %+v", i+1, a)
		}
	}
}

// testLearnConcurrentProbe: concurrent Admits at a reopening let exactly L
// go and hold the rest; once those are back, concurrent Admits let exactly
// one probe go.
func testLearnConcurrentProbe(t *testing.T, s store.Store) {
	_, reopen := learnQuota(t, s, gh, T0, 5, 2) // L = 3
	const workers = 24
	burst := func(now time.Time) (passed []store.Ticket, probes, held int) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				a, err := s.Admit(context.Background(), lreq(gh, now))
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
				case a.Admitted() && !a.Probe && a.Ticket.ID != "":
					passed = append(passed, a.Ticket)
				default:
					t.Errorf("Admit = %+v", a)
				}
			})
		}
		wg.Wait()
		return passed, probes, held
	}
	passed, probes, held := burst(reopen)
	if len(passed) != 3 || probes != 0 || held != workers-3 {
		t.Fatalf("at the reopening: %d passed, %d probes, %d held; want 3, 0 and %d", len(passed), probes, held, workers-3)
	}
	back(t, s, gh, reopen.Add(ms(1)), passed...)
	again, probes, held := burst(reopen.Add(ms(2)))
	if len(again) != 0 || probes != 1 || held != workers-1 {
		t.Fatalf("once they are back: %d passed, %d probes, %d held; want 0, 1 and %d", len(again), probes, held, workers-1)
	}
}

// testLearnInspect: a store that inspects shows the learned quota, the
// epoch's counts and the probe in flight.
func testLearnInspect(t *testing.T, s store.Store) {
	in, ok := s.(store.Inspector)
	if !ok {
		t.Skipf("%T does not implement store.Inspector", s)
	}
	_, reopen := learnQuota(t, s, gh, T0, 5, 2) // L = 3
	b1 := mustPassLearned(t, s, gh, reopen, 0)
	info, err := in.InspectGate(ctxT(t), gh, reopen)
	if err != nil {
		t.Fatal(err)
	}
	if !info.Learning || !info.Learned || info.LearnedQuota != 3 || info.Epoch != b1.Epoch || info.Admitted != 1 ||
		info.InFlight != 1 || info.ProbeInFlight || !info.Status.Open() {
		t.Fatalf("InspectGate after one learned call = %+v, want L 3, 1 admitted and in flight, no probe", info)
	}
	back(t, s, gh, reopen, b1, mustPassLearned(t, s, gh, reopen, b1.Epoch), mustPassLearned(t, s, gh, reopen, b1.Epoch))
	mustProbe(t, s, lreq(gh, reopen))
	info, err = in.InspectGate(ctxT(t), gh, reopen)
	if err != nil {
		t.Fatal(err)
	}
	if !info.ProbeInFlight || info.Admitted != 4 {
		t.Fatalf("InspectGate with the probe out = %+v", info)
	}
	if info, err := in.InspectGate(ctxT(t), store.GateKey{Tenant: "nobody"}, reopen); err != nil || info != (store.GateInfo{}) {
		t.Fatalf("InspectGate of an unknown gate = %+v, %v; want nothing", info, err)
	}
}
