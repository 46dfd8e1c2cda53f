package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/internal/store"
)

// BoundedGates is the per-tenant gate bound the stores of RunBounded are
// made with: small, so that the bound's eviction shows (1/16 of it rounds
// up to one gate evicted at a time).
const BoundedGates = 8

// FloodHosts is how many distinct hosts the flood test of RunBounded
// reports by default: the target of issue 17 (a gate closed by a hint
// stays closed through a flood of 100,000 distinct hosts in its tenant).
const FloodHosts = 100_000

// Bounded is what RunBounded needs of the store under test.
type Bounded struct {
	// New returns a fresh, empty store that holds at most maxGates gates
	// per tenant (and uses store.DefaultTicketTTL); it arranges for
	// closing it.
	New func(t *testing.T, maxGates int) store.Store
	// Gates returns how many gates tenant holds in s (an upper bound, such
	// as the size of the tenant's index, will do).
	Gates func(t *testing.T, s store.Store, tenant string) int
	// Flood is how many distinct hosts the flood test reports; zero means
	// FloodHosts.
	Flood int
}

// RunBounded runs the tests of the per-tenant gate bound.
func RunBounded(t *testing.T, b Bounded) {
	t.Helper()
	if b.Flood <= 0 {
		b.Flood = FloodHosts
	}
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store, b Bounded)
	}{
		{"EvictsSoftSoonest", testBoundEvictsSoftSoonest},
		{"KeepsAnOpenBreaker", testBoundKeepsOpenBreaker},
		{"KeepsPromisesThroughAFlood", testBoundKeepsPromisesThroughAFlood},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, b.New(t, BoundedGates), b)
		})
	}
}

func scope(i int) string { return fmt.Sprintf("host-%d.example", i) }

// closeGates closes the gates scope(0..n-1) of tenant, gate i until
// T0+(i+1) minutes.
func closeGates(t *testing.T, s store.Store, tenant string, n int) {
	t.Helper()
	for i := range n {
		g := store.GateKey{Tenant: tenant, Scope: scope(i)}
		until := T0.Add(time.Duration(i+1) * time.Minute)
		wantTime(t, "Observe", observe(t, s, g, store.Observation{CloseUntil: until}, T0), until)
	}
}

// wantClosed checks which of tenant's gates scope(0..n-1) are still closed
// at now, as their close times say (closed[i]), or forgotten (open).
func wantClosed(t *testing.T, s store.Store, tenant string, now time.Time, closed []bool) {
	t.Helper()
	for i, c := range closed {
		g := store.GateKey{Tenant: tenant, Scope: scope(i)}
		want := time.Time{}
		if c {
			want = T0.Add(time.Duration(i+1) * time.Minute)
		}
		wantTime(t, fmt.Sprintf("GateState of %s/%s", tenant, g.Scope), gateState(t, s, g, now), want)
	}
}

func wantAtMostBound(t *testing.T, s store.Store, b Bounded, tenant string) {
	t.Helper()
	if n := b.Gates(t, s, tenant); n > BoundedGates {
		t.Fatalf("tenant %s holds %d gates, bound %d", tenant, n, BoundedGates)
	}
}

