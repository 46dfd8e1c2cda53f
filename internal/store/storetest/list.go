package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/internal/store"
)

// listAll pages through tenant's live gates (Limit per page) and returns
// them, failing on a page larger than Limit or a listing that does not end.
func listAll(t *testing.T, l store.GateLister, tenant string, limit int, match func(store.GateInfo) bool, now time.Time) []store.ListedGate {
	t.Helper()
	var all []store.ListedGate
	after := ""
	for pages := 0; ; pages++ {
		if pages > 10_000 {
			t.Fatal("ListGates never ended")
		}
		p, err := l.ListGates(ctxT(t), store.ListGatesRequest{Tenant: tenant, After: after, Limit: limit, Match: match, Now: now})
		if err != nil {
			t.Fatalf("ListGates: %v", err)
		}
		if len(p.Gates) > limit {
			t.Fatalf("ListGates page of %d gates, limit %d", len(p.Gates), limit)
		}
		all = append(all, p.Gates...)
		if p.Next == "" {
			return all
		}
		if p.Next <= after {
			t.Fatalf("ListGates Next %q does not advance past %q", p.Next, after)
		}
		after = p.Next
	}
}

// testListGates: a tenant's live gates are listed, paged, each exactly
// once, with their state; another tenant's gates, and gates whose state
// has passed, are not; Match filters without counting against Limit.
func testListGates(t *testing.T, s store.Store) {
	l, ok := s.(store.GateLister)
	if !ok {
		t.Skipf("%T does not implement store.GateLister", s)
	}
	now := T0.Add(time.Second)
	closed := map[store.GateKey]time.Time{}
	for i, scope := range []string{"github", "api.example.com:8443", "a:b", "%41", "{x}", "héllo", "z"} {
		g := store.GateKey{Tenant: "acme", Scope: scope}
		if i%3 == 1 {
			g.Credential = fmt.Sprintf("fp%d", i)
		}
		until := T0.Add(time.Duration(i+1) * time.Minute)
		observe(t, s, g, store.Observation{CloseUntil: until}, T0)
		closed[g] = until
	}
	quota := store.GateKey{Tenant: "acme", Scope: "quota-only"}
	observe(t, s, quota, store.Observation{HasQuota: true, Remaining: 5, Reset: T0.Add(time.Hour)}, T0)
	gone := store.GateKey{Tenant: "acme", Scope: "gone"}
	observe(t, s, gone, store.Observation{CloseUntil: T0.Add(500 * time.Millisecond)}, T0)
	observe(t, s, other, store.Observation{CloseUntil: T0.Add(time.Hour)}, T0)

	for _, limit := range []int{1, 2, 3, store.MaxListGates} {
		all := listAll(t, l, "acme", limit, nil, now)
		seen := map[store.GateKey]bool{}
		for _, g := range all {
			if seen[g.Key] {
				t.Fatalf("limit %d: gate %+v listed twice", limit, g.Key)
			}
			seen[g.Key] = true
			switch {
			case g.Key == quota:
				if !g.Info.HasQuota || g.Info.Remaining != 5 || !g.Info.Status.ClosedUntil.IsZero() {
					t.Fatalf("limit %d: quota gate = %+v", limit, g.Info)
				}
			case !closed[g.Key].IsZero():
				wantTime(t, fmt.Sprintf("limit %d: %+v closed until", limit, g.Key), g.Info.Status.ClosedUntil, closed[g.Key])
			default:
				t.Fatalf("limit %d: listed %+v (%+v), which is not a live gate of acme", limit, g.Key, g.Info)
			}
		}
		if len(seen) != len(closed)+1 {
			t.Fatalf("limit %d: listed %d gates, want %d", limit, len(seen), len(closed)+1)
		}
	}

	onlyClosed := listAll(t, l, "acme", 2, func(i store.GateInfo) bool { return !i.Status.ClosedUntil.IsZero() }, now)
	if len(onlyClosed) != len(closed) {
		t.Fatalf("closed gates listed = %d, want %d", len(onlyClosed), len(closed))
	}
	if got := listAll(t, l, "nobody", 10, nil, now); len(got) != 0 {
		t.Fatalf("gates of an unknown tenant = %+v", got)
	}
	// A position past every gate lists nothing.
	p, err := l.ListGates(ctxT(t), store.ListGatesRequest{Tenant: "acme", After: "~~~~:", Limit: 10, Now: now})
	if err != nil || len(p.Gates) != 0 || p.Next != "" {
		t.Fatalf("ListGates after the end = %+v, %v", p, err)
	}
}

