package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
	"github.com/retrybroker/retrybroker/internal/store"
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
	// Idle and healthy, and then at any phase of the health check.
	time.Sleep(time.Second + rand.N(store.DefaultHealthInterval))

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

// replicaWatch polls one replica from the moment its process starts: its
// readiness ("") and SharedState every 20 ms, and an Execute through a
// gate closed in the shared store every 50 ms, on a connection that
// redials at once (grpc's default backoff would wait a second after the
// first refused dial).
type replicaWatch struct {
	b      *redisBroker
	start  time.Time
	health healthpb.HealthClient
	client rbv1.BrokerServiceClient

	mu       sync.Mutex
	servedAt time.Duration // when SharedState was first SERVING, since start; 0: not yet
	problems []string      // what a replica must not do
	calls    int           // calls answered by the broker
	reached  int           // calls that reached the upstream
}

func (w *replicaWatch) problem(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.problems) < 10 {
		w.problems = append(w.problems, fmt.Sprintf(format, args...))
	}
}

// poll watches health until stop.
func (w *replicaWatch) poll(stop <-chan struct{}) {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		ready, rerr := w.health.Check(ctx, &healthpb.HealthCheckRequest{})
		shared, serr := w.health.Check(ctx, &healthpb.HealthCheckRequest{Service: StoreHealthService})
		cancel()
		since := time.Since(w.start)
		w.mu.Lock()
		served := w.servedAt != 0
		switch {
		case serr == nil && shared.GetStatus() == healthpb.HealthCheckResponse_SERVING:
			if !served {
				w.servedAt = since
			}
		case serr == nil && served:
			w.mu.Unlock()
			w.problem("SharedState %v at %v, after SERVING at %v: %s", shared.GetStatus(), since, w.servedAt, w.b.sharedStateText())
			w.mu.Lock()
		}
		if !served && rerr == nil && ready.GetStatus() == healthpb.HealthCheckResponse_SERVING &&
			(serr != nil || shared.GetStatus() != healthpb.HealthCheckResponse_SERVING) {
			w.mu.Unlock()
			w.problem("ready at %v before its shared store was verified (SharedState %v %v)", since, shared.GetStatus(), serr)
			w.mu.Lock()
		}
		w.mu.Unlock()
		select {
		case <-stop:
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// sharedStateText returns the body of GET SharedStateHealthPath, for
// messages.
func (b *redisBroker) sharedStateText() string {
	resp, err := http.Get("http://" + b.metrics + SharedStateHealthPath)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	text, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return string(text)
}

// send sends calls through the closed gate until stop: each must end
// without reaching the upstream (refused before it is verified, or gate
// closed after).
func (w *replicaWatch) send(url string, stop <-chan struct{}) {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		r, err := w.client.Execute(ctx, &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Url: url}})
		cancel()
		if err == nil {
			w.mu.Lock()
			w.calls++
			if len(r.GetAttempts()) > 0 {
				w.reached++
			}
			w.mu.Unlock()
			if len(r.GetAttempts()) > 0 || r.GetOutcome() != rbv1.Outcome_OUTCOME_GATE_CLOSED {
				w.problem("a call at %v: outcome %s with %d attempts, want gate closed without calling", time.Since(w.start), r.GetOutcome(), len(r.GetAttempts()))
			}
		}
		select {
		case <-stop:
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// watchReplica starts a replica and watches it from its start.
func watchReplica(t *testing.T, env, args []string) *replicaWatch {
	t.Helper()
	w := &replicaWatch{start: time.Now()}
	w.b = launchRedisBroker(t, env, args...)
	conn, err := grpc.NewClient(w.b.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 5 * time.Millisecond, Multiplier: 1, MaxDelay: 5 * time.Millisecond},
			MinConnectTimeout: time.Second,
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	w.health, w.client = healthpb.NewHealthClient(conn), rbv1.NewBrokerServiceClient(conn)
	return w
}

// TestReplicasStartTogether (issue 18 item 4): four replicas started at
// the same moment, on one redis-server and on a 3-master cluster, each
// report SharedState SERVING within 3 s of their start and never
// NOT_SERVING after it, are not ready before that, and serve no call on
// local state: calls sent from their first moment through a gate that
// another replica closed in Redis never reach the upstream. Before, their
// verifications collided on shared reserved keys: 3 of 4 started
// degraded, on local state, and sent calls through the closed gate.
func TestReplicasStartTogether(t *testing.T) {
	for _, topo := range []struct {
		name  string
		setup func(t *testing.T) (env, args []string)
	}{
		{"single", func(t *testing.T) ([]string, []string) {
			return nil, []string{"--redis", redistest.StartServer(t).URL()}
		}},
		{"cluster-3-masters", func(t *testing.T) ([]string, []string) {
			c := redistest.StartCluster(t, redistest.ClusterConfig{Masters: 3})
			return []string{"BROKER_REDIS_USER=" + redistest.UserBroker, "BROKER_REDIS_PASSWORD=" + c.BrokerPassword()},
				[]string{"--redis-cluster", c.Seeds()}
		}},
	} {
		t.Run(topo.name, func(t *testing.T) {
			env, args := topo.setup(t)
			up := newCountingUpstream(t, func(n int32, w http.ResponseWriter) {
				if n == 1 {
					w.Header().Set("Retry-After", "120")
					w.WriteHeader(http.StatusTooManyRequests)
				}
			})
			url := up.URL + "/repos"
			// A replica that was there first closes the gate in Redis.
			first := startRedisBroker(t, env, args...)
			first.waitHealth(t, StoreHealthService, healthpb.HealthCheckResponse_SERVING, 10*time.Second)
			if r, err := first.execute(url); err != nil || r.GetOutcome() != rbv1.Outcome_OUTCOME_HINT_EXCEEDS_MAX_DELAY {
				t.Fatalf("first replica: %v %v", err, r.GetOutcome())
			}

			stop := make(chan struct{})
			var wg sync.WaitGroup
			watches := make([]*replicaWatch, 4)
			for i := range watches {
				w := watchReplica(t, env, args)
				watches[i] = w
				wg.Go(func() { w.poll(stop) })
				wg.Go(func() { w.send(url, stop) })
			}
			deadline := time.Now().Add(5 * time.Second)
			for _, w := range watches {
				for {
					w.mu.Lock()
					served := w.servedAt
					w.mu.Unlock()
					if served != 0 || time.Now().After(deadline) {
						break
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
			time.Sleep(3 * time.Second) // and none turns NOT_SERVING after
			close(stop)
			wg.Wait()
			for i, w := range watches {
				t.Logf("replica %d: SharedState SERVING %v after its start; %d calls answered, %d reached the upstream", i, w.servedAt, w.calls, w.reached)
				if w.servedAt == 0 || w.servedAt > 3*time.Second {
					t.Errorf("replica %d: SharedState SERVING at %v after its start, want within 3 s", i, w.servedAt)
				}
				for _, p := range w.problems {
					t.Errorf("replica %d: %s", i, p)
				}
				if w.calls == 0 {
					t.Errorf("replica %d answered no call", i)
				}
				if logs := w.b.logs.String(); strings.Contains(logs, "serving on local state") {
					t.Errorf("replica %d served on local state:\n%s", i, logs)
				}
			}
			if n := up.n.Load(); n != 1 {
				t.Errorf("the upstream saw %d calls; only the first replica's may reach it while the gate is closed", n)
			}
		})
	}
}

// TestStartWaitIsBounded: a replica whose Redis is down at start is not
// ready (and says "starting", with the cause) for --redis-start-wait, then
// ready on local state, degraded; once Redis is up and verified, it is back
// on shared state by itself.
func TestStartWaitIsBounded(t *testing.T) {
	srv := redistest.StartServer(t)
	srv.Stop() // its port, with nothing listening
	const wait = 3 * time.Second
	begin := time.Now()
	b := launchRedisBroker(t, nil, "--redis", srv.URL(), "--redis-start-wait", wait.String())
	b.waitHealth(t, "", healthpb.HealthCheckResponse_NOT_SERVING, 10*time.Second)
	b.waitHealth(t, StoreHealthService, healthpb.HealthCheckResponse_NOT_SERVING, time.Second)
	deadline := time.Now().Add(5 * time.Second)
	for {
		body := b.sharedState(t)
		if body.Status == "starting" && body.Cause == "unreachable" && body.code == http.StatusServiceUnavailable {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s = %d %+v while starting, want 503 starting unreachable", SharedStateHealthPath, body.code, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.waitHealth(t, "", healthpb.HealthCheckResponse_SERVING, 2*wait)
	if took := time.Since(begin); took < wait {
		t.Fatalf("ready %v after the start, before the start wait of %v passed", took, wait)
	}
	if st, err := b.sharedStatus(); err != nil || st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("SharedState %v %v once ready without Redis, want NOT_SERVING", st, err)
	}
	if body := b.sharedState(t); body.Status != "degraded" || body.Cause != "unreachable" {
		t.Fatalf("%s = %+v, want degraded unreachable", SharedStateHealthPath, body)
	}
	srv.Restart()
	b.waitHealth(t, StoreHealthService, healthpb.HealthCheckResponse_SERVING, 10*time.Second)
}
