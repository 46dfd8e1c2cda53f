package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/internal/store"
	"github.com/retrybroker/retrybroker/internal/store/memstore"
	"github.com/retrybroker/retrybroker/internal/store/redisstore"
	"github.com/retrybroker/retrybroker/internal/store/redistest"
)

func newRedis(b *testing.B) store.Store {
	rs, err := redisstore.New(context.Background(), redistest.Start(b))
	if err != nil {
		b.Fatal(err)
	}
	return rs
}

// BenchmarkAdmitComplete measures one attempt's store work, Admit then
// Complete, with pacing, a retry budget and a quota observation, on each
// backend (the Redis ones on a real loopback redis-server).
func BenchmarkAdmitComplete(b *testing.B) {
	backends := []struct {
		name string
		new  func(b *testing.B) store.Store
	}{
		{"memory", func(*testing.B) store.Store { return memstore.New() }},
		{"redis", newRedis},
		{"fallback_redis", func(b *testing.B) store.Store {
			f := store.NewFallback(newRedis(b), memstore.New(), store.WithPrimaryTimeout(10*time.Second))
			b.Cleanup(func() {
				if f.Degraded() {
					b.Error("the Fallback degraded: the numbers are not Redis's")
				}
			})
			return f
		}},
	}
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			s := be.new(b)
			defer s.Close()
			ctx := context.Background()
			g := store.GateKey{Tenant: "acme", Scope: "github", Credential: "0123456789abcdef"}
			budget := store.DefaultBudget()
			now := t0
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				now = now.Add(10 * time.Microsecond)
				a, err := s.Admit(ctx, store.AdmitRequest{
					Gate: g, PaceHost: "api.github.com", Pace: store.PaceConfig{Rate: 1e6, Burst: 100}, PaceMaxWait: time.Second,
					FirstAttempt: true, Budget: budget, Now: now,
				})
				if err != nil || !a.Admitted() {
					b.Fatalf("Admit = %+v, %v", a, err)
				}
				_, err = s.Complete(ctx, store.CompleteRequest{
					Gate: g, Ticket: a.Ticket, SpendRetry: i%10 == 0, Budget: budget, Now: now,
					Obs: store.Observation{HasQuota: true, Remaining: 4000, Reset: now.Add(time.Hour)},
				})
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAdmitCompleteParallel is BenchmarkAdmitComplete from many
// goroutines on distinct gates of one tenant.
func BenchmarkAdmitCompleteParallel(b *testing.B) {
	for _, be := range []struct {
		name string
		new  func(b *testing.B) store.Store
	}{
		{"memory", func(*testing.B) store.Store { return memstore.New() }},
		{"redis", newRedis},
	} {
		b.Run(be.name, func(b *testing.B) {
			s := be.new(b)
			defer s.Close()
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				g := store.GateKey{Tenant: "acme", Scope: "github"}
				for pb.Next() {
					now := time.Now()
					a, err := s.Admit(ctx, store.AdmitRequest{Gate: g, FirstAttempt: true, Budget: store.DefaultBudget(), Now: now})
					if err != nil {
						b.Fatal(err)
					}
					if _, err := s.Complete(ctx, store.CompleteRequest{Gate: g, Ticket: a.Ticket, Now: now}); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
