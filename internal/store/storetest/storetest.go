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

// T0 is the suite's starting time: whole seconds, so that budget buckets
// start at a second boundary.
var T0 = time.Unix(1_750_000_000, 0)

// Run runs the suite. Each subtest calls newStore for a fresh, empty store
// that uses store.DefaultTicketTTL; newStore arranges for closing it (for
// example with t.Cleanup). Subtests run in parallel, so newStore may be
// called concurrently.
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"GateClosesAndReopens", testGateClosesAndReopens},
		{"CompleteClosesGate", testCompleteClosesGate},
		{"GatesOnlyExtend", testGatesOnlyExtend},
		{"PastCloseUntilIgnored", testPastCloseUntilIgnored},
		{"QuotaWithInFlight", testQuotaWithInFlight},
		{"QuotaZeroClosesUntilReset", testQuotaZeroClosesUntilReset},
		{"QuotaNeverShortens", testQuotaNeverShortens},
		{"QuotaAdmitsUpToRemaining", testQuotaAdmitsUpToRemaining},
		{"QuotaOutOfOrderCompletesDoNotStrand", testQuotaOutOfOrderCompletesDoNotStrand},
		{"QuotaCountsInFlight", testQuotaCountsInFlight},
		{"QuotaOutOfOrder", testQuotaOutOfOrder},
		{"QuotaPastResetClears", testQuotaPastResetClears},
		{"QuotaIsolation", testQuotaIsolation},
		{"QuotaConcurrentWindow", testQuotaConcurrentWindow},
		{"QuotaFirstBurstNotCounted", testQuotaFirstBurstNotCounted},
		{"AdmitUnknownQuotaRegistersNothing", testAdmitUnknownQuotaRegistersNothing},
		{"AdmitKnownQuotaRegisters", testAdmitKnownQuotaRegisters},
		{"CompleteEmptyTicket", testCompleteEmptyTicket},
		{"TenantIsolation", testTenantIsolation},
		{"CredentialIsolation", testCredentialIsolation},
		{"NoKeyCollisions", testNoKeyCollisions},
		{"BudgetFloor", testBudgetFloor},
		{"BudgetRatio", testBudgetRatio},
		{"BudgetWindowSlides", testBudgetWindowSlides},
		{"BudgetUnlimited", testBudgetUnlimited},
		{"BudgetCountsOnlyAdmitted", testBudgetCountsOnlyAdmitted},
		{"PaceBurstThenInterval", testPaceBurstThenInterval},
		{"PaceDeniedReservesNothing", testPaceDeniedReservesNothing},
		{"PaceTATExpires", testPaceTATExpires},
		{"PacePerTenantAndHost", testPacePerTenantAndHost},
		{"ClosedGateReservesNothing", testClosedGateReservesNothing},
		{"InFlightRegistration", testInFlightRegistration},
		{"TicketExpiry", testTicketExpiry},
		{"ObserveAndGateState", testObserveAndGateState},
		{"ZeroNowUsesWallClock", testZeroNowUsesWallClock},
		{"ConcurrentAdmitComplete", testConcurrentAdmitComplete},
		{"ConcurrentPacing", testConcurrentPacing},
		{"ConcurrentBudget", testConcurrentBudget},
		{"LearnFreshEpoch", testLearnFreshEpoch},
		{"LearnFloor", testLearnFloor},
		{"LearnProbeAccepted", testLearnProbeAccepted},
		{"LearnProbeRefused", testLearnProbeRefused},
		{"LearnShrink", testLearnShrink},
		{"LearnLateResults", testLearnLateResults},
		{"LearnNoneGivesShareBack", testLearnNoneGivesShareBack},
		{"LearnProbeExpiry", testLearnProbeExpiry},
		{"LearnIdleExpiry", testLearnIdleExpiry},
		{"LearnAnnouncedQuotaWins", testLearnAnnouncedQuotaWins},
		{"LearnDisabled", testLearnDisabled},
		{"LearnConcurrentProbe", testLearnConcurrentProbe},
		{"LearnInspect", testLearnInspect},
		{"ListGates", testListGates},
		{"ListGatesShowsState", testListGatesShowsState},
		{"LearnQuietWindowEndsEpoch", testLearnQuietWindowEndsEpoch},
		{"LearnLostKeepsShare", testLearnLostKeepsShare},
		{"LearnWindowNeverShrinks", testLearnWindowNeverShrinks},
		{"FirstWindowScout", testFirstWindowScout},
		{"FirstWindowScoutHold", testFirstWindowScoutHold},
		{"FirstWindowAnnouncedQuota", testFirstWindowAnnouncedQuota},
		{"FirstWindowSlowStartBound", testFirstWindowSlowStartBound},
		{"QuotaLapseScouts", testQuotaLapseScouts},
		{"BreakerUnderMinCalls", testBreakerUnderMinCalls},
		{"BreakerOpensAtRatio", testBreakerOpensAtRatio},
		{"BreakerHalfOpenCloses", testBreakerHalfOpenCloses},
		{"BreakerDoubling", testBreakerDoubling},
		{"BreakerSingleProbe", testBreakerSingleProbe},
		{"BreakerObserve", testBreakerObserve},
		{"BreakerOff", testBreakerOff},
		{"ProbeShared", testProbeShared},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newStore(t))
		})
	}
}

