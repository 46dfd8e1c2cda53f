package storetest

import (
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/internal/store"
)

// learnFirst is learning with the first-window rule on: the standard
// policy's learning.
var learnFirst = store.LearningConfig{Enabled: true}

func freq(g store.GateKey, now time.Time) store.AdmitRequest {
	return store.AdmitRequest{Gate: g, Learning: learnFirst, Now: now}
}

func fcomplete(t *testing.T, s store.Store, g store.GateKey, tk store.Ticket, result store.Result, obs store.Observation, now time.Time) store.CompleteResult {
	t.Helper()
	return complete(t, s, store.CompleteRequest{Gate: g, Ticket: tk, Obs: obs, Result: result, Learning: learnFirst, Now: now})
}

// mustAdmitRegistered admits an attempt with the first-window rule on and
// checks that it went registered in flight, not as the probe or scout.
func mustAdmitRegistered(t *testing.T, s store.Store, req store.AdmitRequest) store.Ticket {
	t.Helper()
	a := admit(t, s, req)
	if !a.Admitted() || a.Probe || a.Ticket.ID == "" {
		t.Fatalf("Admit at %s = %+v, want admitted, registered, no probe", fmtTime(req.Now), a)
	}
	return a.Ticket
}

// testFirstWindowScout: a gate nothing is known of admits one call, the
// scout (registered like a probe), and holds the others until its answer;
// an accepted scout starts slow start: 1 + accepted/5 calls in flight.
func testFirstWindowScout(t *testing.T, s store.Store) {
	scout := mustProbe(t, s, freq(gh, T0))
	for i := range 5 {
		mustHold(t, s, freq(gh, T0.Add(ms(i))), heldPoll)
	}
	fcomplete(t, s, gh, scout, store.ResultAccepted, store.Observation{}, T0.Add(ms(10)))
	// accepted = 1: one call in flight at a time.
	a := mustAdmitRegistered(t, s, freq(gh, T0.Add(ms(11))))
	if a.Epoch != scout.Epoch {
		t.Fatalf("slow-start call in epoch %d, want the scout's %d", a.Epoch, scout.Epoch)
	}
	mustHold(t, s, freq(gh, T0.Add(ms(12))), heldPoll)
	now := T0.Add(ms(13))
	accepted := 1
	for accepted < 5 {
		fcomplete(t, s, gh, a, store.ResultAccepted, store.Observation{}, now)
		accepted++
		if accepted < 5 {
			a = mustAdmitRegistered(t, s, freq(gh, now))
			mustHold(t, s, freq(gh, now), heldPoll)
		}
		now = now.Add(ms(1))
	}
	// accepted = 5: two in flight.
	a1 := mustAdmitRegistered(t, s, freq(gh, now))
	a2 := mustAdmitRegistered(t, s, freq(gh, now))
	mustHold(t, s, freq(gh, now), heldPoll)
	back(t, s, gh, now.Add(ms(1)), a1, a2)
	// The gate itself is open all along: held calls are no closed gate.
	wantTime(t, "GateState", gateState(t, s, gh, now.Add(ms(2))), time.Time{})
	// Another gate has a scout of its own.
	mustProbe(t, s, freq(other, T0))
}

// testFirstWindowScoutHold: a scout without an answer holds the others no
// longer than the hold (default 2 s); then the next call goes as a scout.
func testFirstWindowScoutHold(t *testing.T, s store.Store) {
	mustProbe(t, s, freq(gh, T0))
	mustHold(t, s, freq(gh, T0.Add(time.Second)), heldPoll)
	hold := store.DefaultScoutHold
	a := admit(t, s, freq(gh, T0.Add(hold-ms(50))))
	if !a.Held || a.HeldFor > ms(50) {
		t.Fatalf("Admit 50 ms before the scout's hold ends = %+v, want held for at most 50ms", a)
	}
	mustProbe(t, s, freq(gh, T0.Add(hold)))
	// A shorter hold from the policy.
	short := store.LearningConfig{Enabled: true, ScoutHold: 300 * time.Millisecond}
	mustProbe(t, s, store.AdmitRequest{Gate: other, Learning: short, Now: T0})
	mustProbe(t, s, store.AdmitRequest{Gate: other, Learning: short, Now: T0.Add(300 * time.Millisecond)})
}

// testFirstWindowAnnouncedQuota: a scout whose answer announces a quota
// lets exactly the remaining count go, less the calls in flight.
func testFirstWindowAnnouncedQuota(t *testing.T, s store.Store) {
	scout := mustProbe(t, s, freq(gh, T0))
	reset := T0.Add(2 * time.Second)
	fcomplete(t, s, gh, scout, store.ResultAccepted, store.Observation{HasQuota: true, Remaining: 3, Reset: reset}, T0.Add(ms(5)))
	for i := range 3 {
		a := admit(t, s, freq(gh, T0.Add(ms(6+i))))
		if !a.Admitted() || a.Probe || a.Ticket.ID == "" {
			t.Fatalf("Admit %d within the announced remaining count = %+v, want admitted and registered", i+1, a)
		}
	}
	mustRefuse(t, s, freq(gh, T0.Add(ms(10))), reset)
}

