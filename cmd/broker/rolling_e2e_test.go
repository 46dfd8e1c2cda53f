package main

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	_ "google.golang.org/grpc/health" // client-side health checking
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
	"github.com/retrybroker/retrybroker/internal/store/redistest"
)

// attemptsRe matches a non-zero count of attempts in a metrics exposition.
var attemptsRe = regexp.MustCompile(`(?m)^retrybroker_attempts_total\{[^}]*\} [1-9]`)

// TestRollingRestartUnderLoad (issue 18 item 4): three replicas on one
// redis-server serve a steady load through one client channel that
// balances over the replicas that report themselves ready (round robin with
// grpc health checking of ""), as a Kubernetes Service with readiness
// probes does. Each replica in turn is stopped (SIGTERM: NOT_SERVING at
// once, then a drain) and replaced by a new one, which joins the address
// list at once and is picked only once ready (verified). No call fails.
func TestRollingRestartUnderLoad(t *testing.T) {
	srv := redistest.StartServer(t)
	up := newCountingUpstream(t, func(int32, http.ResponseWriter) { time.Sleep(5 * time.Millisecond) })
	args := []string{"--redis", srv.URL()}
	replicas := make([]*redisBroker, 3)
	for i := range replicas {
		replicas[i] = startRedisBroker(t, nil, args...)
		replicas[i].waitHealth(t, StoreHealthService, healthpb.HealthCheckResponse_SERVING, 10*time.Second)
	}
	r := manual.NewBuilderWithScheme("replicas")
	addrs := func() resolver.State {
		var st resolver.State
		for _, b := range replicas {
			if b != nil {
				st.Addresses = append(st.Addresses, resolver.Address{Addr: b.addr})
			}
		}
		return st
	}
	r.InitialState(addrs())
	conn, err := grpc.NewClient(r.Scheme()+":///brokers", grpc.WithResolvers(r),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"round_robin":{}}],"healthCheckConfig":{"serviceName":""}}`))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	client := rbv1.NewBrokerServiceClient(conn)

	var calls, failed atomic.Int64
	var mu sync.Mutex
	var failures []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				resp, err := client.Execute(ctx, &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Url: up.URL}})
				cancel()
				calls.Add(1)
				if err != nil || resp.GetOutcome() != rbv1.Outcome_OUTCOME_SUCCESS {
					failed.Add(1)
					mu.Lock()
					if len(failures) < 10 {
						failures = append(failures, fmt.Sprintf("%s: %v %v", time.Now().Format("15:04:05.000"), err, resp.GetOutcome()))
					}
					mu.Unlock()
				}
				time.Sleep(2 * time.Millisecond)
			}
		})
	}
	time.Sleep(500 * time.Millisecond)
	for i, old := range replicas {
		before := calls.Load()
		if err := old.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-old.done:
			old.done <- err // for the cleanup
			if err != nil {
				t.Fatalf("replica %d exit after SIGTERM: %v", i, err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("replica %d did not stop after SIGTERM", i)
		}
		replicas[i] = launchRedisBroker(t, nil, args...) // in the address list from its first moment
		r.UpdateState(addrs())
		replicas[i].waitHealth(t, "", healthpb.HealthCheckResponse_SERVING, 10*time.Second)
		time.Sleep(500 * time.Millisecond)
		t.Logf("replica %d replaced; %d calls meanwhile", i, calls.Load()-before)
	}
	close(stop)
	wg.Wait()
	for i, b := range replicas {
		// Every new replica took its share, on shared state.
		text := b.metricsText(t)
		if !attemptsRe.MatchString(text) {
			t.Errorf("replacement %d sent no attempt", i)
		}
		if strings.Contains(b.logs.String(), "serving on local state") {
			t.Errorf("replacement %d served on local state:\n%s", i, b.logs.String())
		}
	}
	t.Logf("%d calls through a rolling restart of 3 replicas, %d failed", calls.Load(), failed.Load())
	if failed.Load() != 0 {
		t.Fatalf("%d of %d calls failed during the rolling restart: %v", failed.Load(), calls.Load(), failures)
	}
}