var (
	gh    = store.GateKey{Tenant: "acme", Scope: "github"}
	other = store.GateKey{Tenant: "globex", Scope: "github"}
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func sec(n float64) time.Duration { return time.Duration(n * float64(time.Second)) }

func wantTime(t *testing.T, what string, got, want time.Time) {
	t.Helper()
	if !got.Equal(want) {
		t.Fatalf("%s = %v, want %v", what, fmtTime(got), fmtTime(want))
	}
}

func fmtTime(x time.Time) string {
	if x.IsZero() {
		return "zero (open)"
	}
	return fmt.Sprintf("T0%+v", x.Sub(T0))
}

func admit(t *testing.T, s store.Store, req store.AdmitRequest) store.Admission {
	t.Helper()
	a, err := s.Admit(ctxT(t), req)
	if err != nil {
		t.Fatalf("Admit: %v", err)
	}
	if !a.Admitted() && a.Ticket.ID != "" {
		t.Fatalf("Admit = %+v: a refused attempt got a ticket", a)
	}
	return a
}

// mustRegister admits an attempt on g, which must have a known quota, and
// checks that it was registered (a non-empty ticket).
func mustRegister(t *testing.T, s store.Store, g store.GateKey, now time.Time) store.Ticket {
	t.Helper()
	tk := mustAdmit(t, s, g, now)
	if tk.ID == "" {
		t.Fatalf("Admit at %s on %+v, with a known quota: empty ticket, want the attempt registered", fmtTime(now), g)
	}
	return tk
}

// mustNotRegister admits an attempt on g, which must have no known quota,
// and checks that nothing was registered (an empty ticket).
func mustNotRegister(t *testing.T, s store.Store, req store.AdmitRequest) store.Admission {
	t.Helper()
	a := admit(t, s, req)
	if !a.Admitted() {
		t.Fatalf("Admit at %s = %+v, want admitted", fmtTime(req.Now), a)
	}
	if a.Ticket.ID != "" {
		t.Fatalf("Admit at %s on %+v, without a known quota: ticket %q, want empty (nothing registered)", fmtTime(req.Now), req.Gate, a.Ticket.ID)
	}
	return a
}

// knowQuota gives g a known quota with plenty left, until reset, so that
// Admit registers the attempts it admits.
func knowQuota(t *testing.T, s store.Store, g store.GateKey, now, reset time.Time) {
	t.Helper()
	wantTime(t, fmt.Sprintf("Observe plenty of quota on %+v", g), observe(t, s, g, quota(plenty, reset), now), time.Time{})
}

// plenty is a remaining count no test uses up.
const plenty = 1_000_000

func mustAdmit(t *testing.T, s store.Store, g store.GateKey, now time.Time) store.Ticket {
	t.Helper()
	a := admit(t, s, store.AdmitRequest{Gate: g, Now: now})
	if !a.Admitted() {
		t.Fatalf("Admit at %s = %+v, want admitted", fmtTime(now), a)
	}
	return a.Ticket
}

func complete(t *testing.T, s store.Store, req store.CompleteRequest) store.CompleteResult {
	t.Helper()
	r, err := s.Complete(ctxT(t), req)
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	return r
}

func observe(t *testing.T, s store.Store, g store.GateKey, obs store.Observation, now time.Time) time.Time {
	t.Helper()
	until, err := s.Observe(ctxT(t), store.ObserveRequest{Gate: g, Obs: obs, Now: now})
	if err != nil {
		t.Fatalf("Observe: %v", err)
	}
	return until.ClosedUntil
}

func gateState(t *testing.T, s store.Store, g store.GateKey, now time.Time) time.Time {
	t.Helper()
	until, err := s.GateState(ctxT(t), g, now)
	if err != nil {
		t.Fatalf("GateState: %v", err)
	}
	return until.ClosedUntil
}

// assertInFlight checks, through the quota rule alone, that exactly want
// attempts are in flight on g at now. It closes g until now+2µs at most.
func assertInFlight(t *testing.T, s store.Store, g store.GateKey, now time.Time, want int64) {
	t.Helper()
	c, ok := s.(store.InFlightCounter)
	if !ok {
		t.Fatalf("%T does not implement store.InFlightCounter", s)
	}
	got, err := c.InFlight(ctxT(t), g, now)
	if err != nil {
		t.Fatalf("InFlight: %v", err)
	}
	if got != want {
		t.Fatalf("%d attempts in flight on %+v at %s, want %d", got, g, fmtTime(now), want)
	}
}

func testGateClosesAndReopens(t *testing.T, s store.Store) {
	until := T0.Add(30 * time.Second)
	wantTime(t, "Observe", observe(t, s, gh, store.Observation{CloseUntil: until}, T0), until)
	wantTime(t, "GateState", gateState(t, s, gh, T0.Add(10*time.Second)), until)

	a := admit(t, s, store.AdmitRequest{Gate: gh, Now: T0.Add(10 * time.Second)})
	if a.Admitted() || a.Ticket.ID != "" {
		t.Fatalf("Admit on a closed gate = %+v, want refused without ticket", a)
	}
	wantTime(t, "Admission.GateClosedUntil", a.GateClosedUntil, until)

	wantTime(t, "GateState just before", gateState(t, s, gh, until.Add(-time.Microsecond)), until)
	wantTime(t, "GateState at reopen time", gateState(t, s, gh, until), time.Time{})
	mustAdmit(t, s, gh, until)
}

func testCompleteClosesGate(t *testing.T, s store.Store) {
	tk := mustAdmit(t, s, gh, T0)
	until := T0.Add(time.Minute)
	r := complete(t, s, store.CompleteRequest{Gate: gh, Ticket: tk, Obs: store.Observation{CloseUntil: until}, Now: T0.Add(time.Second)})
	wantTime(t, "CompleteResult.GateClosedUntil", r.GateClosedUntil, until)
	if !r.RetryAllowed {
		t.Fatal("RetryAllowed = false without SpendRetry")
	}
	wantTime(t, "Admit", admit(t, s, store.AdmitRequest{Gate: gh, Now: T0.Add(2 * time.Second)}).GateClosedUntil, until)
}

func testGatesOnlyExtend(t *testing.T, s store.Store) {
	u60, u30, u90 := T0.Add(60*time.Second), T0.Add(30*time.Second), T0.Add(90*time.Second)
	wantTime(t, "close +60s", observe(t, s, gh, store.Observation{CloseUntil: u60}, T0), u60)
	wantTime(t, "close +30s", observe(t, s, gh, store.Observation{CloseUntil: u30}, T0), u60)
	wantTime(t, "GateState", gateState(t, s, gh, T0.Add(45*time.Second)), u60)
	wantTime(t, "close +90s", observe(t, s, gh, store.Observation{CloseUntil: u90}, T0.Add(time.Second)), u90)
	tk := mustAdmit(t, s, other, T0)
	r := complete(t, s, store.CompleteRequest{Gate: other, Ticket: tk, Obs: store.Observation{CloseUntil: u90}, Now: T0})
	wantTime(t, "other close +90s", r.GateClosedUntil, u90)
	r = complete(t, s, store.CompleteRequest{Gate: other, Obs: store.Observation{CloseUntil: u30}, Now: T0})
	wantTime(t, "other close +30s", r.GateClosedUntil, u90)
}

func testPastCloseUntilIgnored(t *testing.T, s store.Store) {
	wantTime(t, "close in the past", observe(t, s, gh, store.Observation{CloseUntil: T0.Add(-time.Second)}, T0), time.Time{})
	wantTime(t, "close at now", observe(t, s, gh, store.Observation{CloseUntil: T0}, T0), time.Time{})
	mustAdmit(t, s, gh, T0)
}

func testQuotaWithInFlight(t *testing.T, s store.Store) {
	reset := T0.Add(time.Minute)
	for _, tc := range []struct {
		remaining int64
		closes    bool
	}{
		{remaining: 2, closes: true},  // 3 others will use the 2 left
		{remaining: 3, closes: true},  // 3 others use exactly the 3 left
		{remaining: 4, closes: false}, // one call left after the others
		{remaining: 5, closes: false},
	} {
		t.Run(fmt.Sprintf("remaining=%d", tc.remaining), func(t *testing.T) {
			g := store.GateKey{Tenant: "acme", Scope: fmt.Sprintf("api-%d.example", tc.remaining)}
			knowQuota(t, s, g, T0, reset) // calls in flight are registered
			var tickets []store.Ticket
			for range 4 {
				tickets = append(tickets, mustRegister(t, s, g, T0))
			}
			r := complete(t, s, store.CompleteRequest{
				Gate: g, Ticket: tickets[0], Now: T0.Add(time.Second),
				Obs: store.Observation{HasQuota: true, Remaining: tc.remaining, Reset: reset},
			})
			want := time.Time{}
			if tc.closes {
				want = reset
			}
			wantTime(t, "GateClosedUntil with 3 others in flight", r.GateClosedUntil, want)
			wantTime(t, "GateState", gateState(t, s, g, T0.Add(2*time.Second)), want)
		})
	}
}

func testQuotaZeroClosesUntilReset(t *testing.T, s store.Store) {
	reset := T0.Add(time.Minute)
	tk := mustAdmit(t, s, gh, T0)
	r := complete(t, s, store.CompleteRequest{Gate: gh, Ticket: tk, Now: T0, Obs: store.Observation{HasQuota: true, Remaining: 0, Reset: reset}})
	wantTime(t, "remaining 0", r.GateClosedUntil, reset)
	wantTime(t, "GateState at reset", gateState(t, s, gh, reset), time.Time{})

	// Nothing in flight: remaining 1 leaves the gate open, 0 closes it,
	// negative counts as 0, and a reset in the past never closes.
	g := store.GateKey{Tenant: "acme", Scope: "gitlab"}
	wantTime(t, "remaining 1, none in flight", observe(t, s, g, store.Observation{HasQuota: true, Remaining: 1, Reset: reset}, T0), time.Time{})
	wantTime(t, "remaining 0, reset passed", observe(t, s, g, store.Observation{HasQuota: true, Remaining: 0, Reset: T0}, T0), time.Time{})
	wantTime(t, "remaining 0, zero reset", observe(t, s, g, store.Observation{HasQuota: true, Remaining: 0}, T0), time.Time{})
	wantTime(t, "quota not set", observe(t, s, g, store.Observation{Remaining: 0, Reset: reset}, T0), time.Time{})
	wantTime(t, "remaining -1", observe(t, s, g, store.Observation{HasQuota: true, Remaining: -1, Reset: reset}, T0), reset)
}

func testQuotaNeverShortens(t *testing.T, s store.Store) {
	long := T0.Add(10 * time.Minute)
	observe(t, s, gh, store.Observation{CloseUntil: long}, T0)
	got := observe(t, s, gh, store.Observation{HasQuota: true, Remaining: 0, Reset: T0.Add(time.Minute)}, T0)
	wantTime(t, "earlier reset", got, long)
	// Both hints in one observation: the later one wins.
	g := store.GateKey{Tenant: "acme", Scope: "jira"}
	got = observe(t, s, g, store.Observation{CloseUntil: T0.Add(time.Minute), HasQuota: true, Remaining: 0, Reset: T0.Add(2 * time.Minute)}, T0)
	wantTime(t, "both hints", got, T0.Add(2*time.Minute))
}

func testTenantIsolation(t *testing.T, s store.Store) {
	until := T0.Add(time.Minute)
	observe(t, s, gh, store.Observation{CloseUntil: until}, T0)
	wantTime(t, "tenant B's gate with the same scope", gateState(t, s, other, T0), time.Time{})
	mustAdmit(t, s, other, T0)

	// In-flight counts are per tenant too.
	g1 := store.GateKey{Tenant: "acme", Scope: "openai"}
	g2 := store.GateKey{Tenant: "globex", Scope: "openai"}
	knowQuota(t, s, g1, T0, T0.Add(time.Hour))
	knowQuota(t, s, g2, T0, T0.Add(time.Hour))
	mustRegister(t, s, g1, T0)
	mustRegister(t, s, g1, T0)
	assertInFlight(t, s, g2, T0, 0)
	assertInFlight(t, s, g1, T0, 2)

	// Budgets are per tenant.
	b := store.BudgetConfig{FloorPerSecond: 1, Window: time.Second}
	if !complete(t, s, store.CompleteRequest{Gate: gh, SpendRetry: true, Budget: b, Now: T0}).RetryAllowed {
		t.Fatal("first retry of tenant A refused")
	}
	if complete(t, s, store.CompleteRequest{Gate: gh, SpendRetry: true, Budget: b, Now: T0}).RetryAllowed {
		t.Fatal("second retry of tenant A allowed")
	}
	if !complete(t, s, store.CompleteRequest{Gate: other, SpendRetry: true, Budget: b, Now: T0}).RetryAllowed {
		t.Fatal("tenant B's retry refused because of tenant A's budget")
	}

	// Pacing is per tenant.
	pace := store.PaceConfig{Rate: 1, Burst: 1}
	admit(t, s, store.AdmitRequest{Gate: gh, PaceHost: "api.github.com", Pace: pace, Now: T0})
	if a := admit(t, s, store.AdmitRequest{Gate: other, PaceHost: "api.github.com", Pace: pace, Now: T0}); !a.Admitted() || a.PaceWait != 0 {
		t.Fatalf("tenant B paced by tenant A's call: %+v", a)
	}
}

func testCredentialIsolation(t *testing.T, s store.Store) {
	k1 := store.GateKey{Tenant: "acme", Scope: "github", Credential: "aa11"}
	k2 := store.GateKey{Tenant: "acme", Scope: "github", Credential: "bb22"}
	k0 := store.GateKey{Tenant: "acme", Scope: "github"}
	until := T0.Add(time.Minute)
	observe(t, s, k1, store.Observation{CloseUntil: until}, T0)
	wantTime(t, "same credential", gateState(t, s, k1, T0), until)
	wantTime(t, "other credential", gateState(t, s, k2, T0), time.Time{})
	wantTime(t, "no credential", gateState(t, s, k0, T0), time.Time{})
	mustAdmit(t, s, k2, T0)
	mustAdmit(t, s, k0, T0)
}

// testNoKeyCollisions closes the first gate of pairs that a naive join of
// the fields (with ":", "_" or braces) would map to one key, and checks that
// the second stays open.
func testNoKeyCollisions(t *testing.T, s store.Store) {
	pairs := [][2]store.GateKey{
		{{Tenant: "a:b", Scope: "c"}, {Tenant: "a", Scope: "b:c"}},
		{{Tenant: "a_b", Scope: "c"}, {Tenant: "a", Scope: "b_c"}},
		{{Tenant: "a}", Scope: "x"}, {Tenant: "a", Scope: "}x"}},
		{{Tenant: "{a}", Scope: "x"}, {Tenant: "a", Scope: "x"}},
		{{Tenant: "a%3Ab", Scope: "c"}, {Tenant: "a:b", Scope: "c"}},
		{{Tenant: "t", Scope: "s:x", Credential: ""}, {Tenant: "t", Scope: "s", Credential: "x"}},
		{{Tenant: "t", Scope: "s", Credential: "x:y"}, {Tenant: "t", Scope: "s:x", Credential: "y"}},
		{{Tenant: "t:g", Scope: "s"}, {Tenant: "t", Scope: "g:s"}},
		{{Tenant: "", Scope: "a:b"}, {Tenant: "a", Scope: "b"}},
		{{Tenant: "t\x00", Scope: "s"}, {Tenant: "t", Scope: "\x00s"}},
	}
	for i, p := range pairs {
		now := T0.Add(time.Duration(i) * time.Hour) // earlier pairs' gates have reopened
		until := now.Add(time.Minute)
		wantTime(t, fmt.Sprintf("pair %d: close %+v", i, p[0]), observe(t, s, p[0], store.Observation{CloseUntil: until}, now), until)
		wantTime(t, fmt.Sprintf("pair %d: %+v after closing %+v", i, p[1], p[0]), gateState(t, s, p[1], now), time.Time{})
	}
	// Pacing: tenant "a:p" with host "h" versus tenant "a" with host "p:h".
	pace := store.PaceConfig{Rate: 1, Burst: 1}
	now := T0.Add(100 * time.Hour)
	admit(t, s, store.AdmitRequest{Gate: store.GateKey{Tenant: "a:p"}, PaceHost: "h", Pace: pace, Now: now})
	if a := admit(t, s, store.AdmitRequest{Gate: store.GateKey{Tenant: "a"}, PaceHost: "p:h", Pace: pace, Now: now}); a.PaceWait != 0 {
		t.Fatalf("pacing keys collide: %+v", a)
	}
}

func testBudgetFloor(t *testing.T, s store.Store) {
	b := store.BudgetConfig{FloorPerSecond: 1, Window: 3 * time.Second}
	for i := range 3 {
		if r := complete(t, s, store.CompleteRequest{Gate: gh, SpendRetry: true, Budget: b, Now: T0}); !r.RetryAllowed {
			t.Fatalf("retry %d of a floor of 3 refused", i+1)
		}
	}
	if r := complete(t, s, store.CompleteRequest{Gate: gh, SpendRetry: true, Budget: b, Now: T0}); r.RetryAllowed {
		t.Fatal("retry 4 of a floor of 3 allowed")
	}
	// Not spending never fails and never counts.
	if r := complete(t, s, store.CompleteRequest{Gate: gh, Budget: b, Now: T0}); !r.RetryAllowed {
		t.Fatal("RetryAllowed = false without SpendRetry")
	}
}

func testBudgetRatio(t *testing.T, s store.Store) {
	b := store.BudgetConfig{Ratio: 0.5, Window: 10 * time.Second}
	spend := func() bool {
		return complete(t, s, store.CompleteRequest{Gate: gh, SpendRetry: true, Budget: b, Now: T0.Add(sec(0.5))}).RetryAllowed
	}
	if spend() {
		t.Fatal("retry allowed with no requests and no floor")
	}
	for range 4 {
		admit(t, s, store.AdmitRequest{Gate: gh, FirstAttempt: true, Budget: b, Now: T0})
	}
	for i := range 2 {
		if !spend() {
			t.Fatalf("retry %d refused after 4 requests at ratio 0.5", i+1)
		}
	}
	if spend() {
		t.Fatal("retry 3 allowed after 4 requests at ratio 0.5")
	}
	for range 2 {
		admit(t, s, store.AdmitRequest{Gate: gh, FirstAttempt: true, Budget: b, Now: T0.Add(sec(0.7))})
	}
	if !spend() {
		t.Fatal("retry refused after 6 requests and 2 retries at ratio 0.5")
	}
	if spend() {
		t.Fatal("retry 4 allowed after 6 requests at ratio 0.5")
	}
	// Retries are not requests: admitting them without FirstAttempt adds nothing.
	admit(t, s, store.AdmitRequest{Gate: gh, Budget: b, Now: T0.Add(sec(0.8))})
	if spend() {
		t.Fatal("a retry's admission counted as a request")
	}
}

func testBudgetWindowSlides(t *testing.T, s store.Store) {
	b := store.BudgetConfig{FloorPerSecond: 1, Window: 2 * time.Second}
	spend := func(at time.Duration) bool {
		return complete(t, s, store.CompleteRequest{Gate: gh, SpendRetry: true, Budget: b, Now: T0.Add(at)}).RetryAllowed
	}
	if !spend(0) || !spend(sec(0.9)) {
		t.Fatal("floor of 2 refused a retry")
	}
	if spend(sec(1.5)) {
		t.Fatal("third retry in a 2 s window allowed")
	}
	if !spend(sec(2)) { // second 0 left the window (0, 2]
		t.Fatal("retry refused after the window slid past the first second")
	}
	if !spend(sec(2.5)) { // one retry (second 2) in the window (0, 2]
		t.Fatal("second retry refused after sliding")
	}
	if spend(sec(2.9)) {
		t.Fatal("retry allowed beyond the floor after sliding")
	}
	for i, want := range []bool{true, true, false} {
		if spend(10*time.Second) != want {
			t.Fatalf("retry %d after the window passed: allowed = %v, want %v", i+1, !want, want)
		}
	}

	// Requests slide out too.
	r := store.BudgetConfig{Ratio: 1, Window: 2 * time.Second}
	g := store.GateKey{Tenant: "slide"}
	spendR := func(at time.Duration) bool {
		return complete(t, s, store.CompleteRequest{Gate: g, SpendRetry: true, Budget: r, Now: T0.Add(at)}).RetryAllowed
	}
	admit(t, s, store.AdmitRequest{Gate: g, FirstAttempt: true, Budget: r, Now: T0})
	if !spendR(sec(1.9)) {
		t.Fatal("retry refused with one request in the window at ratio 1")
	}
	if spendR(sec(1.95)) {
		t.Fatal("second retry allowed with one request at ratio 1")
	}
	admit(t, s, store.AdmitRequest{Gate: g, FirstAttempt: true, Budget: r, Now: T0.Add(sec(2))})
	if spendR(sec(2)) {
		t.Fatal("retry allowed: the second-1 retry is still in the window (0, 2]")
	}
	if !spendR(sec(3)) {
		t.Fatal("retry refused once the old retry left the window (1, 3]")
	}
	if spendR(sec(5)) {
		t.Fatal("retry allowed after every request left the window (3, 5]")
	}
}

func testBudgetUnlimited(t *testing.T, s store.Store) {
	for i := range 50 {
		if !complete(t, s, store.CompleteRequest{Gate: gh, SpendRetry: true, Now: T0}).RetryAllowed {
			t.Fatalf("retry %d refused with a zero budget (unlimited)", i+1)
		}
	}
	// Counting under an unlimited budget does not use up a later limited one.
	b := store.BudgetConfig{FloorPerSecond: 1, Window: time.Second}
	if !complete(t, s, store.CompleteRequest{Gate: gh, SpendRetry: true, Budget: b, Now: T0}).RetryAllowed {
		t.Fatal("unlimited retries were counted")
	}
}

func testBudgetCountsOnlyAdmitted(t *testing.T, s store.Store) {
	b := store.BudgetConfig{Ratio: 1, Window: 10 * time.Second}
	observe(t, s, gh, store.Observation{CloseUntil: T0.Add(time.Second)}, T0)
	for range 3 {
		if a := admit(t, s, store.AdmitRequest{Gate: gh, FirstAttempt: true, Budget: b, Now: T0}); a.Admitted() {
			t.Fatal("admitted on a closed gate")
		}
	}
	pace := store.PaceConfig{Rate: 1, Burst: 1}
	admit(t, s, store.AdmitRequest{Gate: other, PaceHost: "h", Pace: pace, FirstAttempt: true, Budget: b, Now: T0})
	if a := admit(t, s, store.AdmitRequest{Gate: other, PaceHost: "h", Pace: pace, FirstAttempt: true, Budget: b, Now: T0}); !a.PaceDenied {
		t.Fatalf("second paced call = %+v, want denied", a)
	}
	if complete(t, s, store.CompleteRequest{Gate: gh, SpendRetry: true, Budget: b, Now: T0}).RetryAllowed {
		t.Fatal("refused admissions were counted as requests")
	}
	if !complete(t, s, store.CompleteRequest{Gate: other, SpendRetry: true, Budget: b, Now: T0}).RetryAllowed {
		t.Fatal("the admitted request was not counted")
	}
	if complete(t, s, store.CompleteRequest{Gate: other, SpendRetry: true, Budget: b, Now: T0}).RetryAllowed {
		t.Fatal("the pace-denied request was counted")
	}
}

func testPaceBurstThenInterval(t *testing.T, s store.Store) {
	pace := store.PaceConfig{Rate: 10, Burst: 3}
	req := store.AdmitRequest{Gate: gh, PaceHost: "api.github.com", Pace: pace, PaceMaxWait: time.Second, Now: T0}
	for i := range 3 {
		if a := admit(t, s, req); !a.Admitted() || a.PaceWait != 0 {
			t.Fatalf("burst call %d = %+v, want admitted at once", i+1, a)
		}
	}
	for i, want := range []time.Duration{100, 200, 300} {
		a := admit(t, s, req)
		if !a.Admitted() || a.PaceWait != want*time.Millisecond {
			t.Fatalf("call %d = %+v, want admitted after %v", i+4, a, want*time.Millisecond)
		}
	}
	// Denied beyond the maximum wait, with the wait it would have needed.
	req.PaceMaxWait = 350 * time.Millisecond
	a := admit(t, s, req)
	if a.Admitted() || !a.PaceDenied || a.PaceWait != 400*time.Millisecond || a.Ticket.ID != "" {
		t.Fatalf("call 7 = %+v, want denied with a 400ms wait", a)
	}
	// A zero maximum wait accepts only an immediate slot.
	req.PaceMaxWait = 0
	req.Now = T0.Add(300 * time.Millisecond)
	if a := admit(t, s, req); !a.PaceDenied || a.PaceWait != 100*time.Millisecond {
		t.Fatalf("call with zero max wait = %+v, want denied with 100ms", a)
	}
	req.Now = T0.Add(400 * time.Millisecond)
	if a := admit(t, s, req); !a.Admitted() || a.PaceWait != 0 {
		t.Fatalf("call at the slot = %+v, want admitted at once", a)
	}
}

func testPaceDeniedReservesNothing(t *testing.T, s store.Store) {
	knowQuota(t, s, gh, T0, T0.Add(time.Minute)) // admitted attempts are registered
	req := store.AdmitRequest{Gate: gh, PaceHost: "h", Pace: store.PaceConfig{Rate: 2, Burst: 1}, PaceMaxWait: 100 * time.Millisecond, Now: T0}
	if a := admit(t, s, req); a.Ticket.ID == "" {
		t.Fatalf("first call = %+v, want admitted and registered", a)
	}
	for range 5 {
		if a := admit(t, s, req); !a.PaceDenied || a.PaceWait != 500*time.Millisecond {
			t.Fatalf("denied call = %+v, want denied with 500ms each time", a)
		}
	}
	assertInFlight(t, s, gh, T0, 1)
	req.Now = T0.Add(400 * time.Millisecond)
	if a := admit(t, s, req); !a.Admitted() || a.PaceWait != 100*time.Millisecond {
		t.Fatalf("call = %+v, want admitted after 100ms", a)
	}
}

func testPaceTATExpires(t *testing.T, s store.Store) {
	req := store.AdmitRequest{Gate: gh, PaceHost: "h", Pace: store.PaceConfig{Rate: 10, Burst: 3}, Now: T0}
	for range 3 {
		admit(t, s, req)
	}
	req.Now = T0.Add(100 * time.Millisecond) // one slot back
	if a := admit(t, s, req); a.PaceWait != 0 || !a.Admitted() {
		t.Fatalf("after one interval = %+v, want admitted", a)
	}
	if a := admit(t, s, req); !a.PaceDenied {
		t.Fatalf("second call after one interval = %+v, want denied", a)
	}
	req.Now = T0.Add(time.Hour) // long idle: the full burst is back
	for i := range 3 {
		if a := admit(t, s, req); a.PaceWait != 0 || !a.Admitted() {
			t.Fatalf("burst call %d after idle = %+v, want admitted", i+1, a)
		}
	}
	if a := admit(t, s, req); !a.PaceDenied {
		t.Fatalf("call beyond burst = %+v, want denied", a)
	}
}

func testPacePerTenantAndHost(t *testing.T, s store.Store) {
	pace := store.PaceConfig{Rate: 1}
	admit(t, s, store.AdmitRequest{Gate: gh, PaceHost: "a.example", Pace: pace, Now: T0})
	if a := admit(t, s, store.AdmitRequest{Gate: gh, PaceHost: "a.example", Pace: pace, Now: T0}); !a.PaceDenied || a.PaceWait != time.Second {
		t.Fatalf("same host = %+v, want denied with 1s (Burst 0 counts as 1)", a)
	}
	// The same host under another gate (scope) of the tenant shares the pace.
	if a := admit(t, s, store.AdmitRequest{Gate: store.GateKey{Tenant: "acme", Scope: "x"}, PaceHost: "a.example", Pace: pace, Now: T0}); !a.PaceDenied {
		t.Fatalf("same tenant and host, other scope = %+v, want denied", a)
	}
	if a := admit(t, s, store.AdmitRequest{Gate: gh, PaceHost: "b.example", Pace: pace, Now: T0}); !a.Admitted() || a.PaceWait != 0 {
		t.Fatalf("other host = %+v, want admitted", a)
	}
	// No pacing configured: never paced.
	for range 10 {
		if a := admit(t, s, store.AdmitRequest{Gate: gh, PaceHost: "a.example", Now: T0}); !a.Admitted() || a.PaceWait != 0 {
			t.Fatalf("unpaced call = %+v", a)
		}
	}
}

func testClosedGateReservesNothing(t *testing.T, s store.Store) {
	until := T0.Add(time.Second)
	knowQuota(t, s, gh, T0, T0.Add(time.Minute)) // an admitted attempt would be registered
	observe(t, s, gh, store.Observation{CloseUntil: until}, T0)
	req := store.AdmitRequest{Gate: gh, PaceHost: "h", Pace: store.PaceConfig{Rate: 1, Burst: 1}, Now: T0}
	for range 3 {
		a := admit(t, s, req)
		if a.Admitted() || a.PaceDenied || a.PaceWait != 0 {
			t.Fatalf("Admit on a closed gate = %+v, want only GateClosedUntil", a)
		}
	}
	assertInFlight(t, s, gh, until, 0)
	req.Now = until
	if a := admit(t, s, req); !a.Admitted() || a.PaceWait != 0 {
		t.Fatalf("first Admit after reopening = %+v, want admitted at once", a)
	}
}

func testInFlightRegistration(t *testing.T, s store.Store) {
	knowQuota(t, s, gh, T0, T0.Add(time.Hour))
	knowQuota(t, s, other, T0, T0.Add(time.Hour))
	t1 := mustRegister(t, s, gh, T0)
	t2 := mustRegister(t, s, gh, T0)
	if t1 == t2 {
		t.Fatalf("two admissions got the same ticket %q", t1.ID)
	}
	assertInFlight(t, s, gh, T0, 2)
	complete(t, s, store.CompleteRequest{Gate: gh, Ticket: t1, Now: T0.Add(time.Millisecond)})
	assertInFlight(t, s, gh, T0.Add(time.Millisecond), 1)
	complete(t, s, store.CompleteRequest{Gate: gh, Ticket: t1, Now: T0.Add(2 * time.Millisecond)}) // twice: no effect
	assertInFlight(t, s, gh, T0.Add(2*time.Millisecond), 1)
	complete(t, s, store.CompleteRequest{Gate: gh, Ticket: store.Ticket{ID: "no-such-ticket"}, Now: T0.Add(3 * time.Millisecond)})
	assertInFlight(t, s, gh, T0.Add(3*time.Millisecond), 1)
	complete(t, s, store.CompleteRequest{Gate: gh, Ticket: t2, Now: T0.Add(4 * time.Millisecond)})
	assertInFlight(t, s, gh, T0.Add(4*time.Millisecond), 0)

	seen := map[string]bool{}
	for range 100 {
		id := mustRegister(t, s, other, T0).ID
		if seen[id] {
			t.Fatalf("ticket %q issued twice", id)
		}
		seen[id] = true
	}
}

func testTicketExpiry(t *testing.T, s store.Store) {
	knowQuota(t, s, gh, T0, T0.Add(5*time.Minute))
	var tickets []store.Ticket
	for range 3 {
		tickets = append(tickets, mustRegister(t, s, gh, T0))
	}
	assertInFlight(t, s, gh, T0.Add(time.Minute), 3)
	expired := T0.Add(store.DefaultTicketTTL)
	assertInFlight(t, s, gh, expired, 0)
	// Completing an expired ticket is fine and still applies the observation.
	until := expired.Add(time.Minute)
	r := complete(t, s, store.CompleteRequest{Gate: gh, Ticket: tickets[0], Obs: store.Observation{CloseUntil: until}, Now: expired})
	wantTime(t, "GateClosedUntil", r.GateClosedUntil, until)
}

func testObserveAndGateState(t *testing.T, s store.Store) {
	wantTime(t, "unknown gate", gateState(t, s, gh, T0), time.Time{})
	wantTime(t, "empty observation", observe(t, s, gh, store.Observation{}, T0), time.Time{})
	// Observe counts every in-flight attempt as "other".
	reset := T0.Add(time.Minute)
	wantTime(t, "remaining 10, none in flight", observe(t, s, gh, store.Observation{HasQuota: true, Remaining: 10, Reset: reset}, T0), time.Time{})
	mustRegister(t, s, gh, T0)
	mustRegister(t, s, gh, T0)
	wantTime(t, "remaining 3 with 2 in flight", observe(t, s, gh, store.Observation{HasQuota: true, Remaining: 3, Reset: reset}, T0), time.Time{})
	wantTime(t, "remaining 2 with 2 in flight", observe(t, s, gh, store.Observation{HasQuota: true, Remaining: 2, Reset: reset}, T0), reset)
	wantTime(t, "GateState", gateState(t, s, gh, T0.Add(59*time.Second)), reset)
	wantTime(t, "empty observation on a closed gate", observe(t, s, gh, store.Observation{}, T0.Add(time.Second)), reset)
}

func testZeroNowUsesWallClock(t *testing.T, s store.Store) {
	g := store.GateKey{Tenant: "acme", Scope: "wall"}
	until := time.Now().Add(time.Hour)
	if got := observe(t, s, g, store.Observation{CloseUntil: until}, time.Time{}); got.IsZero() {
		t.Fatal("Observe with zero now did not close the gate an hour ahead")
	}
	if a := admit(t, s, store.AdmitRequest{Gate: g}); a.Admitted() {
		t.Fatal("Admit with zero now ignored a gate closed an hour ahead")
	}
	if got := gateState(t, s, g, time.Time{}); got.IsZero() {
		t.Fatal("GateState with zero now: open")
	}
}

func testConcurrentAdmitComplete(t *testing.T, s store.Store) {
	const workers, rounds = 16, 25
	reset := T0.Add(time.Hour)
	knowQuota(t, s, gh, T0, reset) // every attempt is registered
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			ctx := context.Background()
			for i := range rounds {
				now := T0.Add(time.Duration(i) * time.Millisecond)
				a, err := s.Admit(ctx, store.AdmitRequest{Gate: gh, FirstAttempt: true, Budget: store.DefaultBudget(), Now: now})
				if err != nil || !a.Admitted() || a.Ticket.ID == "" {
					errs <- fmt.Errorf("worker %d: Admit = %+v, %v; want admitted and registered", w, a, err)
					return
				}
				r, err := s.Complete(ctx, store.CompleteRequest{
					Gate: gh, Ticket: a.Ticket, Now: now,
					Obs: store.Observation{HasQuota: true, Remaining: 1000, Reset: reset},
				})
				if err != nil || !r.GateClosedUntil.IsZero() {
					errs <- fmt.Errorf("worker %d: Complete = %+v, %v: at most %d in flight, remaining 1000", w, r, err, workers)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	assertInFlight(t, s, gh, T0.Add(time.Second), 0)
}

func testConcurrentPacing(t *testing.T, s store.Store) {
	const workers, burst = 40, 10
	knowQuota(t, s, gh, T0, T0.Add(time.Hour)) // admitted attempts are registered
	var admitted, denied atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			a, err := s.Admit(context.Background(), store.AdmitRequest{Gate: gh, PaceHost: "h", Pace: store.PaceConfig{Rate: 1, Burst: burst}, Now: T0})
			switch {
			case err != nil:
				t.Error(err)
			case a.Admitted():
				admitted.Add(1)
			case a.PaceDenied:
				denied.Add(1)
			}
		})
	}
	wg.Wait()
	if admitted.Load() != burst || denied.Load() != workers-burst {
		t.Fatalf("admitted %d, denied %d; want %d and %d", admitted.Load(), denied.Load(), burst, workers-burst)
	}
	assertInFlight(t, s, gh, T0, burst)
}

func testConcurrentBudget(t *testing.T, s store.Store) {
	const workers = 40
	b := store.BudgetConfig{FloorPerSecond: 2, Window: 10 * time.Second} // 20 retries
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			r, err := s.Complete(context.Background(), store.CompleteRequest{Gate: gh, SpendRetry: true, Budget: b, Now: T0})
			if err != nil {
				t.Error(err)
			} else if r.RetryAllowed {
				allowed.Add(1)
			}
		})
	}
	wg.Wait()
	if allowed.Load() != 20 {
		t.Fatalf("allowed %d retries concurrently, want exactly 20", allowed.Load())
	}
}