// testFirstWindowSlowStartBound: 100 callers at once against a provider
// that accepts 50 calls in its window and refuses the rest: the first
// window, which starts blind, refuses at most 1 + 50/5 calls.
func testFirstWindowSlowStartBound(t *testing.T, s store.Store) {
	const quota = 50
	reopen := T0.Add(2 * time.Second)
	var flight []store.Ticket
	accepted, refused := 0, 0
	now := T0
	for step := 0; step < 10_000 && refused == 0 || len(flight) > 0; step++ {
		// Every caller tries; those the store admits go.
		if refused == 0 {
			for range 100 {
				a := admit(t, s, freq(gh, now))
				if !a.Admitted() {
					break
				}
				flight = append(flight, a.Ticket)
			}
		}
		if len(flight) == 0 {
			t.Fatalf("step %d: nothing admitted and nothing in flight", step)
		}
		// The oldest call is answered.
		tk := flight[0]
		flight = flight[1:]
		now = now.Add(time.Millisecond)
		if accepted < quota {
			accepted++
			fcomplete(t, s, gh, tk, store.ResultAccepted, store.Observation{}, now)
		} else {
			refused++
			fcomplete(t, s, gh, tk, store.ResultRefused, store.Observation{CloseUntil: reopen}, now)
		}
	}
	if accepted != quota {
		t.Fatalf("accepted %d, want the quota %d", accepted, quota)
	}
	if max := 1 + quota/store.SlowStartShare; refused > max {
		t.Fatalf("the first window refused %d calls, want at most %d", refused, max)
	}
	t.Logf("first window: %d accepted, %d refused", accepted, refused)
}

// testQuotaLapseScouts: when a known quota's window resets, its next window
// is unknown: the gate admits a scout and holds the others until its
// answer, instead of letting a burst go unregistered.
func testQuotaLapseScouts(t *testing.T, s store.Store) {
	scout := mustProbe(t, s, freq(gh, T0))
	reset := T0.Add(time.Second)
	fcomplete(t, s, gh, scout, store.ResultAccepted, store.Observation{HasQuota: true, Remaining: 5, Reset: reset}, T0.Add(ms(1)))
	tk := mustAdmitRegistered(t, s, freq(gh, T0.Add(ms(2))))
	fcomplete(t, s, gh, tk, store.ResultAccepted, store.Observation{HasQuota: true, Remaining: 4, Reset: reset}, T0.Add(ms(3)))
	after := reset.Add(ms(1))
	next := mustProbe(t, s, freq(gh, after))
	mustHold(t, s, freq(gh, after), heldPoll)
	reset2 := reset.Add(time.Second)
	fcomplete(t, s, gh, next, store.ResultAccepted, store.Observation{HasQuota: true, Remaining: 2, Reset: reset2}, after.Add(ms(1)))
	mustAdmitRegistered(t, s, freq(gh, after.Add(ms(2))))
	mustAdmitRegistered(t, s, freq(gh, after.Add(ms(2))))
	mustRefuse(t, s, freq(gh, after.Add(ms(3))), reset2)
}

// testLearnQuietWindowEndsEpoch: once two reopenings taught the window W,
// an epoch that passes W without a refusal ends: the next call starts a new
// epoch that admits L again, instead of probing one by one.
func testLearnQuietWindowEndsEpoch(t *testing.T, s store.Store) {
	_, reopen := learnQuota(t, s, gh, T0, 4, 1) // L = 3, the gate reopens at T0+2s
	var cs []store.Ticket
	for range 3 {
		cs = append(cs, mustPassLearned(t, s, gh, reopen, 0))
	}
	back(t, s, gh, reopen.Add(ms(5)), cs...)
	probe := mustProbe(t, s, lreq(gh, reopen.Add(ms(6))))
	reopen2 := reopen.Add(2 * time.Second) // W = 2 s
	refuse(t, s, gh, probe, reopen.Add(ms(7)), reopen2)
	cs = cs[:0]
	for range 3 {
		cs = append(cs, mustPassLearned(t, s, gh, reopen2, 0))
	}
	e := cs[0].Epoch
	back(t, s, gh, reopen2.Add(ms(5)), cs...)
	p := mustProbe(t, s, lreq(gh, reopen2.Add(ms(6))))
	lcomplete(t, s, gh, p, store.ResultAccepted, store.Observation{}, reopen2.Add(ms(7))) // L = 4
	// Still in the window: the next call probes.
	p = mustProbe(t, s, lreq(gh, reopen2.Add(ms(8))))
	lcomplete(t, s, gh, p, store.ResultAccepted, store.Observation{}, reopen2.Add(ms(9))) // L = 5
	// The window passed without a refusal: a new epoch admits L = 5 at once.
	next := reopen2.Add(2*time.Second + ms(1))
	cs = cs[:0]
	for range 5 {
		tk := mustPassLearned(t, s, gh, next, 0)
		if tk.Epoch == e {
			t.Fatalf("a quiet window passed, but the epoch %d goes on", e)
		}
		cs = append(cs, tk)
	}
	mustHold(t, s, lreq(gh, next), heldPoll)
	back(t, s, gh, next.Add(ms(1)), cs...)
	mustProbe(t, s, lreq(gh, next.Add(ms(2))))
}

