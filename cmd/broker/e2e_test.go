package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
	"github.com/retrybroker/retrybroker/internal/proctest"
	"github.com/retrybroker/retrybroker/internal/store/redistest"
)

var brokerBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "broker-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	brokerBin = filepath.Join(dir, "broker")
	if out, err := exec.Command("go", "build", "-o", brokerBin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build broker: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// brokerProc is a real broker process on a free loopback port.
type brokerProc struct {
	cmd    *exec.Cmd
	addr   string
	conn   *grpc.ClientConn
	client rbv1.BrokerServiceClient
	health healthpb.HealthClient
	logs   *proctest.Buffer
	done   chan error
}

func freePort(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	return lis.Addr().String()
}

func startProc(t *testing.T, args ...string) *brokerProc {
	t.Helper()
	addr := freePort(t)
	p := &brokerProc{addr: addr, logs: &proctest.Buffer{}, done: make(chan error, 1)}
	p.cmd = exec.Command(brokerBin, append([]string{"--listen", addr}, args...)...)
	proctest.DieWithTest(p.cmd)
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("broker %s logs:\n%s", addr, p.logs.String())
		}
	})
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	p.conn, p.client, p.health = conn, rbv1.NewBrokerServiceClient(conn), healthpb.NewHealthClient(conn)
	p.waitHealth(t, "", healthpb.HealthCheckResponse_SERVING, 20*time.Second)
	return p
}

func (p *brokerProc) waitHealth(t *testing.T, service string, want healthpb.HealthCheckResponse_ServingStatus, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	var last string
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		r, err := p.health.Check(ctx, &healthpb.HealthCheckRequest{Service: service})
		cancel()
		if err == nil && r.GetStatus() == want {
			return
		}
		last = fmt.Sprintf("%v %v", r.GetStatus(), err)
		select {
		case err := <-p.done:
			p.done <- err // for the cleanup, which waits for it
			t.Fatalf("broker exited: %v\n%s", err, p.logs.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("health %q never became %s (last: %s)", service, want, last)
}

func TestRefusesNonLoopbackWithoutAuth(t *testing.T) {
	out, err := exec.Command(brokerBin, "--listen", "0.0.0.0:0").CombinedOutput()
	if err == nil {
		t.Fatal("broker started on 0.0.0.0 without authentication")
	}
	if !strings.Contains(string(out), "without authentication") {
		t.Fatalf("message does not say why: %s", out)
	}
}

func TestGracefulShutdown(t *testing.T) {
	p := startProc(t)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.done:
		p.done <- err // for the cleanup
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, p.logs.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("broker did not stop after SIGTERM")
	}
	if !strings.Contains(p.logs.String(), "health NOT_SERVING") {
		t.Fatalf("shutdown did not report health first:\n%s", p.logs.String())
	}
}

type countingUpstream struct {
	*httptest.Server
	n atomic.Int32
}

func newCountingUpstream(t *testing.T, h func(n int32, w http.ResponseWriter)) *countingUpstream {
	u := &countingUpstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { h(u.n.Add(1), w) }))
	t.Cleanup(u.Close)
	return u
}

// TestReplicasShareGatesThroughRedis: a hint seen by one broker closes the
// gate for the other, which then makes no upstream call.
func TestReplicasShareGatesThroughRedis(t *testing.T) {
	redisURL := redistest.Start(t)
	up := newCountingUpstream(t, func(n int32, w http.ResponseWriter) {
		if n == 1 {
			w.Header().Set("Retry-After", "120")
			w.WriteHeader(http.StatusTooManyRequests)
		}
	})
	a := startProc(t, "--redis", redisURL, "--allow-destinations", "127.0.0.1/32")
	b := startProc(t, "--redis", redisURL, "--allow-destinations", "127.0.0.1/32")
	req := &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Url: up.URL + "/repos"}}
	ra, err := a.client.Execute(t.Context(), req)
	if err != nil || ra.GetOutcome() != rbv1.Outcome_OUTCOME_HINT_EXCEEDS_MAX_DELAY {
		t.Fatalf("broker A: %v %v", err, ra.GetOutcome())
	}
	rb, err := b.client.Execute(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if rb.GetOutcome() != rbv1.Outcome_OUTCOME_GATE_CLOSED || len(rb.GetAttempts()) != 0 {
		t.Fatalf("broker B outcome %s with %d attempts, want gate closed without calling", rb.GetOutcome(), len(rb.GetAttempts()))
	}
	if got := up.n.Load(); got != 1 {
		t.Fatalf("upstream saw %d calls; broker B must make none while the gate is closed", got)
	}
	if ra := rb.GetRetryAfter().AsDuration(); ra < 100*time.Second || ra > 120*time.Second {
		t.Fatalf("broker B retry_after %v", ra)
	}
}

// TestRedisOutageMidRun: Redis is killed while calls flow; no call fails
// because of it, the broker reports itself degraded, and recovers once
// Redis is back.
func TestRedisOutageMidRun(t *testing.T) {
	srv := redistest.StartServer(t)
	up := newCountingUpstream(t, func(int32, http.ResponseWriter) {})
	p := startProc(t, "--redis", srv.URL(), "--allow-destinations", "127.0.0.1/32")
	p.waitHealth(t, StoreHealthService, healthpb.HealthCheckResponse_SERVING, 5*time.Second)
	req := &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Url: up.URL}}
	var failures, calls atomic.Int32
	var slowest atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				begin := time.Now()
				resp, err := p.client.Execute(ctx, req)
				cancel()
				calls.Add(1)
				if d := time.Since(begin); int64(d) > slowest.Load() {
					slowest.Store(int64(d))
				}
				if err != nil || resp.GetOutcome() != rbv1.Outcome_OUTCOME_SUCCESS {
					failures.Add(1)
					t.Errorf("call failed during the outage test: %v %v", err, resp.GetOutcome())
				}
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	srv.Stop()
	p.waitHealth(t, StoreHealthService, healthpb.HealthCheckResponse_NOT_SERVING, 10*time.Second)
	p.waitHealth(t, "", healthpb.HealthCheckResponse_SERVING, time.Second) // still serving
	time.Sleep(500 * time.Millisecond)
	srv.Restart()
	p.waitHealth(t, StoreHealthService, healthpb.HealthCheckResponse_SERVING, 15*time.Second)
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	if failures.Load() != 0 || calls.Load() < 20 {
		t.Fatalf("%d of %d calls failed", failures.Load(), calls.Load())
	}
	if d := time.Duration(slowest.Load()); d > 2*time.Second {
		t.Fatalf("slowest call took %v during the outage; calls must not hang", d)
	}
	t.Logf("%d calls, none failed; slowest %v", calls.Load(), time.Duration(slowest.Load()))
}