// FillGates closes n gates of tenant at T0, until T0 + 1 h, with scopes
// "host-0000000.example" and up, from 16 goroutines; it fails tb on the
// first error. Tests and benchmarks of listings use it.
func FillGates(tb testing.TB, s store.Store, tenant string, n int) {
	tb.Helper()
	errs := make(chan error, 16)
	for w := range 16 {
		go func() {
			var err error
			for i := w; i < n && err == nil; i += 16 {
				g := store.GateKey{Tenant: tenant, Scope: fmt.Sprintf("host-%07d.example", i)}
				_, err = s.Observe(context.Background(), store.ObserveRequest{Gate: g, Obs: store.Observation{CloseUntil: T0.Add(time.Hour)}, Now: T0})
			}
			errs <- err
		}()
	}
	for range 16 {
		if err := <-errs; err != nil {
			tb.Fatalf("Observe: %v", err)
		}
	}
}

// ListEvery pages through every live gate of tenant at now, limit gates
// per page, and returns them and the number of pages.
func ListEvery(ctx context.Context, l store.GateLister, tenant string, limit int, now time.Time) ([]store.ListedGate, int, error) {
	var all []store.ListedGate
	after := ""
	for pages := 1; ; pages++ {
		p, err := l.ListGates(ctx, store.ListGatesRequest{Tenant: tenant, After: after, Limit: limit, Now: now})
		if err != nil {
			return all, pages, err
		}
		all = append(all, p.Gates...)
		if p.Next == "" {
			return all, pages, nil
		}
		if p.Next <= after {
			return all, pages, fmt.Errorf("page %d: Next %q does not advance past %q", pages, p.Next, after)
		}
		after = p.Next
	}
}

// CheckListedOnce fails tb unless gates are the n gates FillGates made
// for tenant, each exactly once and closed.
func CheckListedOnce(tb testing.TB, gates []store.ListedGate, tenant string, n int) {
	tb.Helper()
	seen := make(map[string]bool, n)
	for _, g := range gates {
		if g.Key.Tenant != tenant || seen[g.Key.Scope] || g.Info.Status.ClosedUntil.IsZero() {
			tb.Fatalf("listed %+v (%+v): another tenant's, twice, or not closed", g.Key, g.Info)
		}
		seen[g.Key.Scope] = true
	}
	if len(seen) != n {
		tb.Fatalf("listed %d distinct gates, want %d", len(seen), n)
	}
}

// testListGatesShowsState: what a listing shows of each gate (learned
// quota, calls in flight, breaker, quota) is what InspectGate shows.
func testListGatesShowsState(t *testing.T, s store.Store) {
	l, ok := s.(store.GateLister)
	in, ok2 := s.(store.Inspector)
	if !ok || !ok2 {
		t.Skipf("%T does not implement store.GateLister and store.Inspector", s)
	}
	learned := store.GateKey{Tenant: "acme", Scope: "learned"}
	_, reopen := learnQuota(t, s, learned, T0, 5, 2) // L = 3
	mustPassLearned(t, s, learned, reopen, 0)
	broken := store.GateKey{Tenant: "acme", Scope: "broken", Credential: "fp"}
	var tickets []store.Ticket
	for i := range 4 {
		tickets = append(tickets, bpass(t, s, broken, reopen.Add(ms(i))))
	}
	for i, tk := range tickets {
		bcomplete(t, s, broken, tk, store.ResultFailed, reopen.Add(ms(10+i)))
	}
	quota := store.GateKey{Tenant: "acme", Scope: "quota"}
	mustAdmit(t, s, quota, reopen)
	observe(t, s, quota, store.Observation{HasQuota: true, Remaining: 1, Reset: reopen.Add(time.Hour)}, reopen)
	mustAdmit(t, s, quota, reopen.Add(ms(1)))

	at := reopen.Add(ms(20))
	all := listAll(t, l, "acme", 2, nil, at)
	got := map[store.GateKey]store.GateInfo{}
	for _, g := range all {
		got[g.Key] = g.Info
		want, err := in.InspectGate(ctxT(t), g.Key, at)
		if err != nil {
			t.Fatal(err)
		}
		if g.Info != want {
			t.Fatalf("listed %+v as %+v; InspectGate shows %+v", g.Key, g.Info, want)
		}
	}
	if i := got[learned]; !i.Learned || i.LearnedQuota != 3 || i.InFlight != 1 {
		t.Fatalf("learned gate listed as %+v", i)
	}
	if i := got[broken]; i.Status.BreakerOpenUntil.IsZero() {
		t.Fatalf("broken gate listed as %+v", i)
	}
	if i := got[quota]; !i.HasQuota || i.InFlight != 1 || i.Status.ClosedUntil.IsZero() {
		t.Fatalf("quota gate listed as %+v", i)
	}
	learning := listAll(t, l, "acme", 1, func(i store.GateInfo) bool { return i.Learning }, at)
	if len(learning) != 1 || learning[0].Key != learned {
		t.Fatalf("learning gates = %+v", learning)
	}
}