// testLearnLostKeepsShare: a call whose outcome was lost (the caller
// canceled it in flight) keeps its share of the epoch, where one that was
// not sent gives it back; neither counts as refused, so the next epoch's L
// counts the lost call as accepted.
func testLearnLostKeepsShare(t *testing.T, s store.Store) {
	_, reopen := learnQuota(t, s, gh, T0, 3, 1) // L = 2
	a := mustPassLearned(t, s, gh, reopen, 0)
	b := mustPassLearned(t, s, gh, reopen, a.Epoch)
	lcomplete(t, s, gh, a, store.ResultLost, store.Observation{}, reopen.Add(ms(1)))
	lcomplete(t, s, gh, b, store.ResultBroken, store.Observation{}, reopen.Add(ms(1)))
	// Both keep their shares: L = 2 is used, so the next call probes.
	p := mustProbe(t, s, lreq(gh, reopen.Add(ms(2))))
	until := reopen.Add(2 * time.Second)
	refuse(t, s, gh, p, reopen.Add(ms(3)), until)
	// L = admitted 3 − not accepted 1 = 2: the lost and broken calls did
	// not lower it.
	c1 := mustPassLearned(t, s, gh, until, 0)
	c2 := mustPassLearned(t, s, gh, until, c1.Epoch)
	mustHold(t, s, lreq(gh, until), heldPoll)
	// A call not sent gives its share back: the next goes within L.
	lcomplete(t, s, gh, c1, store.ResultNone, store.Observation{}, until.Add(ms(1)))
	mustPassLearned(t, s, gh, until.Add(ms(2)), c1.Epoch)
	_ = c2
}

// testLearnWindowNeverShrinks: a reopening that came late (a Retry-After
// rounded up to whole seconds) makes the next measured window short; the
// learned window keeps the longer one, so no epoch ends before the
// provider's window resets.
func testLearnWindowNeverShrinks(t *testing.T, s store.Store) {
	_, reopen := learnQuota(t, s, gh, T0, 3, 1) // L = 2, reopens at T0+2s
	// Epoch at reopen; refused at once, closing until reopen+2s: W = 2 s.
	cycle := func(at, until time.Time) {
		t.Helper()
		a := mustPassLearned(t, s, gh, at, 0)
		b := mustPassLearned(t, s, gh, at, a.Epoch)
		back(t, s, gh, at.Add(ms(1)), a, b)
		p := mustProbe(t, s, lreq(gh, at.Add(ms(2))))
		refuse(t, s, gh, p, at.Add(ms(3)), until)
	}
	r2 := reopen.Add(2 * time.Second)
	cycle(reopen, r2)
	// A short measurement: 1.5 s.
	r3 := r2.Add(1500 * time.Millisecond)
	cycle(r2, r3)
	a := mustPassLearned(t, s, gh, r3, 0)
	b := mustPassLearned(t, s, gh, r3, a.Epoch)
	back(t, s, gh, r3.Add(ms(1)), a, b)
	// 1.6 s after r3: past the short measurement, within W = 2 s: still the
	// same epoch, so the next call probes.
	if p := mustProbe(t, s, lreq(gh, r3.Add(1600*time.Millisecond))); p.Epoch != a.Epoch {
		t.Fatalf("epoch %d ended after 1.6 s, before the learned 2 s window", a.Epoch)
	} else {
		lcomplete(t, s, gh, p, store.ResultAccepted, store.Observation{}, r3.Add(1601*time.Millisecond))
	}
	// 2 s after r3: a new epoch admits L = 3 at once.
	if tk := mustPassLearned(t, s, gh, r3.Add(2*time.Second), 0); tk.Epoch == a.Epoch {
		t.Fatalf("the window passed, but epoch %d goes on", a.Epoch)
	}
}
