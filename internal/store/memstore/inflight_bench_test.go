package memstore_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/internal/store"
	"github.com/retrybroker/retrybroker/internal/store/memstore"
)

// BenchmarkAdmitCompleteInFlight is one attempt's Admit and Complete on a
// gate with a known quota (GitHub's headers) while n other calls are in
// flight on it: what each call costs, under the store's one lock, when a
// few hundred callers share one provider's quota.
func BenchmarkAdmitCompleteInFlight(b *testing.B) {
	for _, n := range []int{0, 16, 256, 4096} {
		b.Run("inflight="+strconv.Itoa(n), func(b *testing.B) {
			s := memstore.New()
			defer s.Close()
			ctx := context.Background()
			g := store.GateKey{Tenant: "acme", Scope: "api.github.com", Credential: "0123456789abcdef"}
			now := time.Unix(1_800_000_000, 0)
			obs := store.Observation{HasQuota: true, Remaining: 1 << 40, Reset: now.Add(time.Hour)}
			if _, err := s.Observe(ctx, store.ObserveRequest{Gate: g, Obs: obs, Now: now}); err != nil {
				b.Fatal(err)
			}
			admit := func(now time.Time) store.Admission {
				a, err := s.Admit(ctx, store.AdmitRequest{Gate: g, FirstAttempt: true, Budget: store.DefaultBudget(), Now: now})
				if err != nil || !a.Admitted() || a.Ticket.ID == "" {
					b.Fatalf("Admit = %+v, %v; want admitted against the known quota", a, err)
				}
				return a
			}
			for range n { // the calls in flight, never completed here
				admit(now)
			}
			if got, _ := s.InFlight(ctx, g, now); got != int64(n) {
				b.Fatalf("in flight %d, want %d", got, n)
			}
			b.ReportAllocs()
			for b.Loop() {
				now = now.Add(time.Microsecond)
				a := admit(now)
				if _, err := s.Complete(ctx, store.CompleteRequest{Gate: g, Ticket: a.Ticket, Budget: store.DefaultBudget(), Now: now, Obs: obs}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