// testBoundEvictsSoftSoonest: a tenant at the bound that needs a new gate
// loses, among its gates that hold no promise (soft state: breaker counts,
// a known quota with calls left, a learned quota), the one that frees
// soonest, never a closed gate nor another tenant's gate. When only
// closed gates are left, the new gate is not tracked, and the closed ones
// stay closed.
func testBoundEvictsSoftSoonest(t *testing.T, s store.Store, b Bounded) {
	closeGates(t, s, "acme", 4)
	closeGates(t, s, "globex", BoundedGates)
	// Soft gates, freeing in this order: two breaker counts (their 10 s
	// window), a known quota with calls left (its reset at T0+30 min), a
	// learned quota (its idle hour).
	for _, name := range []string{"counted-a", "counted-b"} {
		if st := bobserve(t, s, store.GateKey{Tenant: "acme", Scope: name}, store.ResultFailed, T0); !st.Open() {
			t.Fatalf("one failure opened the breaker: %+v", st)
		}
	}
	quotaGate := store.GateKey{Tenant: "acme", Scope: "quota"}
	knowQuota(t, s, quotaGate, T0, T0.Add(30*time.Minute))
	learned := store.GateKey{Tenant: "acme", Scope: "learned"}
	if a := admit(t, s, store.AdmitRequest{Gate: learned, Learning: learnOn, Now: T0}); !a.Admitted() || a.Ticket.Epoch == 0 {
		t.Fatalf("learning Admit = %+v", a)
	}
	wantAtMostBound(t, s, b, "acme")
	closed4 := []bool{true, true, true, true}
	wantClosed(t, s, "acme", T0, closed4)

	// Reading gates (GateState) creates none.
	for i := range 3 * BoundedGates {
		gateState(t, s, store.GateKey{Tenant: "acme", Scope: fmt.Sprintf("read-%d", i)}, T0)
	}
	mustRegister(t, s, quotaGate, T0)

	// Four new closed gates take the places of the four soft ones, soonest
	// to free first: the known quota goes third.
	long := T0.Add(time.Hour)
	fresh := func(i int) store.GateKey { return store.GateKey{Tenant: "acme", Scope: fmt.Sprintf("new-%d", i)} }
	for i := range 4 {
		wantTime(t, fmt.Sprintf("Observe on new gate %d", i), observe(t, s, fresh(i), store.Observation{CloseUntil: long}, T0), long)
		wantTime(t, fmt.Sprintf("new gate %d", i), gateState(t, s, fresh(i), T0), long)
		wantClosed(t, s, "acme", T0, closed4)
		wantAtMostBound(t, s, b, "acme")
		switch i {
		case 1:
			mustRegister(t, s, quotaGate, T0) // still known
		case 2:
			mustNotRegister(t, s, store.AdmitRequest{Gate: quotaGate, Now: T0}) // forgotten
		}
	}

	// Every gate of acme is closed now: a fifth new gate is not tracked (it
	// reads open), and no closed gate was given up for it.
	extra := store.GateKey{Tenant: "acme", Scope: "extra"}
	observe(t, s, extra, store.Observation{CloseUntil: long}, T0)
	wantTime(t, "an untracked gate", gateState(t, s, extra, T0), time.Time{})
	wantClosed(t, s, "acme", T0, closed4)
	for i := range 4 {
		wantTime(t, fmt.Sprintf("new gate %d", i), gateState(t, s, fresh(i), T0), long)
	}
	wantAtMostBound(t, s, b, "acme")
	wantClosed(t, s, "globex", T0, []bool{true, true, true, true, true, true, true, true})

	// At T0+2.5 min, gates 0 and 1 have reopened: two new gates take their
	// places; the gates still closed stay.
	now := T0.Add(2*time.Minute + 30*time.Second)
	for i := range 2 {
		g := store.GateKey{Tenant: "acme", Scope: fmt.Sprintf("later-%d", i)}
		until := now.Add(time.Hour)
		wantTime(t, "Observe at T0+2.5min", observe(t, s, g, store.Observation{CloseUntil: until}, now), until)
		wantTime(t, "a gate made at T0+2.5min", gateState(t, s, g, now), until)
	}
	wantClosed(t, s, "acme", now, []bool{false, false, true, true})
	wantAtMostBound(t, s, b, "acme")
	wantClosed(t, s, "globex", now, []bool{false, false, true, true, true, true, true, true})
}

