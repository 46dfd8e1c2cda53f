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
