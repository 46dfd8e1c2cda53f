package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/retrybroker/retrybroker/internal/store/redistest"
)

// sharedStatus returns the broker's SharedState health now.
func (p *brokerProc) sharedStatus() (healthpb.HealthCheckResponse_ServingStatus, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	r, err := p.health.Check(ctx, &healthpb.HealthCheckRequest{Service: StoreHealthService})
	return r.GetStatus(), err
}

// TestIdleReplicaReportsRedisGone (issue 17, defect 7): a broker that
// serves no call at all reports SharedState NOT_SERVING within 2 s of its
// redis-server being killed (by pid), names the cause, and reports SERVING
// again once Redis is back and verified. Before, only a failed call made
// it notice: an idle replica stayed SERVING through a 10 s outage.
func TestIdleReplicaReportsRedisGone(t *testing.T) {
	srv := redistest.StartServer(t)
	b := startRedisBroker(t, nil, "--redis", srv.URL())
	b.waitHealth(t, StoreHealthService, healthpb.HealthCheckResponse_SERVING, 10*time.Second)
	time.Sleep(time.Second) // idle, healthy

	srv.Stop() // SIGKILL by pid
	killed := time.Now()
	var took time.Duration
	for {
		st, err := b.sharedStatus()
		if err == nil && st == healthpb.HealthCheckResponse_NOT_SERVING {
			took = time.Since(killed)
			break
		}
		if time.Since(killed) > 5*time.Second {
			t.Fatalf("SharedState %v (%v) 5 s after Redis was killed, with no traffic", st, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("SharedState NOT_SERVING %v after the kill, with no traffic", took)
	if took > 2*time.Second {
		t.Fatalf("SharedState NOT_SERVING only %v after the kill; want within 2 s", took)
	}
	if body := b.sharedState(t); body.code != http.StatusServiceUnavailable || body.Cause != "unreachable" {
		t.Fatalf("%s = %d %+v, want 503 unreachable", SharedStateHealthPath, body.code, body)
	}
	b.waitHealth(t, "", healthpb.HealthCheckResponse_SERVING, time.Second) // still serves, on local state

	srv.Restart()
	b.waitHealth(t, StoreHealthService, healthpb.HealthCheckResponse_SERVING, 10*time.Second)
}
