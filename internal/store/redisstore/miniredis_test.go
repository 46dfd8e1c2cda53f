package redisstore_test

import (
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/retrybroker/retrybroker/internal/store"
	"github.com/retrybroker/retrybroker/internal/store/redisstore"
	"github.com/retrybroker/retrybroker/internal/store/storetest"
)

// TestSuiteMiniredis runs the Lua scripts on miniredis (an in-process Lua
// interpreter): a quick check that needs no redis-server. TestSuite on the
// real server remains the reference.
func TestSuiteMiniredis(t *testing.T) {
	mr := miniredis.RunT(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := redisstore.NewFromClient(redis.NewClient(&redis.Options{Addr: mr.Addr(), DisableIdentity: true}),
			redisstore.WithKeyPrefix(t.Name()+":"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		ready(t, s)
		return s
	})
}
