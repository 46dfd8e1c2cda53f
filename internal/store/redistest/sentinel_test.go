package redistest_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrybroker/retrybroker/internal/store/redistest"
)

// TestSentinelFailsOver writes through a failover client, kills the master
// by its pid, and reads the key back from the promoted replica.
func TestSentinelFailsOver(t *testing.T) {
	start := time.Now()
	s := redistest.StartSentinel(t)
	t.Logf("sentinel set up in %v", time.Since(start))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if len(s.Pids()) != 3 {
		t.Fatalf("pids %v, want 3", s.Pids())
	}
	cl := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: redistest.SentinelMaster, SentinelAddrs: []string{s.Addr()}, DisableIdentity: true})
	defer cl.Close()
	if err := cl.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := cl.Wait(ctx, 1, time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	oldMaster, oldReplica := s.MasterAddr(), s.ReplicaAddr()
	took, err := s.KillMaster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("sentinel promoted the replica %v after the kill", took)
	if s.MasterAddr() != oldReplica || s.ReplicaAddr() != oldMaster {
		t.Fatalf("after failover master %s replica %s", s.MasterAddr(), s.ReplicaAddr())
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		v, err := cl.Get(ctx, "k").Result()
		if err == nil && v == "v" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET after failover: %q, %v", v, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := s.RestartOldMaster(ctx); err != nil {
		t.Fatal(err)
	}
	if len(s.Pids()) != 3 {
		t.Fatalf("pids %v after restarting the old master", s.Pids())
	}
}
