package redisstore_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"go.uber.org/goleak"

	"github.com/retrybroker/retrybroker/internal/store"
	"github.com/retrybroker/retrybroker/internal/store/redisstore"
	"github.com/retrybroker/retrybroker/internal/store/redistest"
	"github.com/retrybroker/retrybroker/internal/store/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newStore starts a real redis-server for t and returns a store on it.
func newStore(t *testing.T, opts ...redisstore.Option) (*redisstore.Store, *redistest.Server) {
	t.Helper()
	srv := redistest.StartServer(t)
	s, err := redisstore.New(context.Background(), srv.URL(), append([]redisstore.Option{redisstore.WithRedisOptions(patient)}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, srv
}

// patient gives test clients long timeouts: these tests check behaviour,
// and a loaded CI machine can take more than the production defaults to
// accept a loopback connection.
func patient(o *redis.Options) {
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.PoolTimeout = 5*time.Second, 5*time.Second, 5*time.Second, 5*time.Second
}

func TestSuite(t *testing.T) {
	url := redistest.Start(t) // one server; each subtest gets its own key prefix
	var n atomic.Int64
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := redisstore.New(context.Background(), url,
			redisstore.WithKeyPrefix(fmt.Sprintf("suite%d:", n.Add(1))), redisstore.WithRedisOptions(patient))
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}