// testBoundKeepsOpenBreaker: an open breaker is a promise too; once it is
// half-open, its gate is soft.
func testBoundKeepsOpenBreaker(t *testing.T, s store.Store, b Bounded) {
	flaky := store.GateKey{Tenant: "acme", Scope: "flaky"}
	opened := tripBreaker(t, s, flaky, T0)
	closeGates(t, s, "acme", BoundedGates-1)
	wantAtMostBound(t, s, b, "acme")
	extra := store.GateKey{Tenant: "acme", Scope: "extra"}
	long := T0.Add(time.Hour)
	at := opened.Add(brk.OpenFor / 2)
	observe(t, s, extra, store.Observation{CloseUntil: long}, at)
	wantTime(t, "an untracked gate", gateState(t, s, extra, at), time.Time{})
	mustBreakerOpen(t, s, flaky, at, opened.Add(brk.OpenFor))

	// Half-open after its open time: its gate may go for a new one.
	at = opened.Add(brk.OpenFor + time.Millisecond)
	wantTime(t, "Observe once the breaker is half-open", observe(t, s, extra, store.Observation{CloseUntil: long}, at), long)
	wantTime(t, "the new gate", gateState(t, s, extra, at), long)
	all := make([]bool, BoundedGates-1)
	for i := range all {
		all[i] = true
	}
	wantClosed(t, s, "acme", at, all)
	wantAtMostBound(t, s, b, "acme")
}

// testBoundKeepsPromisesThroughAFlood: a gate closed for an hour by a hint
// stays closed while its tenant reports b.Flood distinct hosts over 50
// minutes: a quarter of them closed for a minute by a hint (promises that
// take the free slots), the others soft state, some of which frees later
// than the provider's gate (a learned quota, a known quota with calls
// left), so that "soonest to free" alone would evict the provider's gate.
// The tenant never holds more than the bound, and another tenant's gate is
// untouched.
func testBoundKeepsPromisesThroughAFlood(t *testing.T, s store.Store, b Bounded) {
	provider := store.GateKey{Tenant: "acme", Scope: "api.provider.example"}
	other := store.GateKey{Tenant: "globex", Scope: "api.provider.example"}
	until := T0.Add(time.Hour)
	for _, g := range []store.GateKey{provider, other} {
		wantTime(t, "Observe a 1 h Retry-After", observe(t, s, g, store.Observation{CloseUntil: until}, T0), until)
	}
	span := 50 * time.Minute
	step := span / time.Duration(b.Flood)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for i := range b.Flood {
		now := T0.Add(time.Duration(i+1) * step)
		g := store.GateKey{Tenant: "acme", Scope: scope(i)}
		var err error
		switch i % 4 {
		case 0: // a promise: closed for a minute
			_, err = s.Observe(ctx, store.ObserveRequest{Gate: g, Obs: store.Observation{CloseUntil: now.Add(time.Minute)}, Now: now})
		case 1: // a breaker count, for its 10 s window
			_, err = s.Observe(ctx, store.ObserveRequest{Gate: g, Result: store.ResultFailed, Breaker: brk, Now: now})
		case 2: // a learned quota, for its idle hour: frees after the provider's gate
			_, err = s.Admit(ctx, store.AdmitRequest{Gate: g, Learning: learnOn, Now: now})
		case 3: // a known quota with calls left, until a reset in 90 minutes
			_, err = s.Observe(ctx, store.ObserveRequest{Gate: g, Obs: quota(plenty, now.Add(90*time.Minute)), Now: now})
		}
		if err != nil {
			t.Fatalf("flood host %d: %v", i, err)
		}
		if (i+1)%(b.Flood/10) == 0 {
			wantTime(t, fmt.Sprintf("the provider's gate after %d flood hosts", i+1), gateState(t, s, provider, now), until)
			wantAtMostBound(t, s, b, "acme")
		}
	}
	end := T0.Add(span)
	a := admit(t, s, store.AdmitRequest{Gate: provider, Now: end})
	wantTime(t, "Admit on the provider's gate after the flood: GateClosedUntil", a.GateClosedUntil, until)
	wantTime(t, "the other tenant's gate", gateState(t, s, other, end), until)
	wantAtMostBound(t, s, b, "acme")
}
