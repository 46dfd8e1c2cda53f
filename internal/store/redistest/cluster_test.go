package redistest_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrybroker/retrybroker/internal/store/redistest"
)

// TestClusterFormsAndFailsOver forms 3 masters with a replica each, writes
// keys on every master through a cluster client, and fails a master over
// to its replica.
func TestClusterFormsAndFailsOver(t *testing.T) {
	start := time.Now()
	c := redistest.StartCluster(t, redistest.ClusterConfig{Masters: 3, ReplicasPerMaster: 1})
	t.Logf("formed 3+3 in %v", time.Since(start))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	masters := c.Masters(ctx)
	if len(masters) != 3 || len(c.Addrs()) != 6 || len(c.Pids()) != 6 {
		t.Fatalf("masters %v of %v (%d pids)", masters, c.Addrs(), len(c.Pids()))
	}
	cl := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()[:1], DisableIdentity: true})
	defer cl.Close()
	seen := map[string]bool{}
	for i := range 30 {
		key := fmt.Sprintf("k%d", i)
		if err := cl.Set(ctx, key, i, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		m, err := cl.MasterForKey(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		seen[m.Options().Addr] = true
	}
	if len(seen) != 3 {
		t.Fatalf("30 keys landed on %d masters, want 3", len(seen))
	}
	start = time.Now()
	promoted, err := c.Failover(ctx, masters[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("failover in %v", time.Since(start))
	now := c.Masters(ctx)
	if !slices.Contains(now, promoted) || slices.Contains(now, masters[0]) {
		t.Fatalf("masters after failover %v; promoted %s, old %s", now, promoted, masters[0])
	}
	for i := range 30 {
		if v, err := cl.Get(ctx, fmt.Sprintf("k%d", i)).Int(); err != nil || v != i {
			t.Fatalf("k%d after failover = %d, %v", i, v, err)
		}
	}
}
