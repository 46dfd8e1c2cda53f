package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/retrybroker/retrybroker/internal/store"
	"github.com/retrybroker/retrybroker/internal/store/memstore"
	"github.com/retrybroker/retrybroker/internal/store/storetest"
)

func TestSuite(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s := memstore.New()
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

func TestSuiteBounded(t *testing.T) {
	storetest.RunBounded(t, storetest.Bounded{
		New: func(t *testing.T, maxGates int) store.Store {
			s := memstore.New(memstore.WithMaxGatesPerTenant(maxGates))
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
		Gates: func(_ *testing.T, s store.Store, tenant string) int { return s.(*memstore.Store).Gates(tenant) },
	})
}

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestSweepBoundsGrowth fills the store with state for many tenants and
// checks that all of it is dropped once it expired.
func TestSweepBoundsGrowth(t *testing.T) {
	s := memstore.New()
	defer s.Close()
	ctx := context.Background()
	t0 := storetest.T0
	for i := range 1000 {
		g := store.GateKey{Tenant: fmt.Sprintf("t%d", i), Scope: "github"}
		// A known quota (for 30 s), so that the attempt is registered.
		if _, err := s.Observe(ctx, store.ObserveRequest{Gate: g, Obs: store.Observation{HasQuota: true, Remaining: 100, Reset: t0.Add(30 * time.Second)}, Now: t0}); err != nil {
			t.Fatal(err)
		}
		a, err := s.Admit(ctx, store.AdmitRequest{
			Gate: g, PaceHost: "h", Pace: store.PaceConfig{Rate: 1},
			FirstAttempt: true, Budget: store.DefaultBudget(), Now: t0,
		})
		if err != nil || !a.Admitted() || a.Ticket.ID == "" {
			t.Fatalf("Admit = %+v, %v; want admitted and registered", a, err)
		}
		if i%2 == 0 { // half the tickets are never completed
			if _, err := s.Complete(ctx, store.CompleteRequest{
				Gate: g, Ticket: a.Ticket, Now: t0,
				Obs: store.Observation{CloseUntil: t0.Add(time.Minute)},
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := s.Len(); n != 3000 {
		t.Fatalf("Len = %d, want 3000 (gates, pacing, budgets)", n)
	}
	// After the gates reopened, the pacing slots passed and the budget
	// windows slid by, only gates with live tickets remain.
	if _, err := s.GateState(ctx, store.GateKey{}, t0.Add(90*time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Observe(ctx, store.ObserveRequest{Gate: store.GateKey{Tenant: "x"}, Obs: store.Observation{}, Now: t0.Add(90 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	if n := s.Len(); n != 500 {
		t.Fatalf("Len = %d after 90 s, want 500 (gates with tickets still in flight)", n)
	}
	if _, err := s.Observe(ctx, store.ObserveRequest{Gate: store.GateKey{Tenant: "x"}, Obs: store.Observation{}, Now: t0.Add(store.DefaultTicketTTL + time.Second)}); err != nil {
		t.Fatal(err)
	}
	if n := s.Len(); n != 0 {
		t.Fatalf("Len = %d after the tickets expired, want 0", n)
	}
}

// TestUnregisteredAdmitsKeepNoGate checks that attempts admitted on gates
// without a known quota leave no gate behind: only pacing and budgets,
// which expire.
func TestUnregisteredAdmitsKeepNoGate(t *testing.T) {
	s := memstore.New()
	defer s.Close()
	ctx := context.Background()
	t0 := storetest.T0
	for i := range 1000 {
		g := store.GateKey{Tenant: fmt.Sprintf("t%d", i), Scope: "github"}
		a, err := s.Admit(ctx, store.AdmitRequest{
			Gate: g, PaceHost: "h", Pace: store.PaceConfig{Rate: 1},
			FirstAttempt: true, Budget: store.DefaultBudget(), Now: t0,
		})
		if err != nil || !a.Admitted() || a.Ticket.ID != "" {
			t.Fatalf("Admit = %+v, %v; want admitted with an empty ticket", a, err)
		}
	}
	if n := s.Len(); n != 2000 {
		t.Fatalf("Len = %d, want 2000 (pacing, budgets; no gates)", n)
	}
	if _, err := s.Observe(ctx, store.ObserveRequest{Gate: store.GateKey{Tenant: "x"}, Obs: store.Observation{}, Now: t0.Add(90 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	if n := s.Len(); n != 0 {
		t.Fatalf("Len = %d after the pacing slots passed and the budget windows slid by, want 0", n)
	}
}

func TestWithTicketTTL(t *testing.T) {
	s := memstore.New(memstore.WithTicketTTL(time.Second))
	defer s.Close()
	ctx := context.Background()
	g := store.GateKey{Tenant: "acme"}
	t0 := storetest.T0
	reset := t0.Add(time.Hour)
	// A known quota of 1: the attempt is registered and uses it up.
	if _, err := s.Observe(ctx, store.ObserveRequest{Gate: g, Obs: store.Observation{HasQuota: true, Remaining: 1, Reset: reset}, Now: t0}); err != nil {
		t.Fatal(err)
	}
	if a, err := s.Admit(ctx, store.AdmitRequest{Gate: g, Now: t0}); err != nil || a.Ticket.ID == "" {
		t.Fatalf("Admit = %+v, %v; want registered", a, err)
	}
	if until, _ := s.GateState(ctx, g, t0.Add(time.Second-time.Microsecond)); !until.ClosedUntil.Equal(reset) {
		t.Fatal("ticket not in flight before its 1 s TTL")
	}
	if until, _ := s.GateState(ctx, g, t0.Add(time.Second)); !until.ClosedUntil.IsZero() {
		t.Fatal("ticket still in flight after its 1 s TTL")
	}
}

func TestClose(t *testing.T) {
	s := memstore.New()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Admit(context.Background(), store.AdmitRequest{}); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Admit after Close: %v", err)
	}
	if _, err := s.Complete(context.Background(), store.CompleteRequest{}); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("Complete after Close: %v", err)
	}
}

// TestSweepQuota checks that gates holding only a known quota are dropped
// once its window reset.
func TestSweepQuota(t *testing.T) {
	s := memstore.New()
	defer s.Close()
	ctx := context.Background()
	t0 := storetest.T0
	for i := range 100 {
		g := store.GateKey{Tenant: "acme", Scope: fmt.Sprintf("s%d", i)}
		if _, err := s.Observe(ctx, store.ObserveRequest{Gate: g, Obs: store.Observation{HasQuota: true, Remaining: 5, Reset: t0.Add(time.Minute)}, Now: t0}); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.Len(); n != 100 {
		t.Fatalf("Len = %d, want 100 gates with a known quota", n)
	}
	if _, err := s.GateState(ctx, store.GateKey{}, t0.Add(30*time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Observe(ctx, store.ObserveRequest{Gate: store.GateKey{Tenant: "x"}, Obs: store.Observation{}, Now: t0.Add(30 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	if n := s.Len(); n != 100 {
		t.Fatalf("Len = %d before the reset, want 100", n)
	}
	if _, err := s.Observe(ctx, store.ObserveRequest{Gate: store.GateKey{Tenant: "x"}, Obs: store.Observation{}, Now: t0.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if n := s.Len(); n != 0 {
		t.Fatalf("Len = %d after the reset, want 0", n)
	}
}
