package store_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrybroker/retrybroker/internal/store"
	"github.com/retrybroker/retrybroker/internal/store/memstore"
	"github.com/retrybroker/retrybroker/internal/store/redisstore"
	"github.com/retrybroker/retrybroker/internal/store/redistest"
)

// cmdCounter is a go-redis hook that counts the commands a client sends:
// round trips, since the store sends no pipelines.
type cmdCounter struct{ n atomic.Int64 }

func (c *cmdCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *cmdCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

func (c *cmdCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// newRedis returns a Redis store on a fresh loopback redis-server, and the
// counter of the commands its client sends.
func newRedis(b *testing.B) (store.Store, *cmdCounter) {
	o, err := redis.ParseURL(redistest.Start(b))
	if err != nil {
		b.Fatal(err)
	}
	o.DisableIdentity = true
	client := redis.NewClient(o)
	cnt := &cmdCounter{}
	client.AddHook(cnt)
	rs, err := redisstore.NewFromClient(client)
	if err != nil {
		b.Fatal(err)
	}
	return rs, cnt
}

type benchBackend struct {
	name string
	new  func(b *testing.B) (store.Store, *cmdCounter) // nil counter: not Redis
}

func benchBackends(fallback bool) []benchBackend {
	bes := []benchBackend{
		{"memory", func(*testing.B) (store.Store, *cmdCounter) { return memstore.New(), nil }},
		{"redis", newRedis},
	}
	if fallback {
		bes = append(bes, benchBackend{"fallback_redis", func(b *testing.B) (store.Store, *cmdCounter) {
			rs, cnt := newRedis(b)
			f := store.NewFallback(rs, memstore.New(), store.WithPrimaryTimeout(10*time.Second))
			b.Cleanup(func() {
				if f.Degraded() {
					b.Error("the Fallback degraded: the numbers are not Redis's")
				}
			})
			return f, cnt
		}})
	}
	return bes
}

// benchModes are the two costs of an attempt: on a gate without a known
// quota, whose response reports nothing and that spends no retry, Admit
// alone (it registers nothing, the engine skips Complete); on a gate with a
// known quota, Admit (registers) and Complete (ends the registration,
// records the response's quota, spends a retry one time in ten).
var benchModes = []struct {
	name  string
	quota bool
}{
	{"admit_only_no_quota", false},
	{"admit_complete_quota", true},
}

// reportCalls reports store calls and, for Redis, commands (round trips)
// per attempt. warm is the command count before the measured loop.
func reportCalls(b *testing.B, n, calls int64, cnt *cmdCounter, warm int64) {
	if n == 0 {
		return
	}
	b.ReportMetric(float64(calls)/float64(n), "storecalls/op")
	if cnt != nil {
		b.ReportMetric(float64(cnt.n.Load()-warm)/float64(n), "rediscmds/op")
	}
}

// BenchmarkAdmitComplete measures one attempt's store work on each backend
// (the Redis ones on a real loopback redis-server), with pacing and a retry
// budget, in both benchModes.
func BenchmarkAdmitComplete(b *testing.B) {
	for _, be := range benchBackends(true) {
		for _, mode := range benchModes {
			b.Run(be.name+"/"+mode.name, func(b *testing.B) {
				s, cnt := be.new(b)
				defer s.Close()
				ctx := context.Background()
				g := store.GateKey{Tenant: "acme", Scope: "github", Credential: "0123456789abcdef"}
				budget := store.DefaultBudget()
				now := t0
				quota := func(now time.Time) store.Observation {
					return store.Observation{HasQuota: true, Remaining: 4000, Reset: now.Add(time.Hour)}
				}
				admit := func(now time.Time) store.Admission {
					a, err := s.Admit(ctx, store.AdmitRequest{
						Gate: g, PaceHost: "api.github.com", Pace: store.PaceConfig{Rate: 1e6, Burst: 100}, PaceMaxWait: time.Second,
						FirstAttempt: true, Budget: budget, Now: now,
					})
					if err != nil || !a.Admitted() || (a.Ticket.ID != "") != mode.quota {
						b.Fatalf("Admit = %+v, %v; want admitted, registered: %v", a, err, mode.quota)
					}
					return a
				}
				// Warm up (load the scripts) on another gate; make the quota known.
				if _, err := s.Admit(ctx, store.AdmitRequest{Gate: store.GateKey{Tenant: "warm"}, Now: now}); err != nil {
					b.Fatal(err)
				}
				if _, err := s.Complete(ctx, store.CompleteRequest{Gate: store.GateKey{Tenant: "warm"}, Now: now}); err != nil {
					b.Fatal(err)
				}
				if mode.quota {
					if _, err := s.Observe(ctx, store.ObserveRequest{Gate: g, Obs: quota(now), Now: now}); err != nil {
						b.Fatal(err)
					}
				}
				var warm int64
				if cnt != nil {
					warm = cnt.n.Load()
				}
				var n, calls int64
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					now = now.Add(10 * time.Microsecond)
					a := admit(now)
					n++
					calls++
					if !mode.quota {
						continue // empty ticket, nothing to observe, no retry: no Complete
					}
					if _, err := s.Complete(ctx, store.CompleteRequest{
						Gate: g, Ticket: a.Ticket, SpendRetry: i%10 == 0, Budget: budget, Now: now, Obs: quota(now),
					}); err != nil {
						b.Fatal(err)
					}
					calls++
				}
				reportCalls(b, n, calls, cnt, warm)
			})
		}
	}
}

// BenchmarkAdmitCompleteParallel is BenchmarkAdmitComplete (without pacing)
// from many goroutines, each on its own gate of one tenant.
func BenchmarkAdmitCompleteParallel(b *testing.B) {
	for _, be := range benchBackends(false) {
		for _, mode := range benchModes {
			b.Run(be.name+"/"+mode.name, func(b *testing.B) {
				s, cnt := be.new(b)
				defer s.Close()
				ctx := context.Background()
				// Warm up: load the scripts.
				if _, err := s.Admit(ctx, store.AdmitRequest{Gate: store.GateKey{Tenant: "warm"}}); err != nil {
					b.Fatal(err)
				}
				if _, err := s.Complete(ctx, store.CompleteRequest{Gate: store.GateKey{Tenant: "warm"}}); err != nil {
					b.Fatal(err)
				}
				var warm int64
				if cnt != nil {
					warm = cnt.n.Load()
				}
				var gates, n, calls atomic.Int64
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					g := store.GateKey{Tenant: "acme", Scope: fmt.Sprintf("api-%d.example", gates.Add(1))}
					obs := store.Observation{}
					if mode.quota {
						obs = store.Observation{HasQuota: true, Remaining: 4000, Reset: time.Now().Add(time.Hour)}
						if _, err := s.Observe(ctx, store.ObserveRequest{Gate: g, Obs: obs, Now: time.Now()}); err != nil {
							b.Error(err)
							return
						}
					}
					var myN, myCalls int64
					for pb.Next() {
						now := time.Now()
						a, err := s.Admit(ctx, store.AdmitRequest{Gate: g, FirstAttempt: true, Budget: store.DefaultBudget(), Now: now})
						if err != nil || !a.Admitted() || (a.Ticket.ID != "") != mode.quota {
							b.Errorf("Admit = %+v, %v; want admitted, registered: %v", a, err, mode.quota)
							return
						}
						myN++
						myCalls++
						if !mode.quota {
							continue // empty ticket, nothing to observe, no retry: no Complete
						}
						if _, err := s.Complete(ctx, store.CompleteRequest{Gate: g, Ticket: a.Ticket, Obs: obs, Now: now}); err != nil {
							b.Error(err)
							return
						}
						myCalls++
					}
					n.Add(myN)
					calls.Add(myCalls)
				})
				setup := int64(0)
				if mode.quota {
					setup = gates.Load() // one Observe per goroutine, not part of an attempt
				}
				reportCalls(b, n.Load(), calls.Load(), cnt, warm+setup)
			})
		}
	}
}
