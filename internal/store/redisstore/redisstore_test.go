package redisstore_test

import (
	"context"
	"testing"

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
	s, err := redisstore.New(context.Background(), srv.URL(), opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, srv
}

func TestSuite(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, _ := newStore(t)
		return s
	})
}
