package redisstore_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/internal/store"
	"github.com/retrybroker/retrybroker/internal/store/redisstore"
	"github.com/retrybroker/retrybroker/internal/store/redistest"
	"github.com/retrybroker/retrybroker/internal/store/storetest"
)

// BenchmarkObserveDistinctGatesPastPromises measures, on a real
// redis-server, new gates of one tenant at the default bound whose gates
// are 90 % promises (9,000 closed for an hour, 1,000 soft learned
// quotas): each new gate (soft: a breaker count) needs room, and every
// 1/16 of the bound a trim pass reads the index in score order, past the
// closed gates, to find soft ones. It reports the slowest script the
// server logged (slowMs), that is, one trim pass.
func BenchmarkObserveDistinctGatesPastPromises(b *testing.B) {
	url := redistest.Start(b)
	s, err := redisstore.New(context.Background(), url, redisstore.WithRedisOptions(patient))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	t0 := storetest.T0
	for i := range redisstore.DefaultMaxGatesPerTenant {
		g := store.GateKey{Tenant: "acme", Scope: fmt.Sprint("h", i)}
		if i < redisstore.DefaultMaxGatesPerTenant*9/10 {
			_, err = s.Observe(ctx, store.ObserveRequest{Gate: g, Obs: store.Observation{CloseUntil: t0.Add(time.Hour)}, Now: t0})
		} else {
			_, err = s.Admit(ctx, store.AdmitRequest{Gate: g, Learning: store.LearningConfig{Enabled: true}, Now: t0})
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	c := rawClient(b, url)
	c.ConfigSet(ctx, "slowlog-log-slower-than", "1000")
	c.ConfigSet(ctx, "slowlog-max-len", "100000")
	c.SlowLogReset(ctx)
	breaker := store.DefaultBreaker()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		now := t0.Add(time.Duration(i) * time.Microsecond)
		if _, err := s.Observe(ctx, store.ObserveRequest{
			Gate: store.GateKey{Tenant: "acme", Scope: "n" + strconv.Itoa(i)}, Result: store.ResultFailed, Breaker: breaker, Now: now,
		}); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.StopTimer()
	var slow time.Duration
	for _, e := range c.SlowLogGet(ctx, 100000).Val() {
		slow = max(slow, e.Duration)
	}
	b.ReportMetric(float64(slow)/float64(time.Millisecond), "slowMs")
	if n, err := s.Gates(ctx, "acme"); err != nil || n > redisstore.DefaultMaxGatesPerTenant {
		b.Fatalf("index holds %d gates (%v), bound %d", n, err, redisstore.DefaultMaxGatesPerTenant)
	}
}
