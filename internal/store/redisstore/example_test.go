package redisstore_test

import (
	"context"
	"log"

	"github.com/retrybroker/retrybroker/internal/store"
	"github.com/retrybroker/retrybroker/internal/store/memstore"
	"github.com/retrybroker/retrybroker/internal/store/redisstore"
)

// New never fails because Redis is down; wrap the store in a Fallback so
// that an outage degrades the broker instead of failing its calls.
func ExampleNew() {
	ctx := context.Background()
	rs, err := redisstore.New(ctx, "redis://:password@redis.internal:6379/0?dial_timeout=250ms")
	if err != nil {
		log.Fatal(err) // only an invalid URL; the message has the password redacted
	}
	st := store.NewFallback(rs, memstore.New())
	defer st.Close()
	_ = st // pass to the engine
}

// Open reaches a Redis Cluster from its seed nodes (a managed service in
// cluster mode is one). Verify at start names a misconfiguration (a wrong
// password, missing ACL permissions, a full Redis) instead of leaving it to
// the first call; the Fallback keeps serving on local state meanwhile.
func ExampleOpen() {
	ctx := context.Background()
	rs, err := redisstore.Open(ctx, redisstore.Config{
		ClusterAddrs: []string{"redis-0.internal:6379", "redis-1.internal:6379"},
		Username:     "broker",
		Password:     "from a file or the environment",
	})
	if err != nil {
		log.Fatal(err)
	}
	st := store.NewFallback(rs, memstore.New())
	defer st.Close()
	if err := st.Verify(ctx); err != nil {
		log.Printf("shared store: %s: %v", store.CauseOf(err), err)
	}
}
