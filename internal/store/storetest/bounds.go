package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/internal/store"
)

// BoundedGates is the per-tenant gate bound the stores of RunBounded are
// made with: small, so that the bound's eviction shows (1/16 of it rounds
// up to one gate evicted at a time).
const BoundedGates = 8

// RunBounded runs the tests of the per-tenant gate bound. newStore returns
// a fresh, empty store that holds at most maxGates gates per tenant (and
// uses store.DefaultTicketTTL); it arranges for closing it.
func RunBounded(t *testing.T, newStore func(t *testing.T, maxGates int) store.Store) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"EvictsSoonestToFree", testBoundEvictsSoonest},
		{"CountsEveryKindOfState", testBoundCountsEveryKind},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newStore(t, BoundedGates))
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

// testBoundEvictsSoonest: a tenant at the bound that needs a new gate
// loses the gate that frees soonest (expired gates first), never another
// tenant's.
func testBoundEvictsSoonest(t *testing.T, s store.Store) {
	closeGates(t, s, "acme", BoundedGates)
	closeGates(t, s, "globex", BoundedGates)
	all := make([]bool, BoundedGates)
	for i := range all {
		all[i] = true
	}
	wantClosed(t, s, "acme", T0, all)

	// A new gate of acme: acme's gate 0 (closed for a minute) goes.
	fresh := store.GateKey{Tenant: "acme", Scope: "new"}
	long := T0.Add(time.Hour)
	wantTime(t, "Observe on a new gate", observe(t, s, fresh, store.Observation{CloseUntil: long}, T0), long)
	wantTime(t, "the new gate", gateState(t, s, fresh, T0), long)
	want := append([]bool(nil), all...)
	want[0] = false
	wantClosed(t, s, "acme", T0, want)
	wantClosed(t, s, "globex", T0, all)

	// Another: gate 1 goes. Reading gates (GateState) creates none.
	for i := range 3 * BoundedGates {
		gateState(t, s, store.GateKey{Tenant: "acme", Scope: fmt.Sprintf("read-%d", i)}, T0)
	}
	wantClosed(t, s, "acme", T0, want)
	observe(t, s, store.GateKey{Tenant: "acme", Scope: "new2"}, store.Observation{CloseUntil: long}, T0)
	want[1] = false
	wantClosed(t, s, "acme", T0, want)

	// At T0+4.5 min, gates 2 and 3 (and 0, 1) have reopened: two new gates
	// take their places, and the gates still closed stay.
	now := T0.Add(4*time.Minute + 30*time.Second)
	want[2], want[3] = false, false
	for i := range 2 {
		g := store.GateKey{Tenant: "acme", Scope: fmt.Sprintf("later-%d", i)}
		until := now.Add(time.Hour)
		wantTime(t, "Observe at T0+4.5min", observe(t, s, g, store.Observation{CloseUntil: until}, now), until)
	}
	wantClosed(t, s, "acme", now, want)
	wantTime(t, "the first new gate", gateState(t, s, fresh, now), long)
	wantClosed(t, s, "globex", now, []bool{false, false, false, false, true, true, true, true})
}

// testBoundCountsEveryKindOfState: learned quotas, breakers and known
// quotas are gates too, bounded alike.
func testBoundCountsEveryKind(t *testing.T, s store.Store) {
	closeGates(t, s, "acme", BoundedGates)
	// A learning Admit, a breaker count and a known quota each need a gate
	// of their own: they push out gates 0, 1 and 2 (the breaker's counts, kept for
	// the 10 s window, would free soonest after that).
	if a := admit(t, s, store.AdmitRequest{Gate: store.GateKey{Tenant: "acme", Scope: "learned"}, Learning: learnOn, Now: T0}); !a.Admitted() || a.Ticket.Epoch == 0 {
		t.Fatalf("learning Admit = %+v", a)
	}
	want := []bool{false, true, true, true, true, true, true, true}
	wantClosed(t, s, "acme", T0, want)
	knowQuota(t, s, store.GateKey{Tenant: "acme", Scope: "quota"}, T0, T0.Add(time.Hour))
	want[1] = false
	wantClosed(t, s, "acme", T0, want)
	if st := bobserve(t, s, store.GateKey{Tenant: "acme", Scope: "counted"}, store.ResultFailed, T0); !st.Open() {
		t.Fatalf("Observe = %+v", st)
	}
	want[2] = false
	wantClosed(t, s, "acme", T0, want)
	// Known to the tenant's bound, not to another tenant's: globex's first
	// gate takes nothing from acme.
	observe(t, s, store.GateKey{Tenant: "globex", Scope: "x"}, store.Observation{CloseUntil: T0.Add(time.Hour)}, T0)
	wantClosed(t, s, "acme", T0, want)
	// The gates created still hold their state: the known quota registers.
	mustRegister(t, s, store.GateKey{Tenant: "acme", Scope: "quota"}, T0)
}
