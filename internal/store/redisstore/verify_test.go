package redisstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrybroker/retrybroker/internal/store"
	"github.com/retrybroker/retrybroker/internal/store/redisstore"
	"github.com/retrybroker/retrybroker/internal/store/redistest"
)

// verifyAtOnce opens n stores on cfg (n replicas) and runs Verify on all of
// them at the same moment, several rounds; every run must pass.
func verifyAtOnce(t *testing.T, cfg redisstore.Config, n, rounds int) {
	t.Helper()
	stores := make([]*redisstore.Store, n)
	for i := range stores {
		stores[i] = open(t, cfg)
	}
	for round := range rounds {
		start := make(chan struct{})
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i, s := range stores {
			wg.Go(func() {
				<-start
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				errs[i] = s.Verify(ctx)
			})
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("round %d: replica %d of %d: Verify: %v", round, i, n, err)
			}
		}
	}
}

// TestVerifyConcurrentReplicas: replicas that verify at the same moment on
// one server (and on a 3-master cluster) all pass, because each verifies
// on reserved keys of its own. Before, they shared the reserved tenant's
// budget and pacing keys, and all but the first failed with "unexpected
// results" (a retry refused by the budget, an attempt paced).
func TestVerifyConcurrentReplicas(t *testing.T) {
	t.Run("single", func(t *testing.T) {
		srv := redistest.StartServer(t)
		verifyAtOnce(t, redisstore.Config{URL: srv.URL()}, 4, 3)
		// Every reserved key expires: within seconds, the gate index
		// within the ticket TTL (an attempt's registration).
		c := redis.NewClient(&redis.Options{Addr: srv.Addr(), DisableIdentity: true})
		defer c.Close()
		ctx := context.Background()
		keys, err := c.Keys(ctx, "rb:v1:{t:%00verify-*").Result()
		if err != nil || len(keys) == 0 {
			t.Fatalf("verification keys %q: %v", keys, err)
		}
		for _, k := range keys {
			ttl, err := c.PTTL(ctx, k).Result()
			if err != nil || ttl <= 0 || ttl > store.DefaultTicketTTL+time.Minute {
				t.Errorf("key %s: TTL %v (%v), want one within the ticket TTL", k, ttl, err)
			}
		}
	})
	t.Run("cluster-3-masters", func(t *testing.T) {
		c := cluster3.Get(t)
		verifyAtOnce(t, redisstore.Config{ClusterAddrs: c.Addrs(), Username: redistest.UserBroker, Password: c.BrokerPassword()}, 4, 3)
	})
	t.Run("one replica, overlapping runs", func(t *testing.T) {
		// A recovery probe and a check may overlap in one process.
		srv := redistest.StartServer(t)
		s := open(t, redisstore.Config{URL: srv.URL()})
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				errs[i] = s.Verify(ctx)
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("run %d: Verify: %v", i, err)
			}
		}
	})
}
