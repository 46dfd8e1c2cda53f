package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
	"github.com/retrybroker/retrybroker/internal/proctest"
	"github.com/retrybroker/retrybroker/internal/store"
	"github.com/retrybroker/retrybroker/internal/store/redistest"
)

// redisBroker is a broker process with its metrics listener.
type redisBroker struct {
	*brokerProc
	metrics string // host:port of the metrics listener
}

// startRedisBroker starts a broker with env added to its environment (the
// BROKER_REDIS_* variables of this process removed) and a metrics
// listener, and waits until it serves.
func startRedisBroker(t *testing.T, env []string, args ...string) *redisBroker {
	t.Helper()
	b := launchRedisBroker(t, env, args...)
	b.waitHealth(t, "", healthpb.HealthCheckResponse_SERVING, 20*time.Second)
	return b
}

// launchRedisBroker is startRedisBroker without the wait: it returns as
// soon as the process started.
func launchRedisBroker(t *testing.T, env []string, args ...string) *redisBroker {
	t.Helper()
	addr, metricsAddr := freePort(t), freePort(t)
	p := &brokerProc{addr: addr, logs: &proctest.Buffer{}, done: make(chan error, 1)}
	p.cmd = exec.Command(brokerBin, append([]string{"--listen", addr, "--metrics-listen", metricsAddr, "--allow-destinations", "127.0.0.1/32"}, args...)...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "BROKER_REDIS_") {
			p.cmd.Env = append(p.cmd.Env, kv)
		}
	}
	p.cmd.Env = append(p.cmd.Env, env...)
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
	return &redisBroker{brokerProc: p, metrics: metricsAddr}
}

// sharedStateBody is the JSON of GET /health/shared-state.
type sharedStateBody struct {
	Status, Store, Cause, Detail, Since string
	code                                int
}

func (b *redisBroker) sharedState(t *testing.T) sharedStateBody {
	t.Helper()
	resp, err := http.Get("http://" + b.metrics + SharedStateHealthPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body sharedStateBody
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("%s: %v", SharedStateHealthPath, err)
	}
	body.code = resp.StatusCode
	return body
}

// metricsText returns the metrics exposition.
func (b *redisBroker) metricsText(t *testing.T) string {
	t.Helper()
	resp, err := http.Get("http://" + b.metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	text, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(text)
}

// execute runs one Execute to url and reports whether it succeeded.
func (b *redisBroker) execute(url string) (*rbv1.ExecuteResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return b.client.Execute(ctx, &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Url: url}})
}

// load sends Execute calls from several workers until stopped, and counts
// the calls and those that failed.
type load struct {
	calls, failed atomic.Int64
	slowest       atomic.Int64
	mu            sync.Mutex
	firstErr      string
	stop          chan struct{}
	wg            sync.WaitGroup
}

func startLoad(b *redisBroker, url string, workers int) *load {
	l := &load{stop: make(chan struct{})}
	for range workers {
		l.wg.Go(func() {
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				begin := time.Now()
				resp, err := b.execute(url)
				if d := int64(time.Since(begin)); d > l.slowest.Load() {
					l.slowest.Store(d)
				}
				l.calls.Add(1)
				if err != nil || resp.GetOutcome() != rbv1.Outcome_OUTCOME_SUCCESS {
					l.failed.Add(1)
					l.mu.Lock()
					if l.firstErr == "" {
						l.firstErr = fmt.Sprintf("%v %v", err, resp.GetOutcome())
					}
					l.mu.Unlock()
				}
				time.Sleep(2 * time.Millisecond)
			}
		})
	}
	return l
}

func (l *load) end() {
	close(l.stop)
	l.wg.Wait()
}

// stateLog records the changes of a broker's SharedState health, polled
// every 10 ms.
type stateLog struct {
	mu      sync.Mutex
	changes []stateChange
	stop    chan struct{}
	done    chan struct{}
}

type stateChange struct {
	at      time.Time
	serving bool
}

func watchState(b *redisBroker) *stateLog {
	s := &stateLog{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		serving := true
		for {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			r, err := b.health.Check(ctx, &healthpb.HealthCheckRequest{Service: StoreHealthService})
			cancel()
			if err == nil {
				now := r.GetStatus() == healthpb.HealthCheckResponse_SERVING
				if now != serving {
					serving = now
					s.mu.Lock()
					s.changes = append(s.changes, stateChange{time.Now(), now})
					s.mu.Unlock()
				}
			}
			select {
			case <-s.stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	return s
}

func (s *stateLog) end() []stateChange {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changes
}

// backOnShared returns how long after settled the broker was last back on
// shared state (0 when it was back before, or never left), and whether it
// is on shared state at the end.
func backOnShared(changes []stateChange, settled time.Time) (time.Duration, bool) {
	var back time.Duration
	serving := true
	for _, c := range changes {
		serving = c.serving
		if c.serving && c.at.After(settled) {
			back = c.at.Sub(settled)
		}
	}
	return back, serving
}

// waitShared waits until the broker's SharedState is SERVING again, at
// most within; it returns when that was.
func (b *redisBroker) waitShared(t *testing.T, within time.Duration) time.Time {
	t.Helper()
	b.waitHealth(t, StoreHealthService, healthpb.HealthCheckResponse_SERVING, within)
	return time.Now()
}

// TestRedisCluster runs brokers on a 3-master cluster: two brokers share a
// gate end to end (the second sends no upstream call while the first's
// gate is closed, and the gate is a key on the cluster), and a broker
// pointed at one node with --redis names the misconfiguration (MOVED)
// instead of calling the cluster unreachable.
func TestRedisCluster(t *testing.T) {
	c := redistest.StartCluster(t, redistest.ClusterConfig{Masters: 3})
	creds := []string{"BROKER_REDIS_USER=" + redistest.UserBroker, "BROKER_REDIS_PASSWORD=" + c.BrokerPassword()}

	t.Run("brokers share a gate", func(t *testing.T) {
		up := newCountingUpstream(t, func(n int32, w http.ResponseWriter) {
			if n == 1 {
				w.Header().Set("Retry-After", "120")
				w.WriteHeader(http.StatusTooManyRequests)
			}
		})
		// One broker gets a seed list, the other a single seed.
		a := startRedisBroker(t, creds, "--redis-cluster", c.Seeds())
		b := startRedisBroker(t, append(creds, "BROKER_REDIS_CLUSTER="+c.Addrs()[2]))
		for _, p := range []*redisBroker{a, b} {
			p.waitHealth(t, StoreHealthService, healthpb.HealthCheckResponse_SERVING, 5*time.Second)
			// Verified at start, or (on a loaded machine, when the start
			// check ran out of its 2 s) verified by the recovery that
			// brought it to SERVING.
			deadline := time.Now().Add(10 * time.Second)
			for logs := p.logs.String(); !strings.Contains(logs, "shared store verified") && !strings.Contains(logs, "shared store recovered"); logs = p.logs.String() {
				if time.Now().After(deadline) {
					t.Fatalf("no verification:\n%s", logs)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		ra, err := a.execute(up.URL + "/repos")
		if err != nil || ra.GetOutcome() != rbv1.Outcome_OUTCOME_HINT_EXCEEDS_MAX_DELAY {
			t.Fatalf("broker A: %v %v", err, ra.GetOutcome())
		}
		for range 3 {
			rb, err := b.execute(up.URL + "/repos")
			if err != nil || rb.GetOutcome() != rbv1.Outcome_OUTCOME_GATE_CLOSED || len(rb.GetAttempts()) != 0 {
				t.Fatalf("broker B: %v, outcome %s with %d attempts; want gate closed without calling", err, rb.GetOutcome(), len(rb.GetAttempts()))
			}
		}
		if got := up.n.Load(); got != 1 {
			t.Fatalf("upstream saw %d calls; broker B must make none while A's gate is closed", got)
		}
		cl := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), DisableIdentity: true})
		defer cl.Close()
		var mu sync.Mutex
		var keys []string
		err = cl.ForEachMaster(t.Context(), func(ctx context.Context, m *redis.Client) error { // concurrently
			k, err := m.Keys(ctx, "rb:v1:{t:dev}:g:*").Result()
			mu.Lock()
			defer mu.Unlock()
			keys = append(keys, k...)
			return err
		})
		if err != nil || len(keys) != 1 {
			t.Fatalf("gate keys on the cluster: %q, %v; want one", keys, err)
		}
		if strings.Contains(a.logs.String()+b.logs.String(), c.BrokerPassword()) {
			t.Fatal("the Redis password reached the logs")
		}
	})

	t.Run("single-node client on a cluster is named", func(t *testing.T) {
		up := newCountingUpstream(t, func(int32, http.ResponseWriter) {})
		p := startRedisBroker(t, creds, "--redis", "redis://"+c.Addrs()[0]+"/0")
		p.waitHealth(t, StoreHealthService, healthpb.HealthCheckResponse_NOT_SERVING, 5*time.Second)
		// Calls still succeed, on local state.
		if r, err := p.execute(up.URL); err != nil || r.GetOutcome() != rbv1.Outcome_OUTCOME_SUCCESS {
			t.Fatalf("Execute: %v %v", err, r.GetOutcome())
		}
		logs := p.logs.String()
		if !strings.Contains(logs, "cause=moved") || !strings.Contains(logs, "--redis-cluster") || strings.Contains(logs, "unreachable") {
			t.Fatalf("the log does not name the cluster behind a single-node client:\n%s", logs)
		}
		st := p.sharedState(t)
		if st.code != http.StatusServiceUnavailable || st.Status != "degraded" || st.Cause != "moved" || !strings.Contains(st.Detail, "MOVED") {
			t.Fatalf("%s = %+v", SharedStateHealthPath, st)
		}
		text := p.metricsText(t)
		for _, want := range []string{`retrybroker_store_problem{cause="moved"} 1`, `retrybroker_store_problem{cause="unreachable"} 0`, "retrybroker_store_degraded 1"} {
			if !strings.Contains(text, want) {
				t.Errorf("metrics lack %s", want)
			}
		}
	})
}

// TestRedisMisconfigurationsNamed checks the log line, the health detail
// and the metric of a wrong password and of a Redis out of memory: each is
// named, never "unreachable", and no password shows.
func TestRedisMisconfigurationsNamed(t *testing.T) {
	up := newCountingUpstream(t, func(int32, http.ResponseWriter) {})
	for _, c := range []struct {
		name, cause string
		args        func(t *testing.T) []string
	}{
		{"wrong password", "wrongpass", func(t *testing.T) []string {
			srv := redistest.StartServer(t, "--requirepass", "the-right-one")
			return []string{"--redis", "redis://:not-the-right-one@" + srv.Addr() + "/0"}
		}},
		{"out of memory", "oom", func(t *testing.T) []string {
			srv := redistest.StartServer(t, "--maxmemory", "1", "--maxmemory-policy", "noeviction")
			return []string{"--redis", srv.URL()}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := startRedisBroker(t, nil, c.args(t)...)
			p.waitHealth(t, StoreHealthService, healthpb.HealthCheckResponse_NOT_SERVING, 5*time.Second)
			for range 5 {
				if r, err := p.execute(up.URL); err != nil || r.GetOutcome() != rbv1.Outcome_OUTCOME_SUCCESS {
					t.Fatalf("Execute: %v %v", err, r.GetOutcome())
				}
			}
			logs := p.logs.String()
			if !strings.Contains(logs, "cause="+c.cause) || strings.Contains(logs, "unreachable") {
				t.Fatalf("the log does not name %s:\n%s", c.cause, logs)
			}
			if strings.Contains(logs, "not-the-right-one") || strings.Contains(logs, "the-right-one") {
				t.Fatalf("a password reached the logs:\n%s", logs)
			}
			if n := strings.Count(logs, "serving on local state"); n != 1 {
				t.Fatalf("%d degraded lines for one problem; health must not flap:\n%s", n, logs)
			}
			st := p.sharedState(t)
			if st.Status != "degraded" || st.Cause != c.cause || strings.Contains(st.Detail, "right-one") {
				t.Fatalf("%s = %+v", SharedStateHealthPath, st)
			}
			if text := p.metricsText(t); !strings.Contains(text, `retrybroker_store_problem{cause="`+c.cause+`"} 1`) {
				t.Errorf("metrics lack the %s problem", c.cause)
			}
		})
	}
}

// TestRedisTLSACL runs a broker against a TLS server that requires a
// client certificate and an ACL user, with the password in a file.
func TestRedisTLSACL(t *testing.T) {
	srv := redistest.StartTLS(t)
	pw := filepath.Join(t.TempDir(), "redis-password")
	if err := os.WriteFile(pw, []byte(srv.Password(redistest.UserBroker)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startRedisBroker(t, nil, "--redis", srv.URL(), "--redis-ca", srv.CAFile, "--redis-cert", srv.CertFile, "--redis-key", srv.KeyFile,
		"--redis-tls-server-name", srv.ServerName, "--redis-user", redistest.UserBroker, "--redis-password-file", pw)
	p.waitHealth(t, StoreHealthService, healthpb.HealthCheckResponse_SERVING, 5*time.Second)
	if st := p.sharedState(t); st.code != http.StatusOK || st.Status != "ok" || !strings.Contains(st.Store, "user broker tls") {
		t.Fatalf("%s = %+v", SharedStateHealthPath, st)
	}
	logs := p.logs.String()
	if !strings.Contains(logs, "shared store verified") || strings.Contains(logs, srv.Password(redistest.UserBroker)) {
		t.Fatalf("logs:\n%s", logs)
	}
	// Without the client certificate the handshake fails, and says so.
	q := startRedisBroker(t, nil, "--redis", srv.URL(), "--redis-ca", srv.CAFile, "--redis-user", redistest.UserBroker, "--redis-password-file", pw)
	q.waitHealth(t, StoreHealthService, healthpb.HealthCheckResponse_NOT_SERVING, 5*time.Second)
	if st := q.sharedState(t); st.Cause != "tls" {
		t.Fatalf("without a client certificate: %+v", st)
	}
}

// TestClusterFailoverUnderLoad runs a broker on a 3-master + 3-replica
// cluster under load while CLUSTER FAILOVER promotes a replica: no call
// fails because of it, and the broker is back on shared state within 5 s
// of the cluster settling.
func TestClusterFailoverUnderLoad(t *testing.T) {
	c := redistest.StartCluster(t, redistest.ClusterConfig{Masters: 3, ReplicasPerMaster: 1})
	up := newCountingUpstream(t, func(int32, http.ResponseWriter) {})
	p := startRedisBroker(t, []string{"BROKER_REDIS_USER=" + redistest.UserBroker, "BROKER_REDIS_PASSWORD=" + c.BrokerPassword()},
		"--redis-cluster", c.Seeds())
	p.waitHealth(t, StoreHealthService, healthpb.HealthCheckResponse_SERVING, 5*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Fail over the master that holds the dev tenant's keys.
	cl := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), DisableIdentity: true})
	defer cl.Close()
	m, err := cl.MasterForKey(ctx, "rb:v1:{t:dev}:g:x")
	if err != nil {
		t.Fatal(err)
	}
	states := watchState(p)
	l := startLoad(p, up.URL, 4)
	time.Sleep(500 * time.Millisecond)
	began := time.Now()
	promoted, err := c.Failover(ctx, m.Options().Addr)
	if err != nil {
		l.end()
		t.Fatal(err)
	}
	settled := time.Now()
	time.Sleep(time.Second) // load on the new topology
	p.waitShared(t, 10*time.Second)
	time.Sleep(500 * time.Millisecond)
	l.end()
	changes := states.end()
	back, serving := backOnShared(changes, settled)
	t.Logf("CLUSTER FAILOVER %s -> %s settled in %v; %d calls, %d failed, slowest %v; SharedState changes %d; back on shared state %v after settling",
		m.Options().Addr, promoted, settled.Sub(began).Round(time.Millisecond), l.calls.Load(), l.failed.Load(),
		time.Duration(l.slowest.Load()).Round(time.Millisecond), len(changes), back.Round(time.Millisecond))
	if l.failed.Load() != 0 {
		t.Fatalf("%d of %d calls failed during the failover (first: %s)", l.failed.Load(), l.calls.Load(), l.firstErr)
	}
	if !serving || back > 5*time.Second {
		t.Fatalf("back on shared state %v after the cluster settled (serving at the end: %v), want within 5 s", back, serving)
	}
	if st := p.sharedState(t); st.Status != "ok" {
		t.Fatalf("%s = %+v after the failover", SharedStateHealthPath, st)
	}
}

// TestSentinelFailoverUnderLoad runs a broker on Sentinel under load and
// kills the master by its pid: no call fails because of it (they run on
// local state meanwhile), and once the sentinel has promoted the replica
// the broker is back on shared state within 5 s, by itself.
func TestSentinelFailoverUnderLoad(t *testing.T) {
	s := redistest.StartSentinel(t)
	up := newCountingUpstream(t, func(int32, http.ResponseWriter) {})
	p := startRedisBroker(t, []string{"BROKER_REDIS_PASSWORD=" + s.BrokerPassword()},
		"--redis-sentinel", s.Flag(), "--redis-user", redistest.UserBroker)
	p.waitHealth(t, StoreHealthService, healthpb.HealthCheckResponse_SERVING, 5*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	states := watchState(p)
	l := startLoad(p, up.URL, 4)
	time.Sleep(500 * time.Millisecond)
	killedPid := s.MasterPid()
	promotedAfter, err := s.KillMaster(ctx)
	if err != nil {
		l.end()
		t.Fatal(err)
	}
	settled := time.Now()
	p.waitShared(t, 10*time.Second)
	time.Sleep(time.Second)
	l.end()
	changes := states.end()
	back, serving := backOnShared(changes, settled)
	t.Logf("killed master pid %d; sentinel promoted the replica %v later; %d calls, %d failed, slowest %v; SharedState changes %d; back on shared state %v after the promotion",
		killedPid, promotedAfter.Round(time.Millisecond), l.calls.Load(), l.failed.Load(),
		time.Duration(l.slowest.Load()).Round(time.Millisecond), len(changes), back.Round(time.Millisecond))
	if l.failed.Load() != 0 {
		t.Fatalf("%d of %d calls failed during the failover (first: %s)", l.failed.Load(), l.calls.Load(), l.firstErr)
	}
	if len(changes) == 0 {
		t.Fatal("the broker never left shared state although its master was killed")
	}
	if !serving || back > 5*time.Second {
		t.Fatalf("back on shared state %v after the promotion (serving at the end: %v), want within 5 s", back, serving)
	}
	if !strings.Contains(p.logs.String(), "cause=unreachable") {
		t.Fatalf("the outage was not logged as unreachable:\n%s", p.logs.String())
	}
}

// TestLocalAdmissionAcrossReplicas: broker B admits calls on a plain gate
// without a round trip (its metrics count them) for up to 10 s after Redis
// said the gate is plain; broker A then meets a 429 with Retry-After and
// closes the gate. B must learn of it from the announcement, not from its
// 10 s expiry: 50 ms later its next call is answered GATE_CLOSED and sends
// nothing upstream. A runs with local admission off and exports no local
// admission metrics.
func TestLocalAdmissionAcrossReplicas(t *testing.T) {
	srv := redistest.StartServer(t)
	var closed atomic.Bool
	up := newCountingUpstream(t, func(_ int32, w http.ResponseWriter) {
		if closed.Load() {
			w.Header().Set("Retry-After", "120")
			w.WriteHeader(http.StatusTooManyRequests)
		}
	})
	a := startRedisBroker(t, nil, "--redis", srv.URL(), "--redis-local-admission", "0")
	b := startRedisBroker(t, nil, "--redis", srv.URL(), "--redis-local-admission", "10s")
	for _, p := range []*redisBroker{a, b} {
		p.waitHealth(t, StoreHealthService, healthpb.HealthCheckResponse_SERVING, 10*time.Second)
	}
	live := regexp.MustCompile(`(?m)^retrybroker_store_local_admission_live 1$`)
	deadline := time.Now().Add(10 * time.Second)
	for !live.MatchString(b.metricsText(t)) {
		if time.Now().After(deadline) {
			t.Fatalf("broker B's local admission never became live:\n%s", b.metricsText(t))
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The gate is plain once its first window's slow start has ended
	// (SlowStartShare × (SlowStartMax − 1) accepted calls, through A).
	for i := range store.SlowStartShare * store.SlowStartMax {
		if resp, err := a.execute(up.URL + "/repos"); err != nil || resp.GetOutcome() != rbv1.Outcome_OUTCOME_SUCCESS {
			t.Fatalf("broker A call %d: %v %v", i, err, resp.GetOutcome())
		}
	}
	for i := range 20 {
		if resp, err := b.execute(up.URL + "/repos"); err != nil || resp.GetOutcome() != rbv1.Outcome_OUTCOME_SUCCESS {
			t.Fatalf("broker B call %d: %v %v", i, err, resp.GetOutcome())
		}
	}
	admitted := regexp.MustCompile(`(?m)^retrybroker_store_local_admissions_total (\d+)$`).FindStringSubmatch(b.metricsText(t))
	if admitted == nil || admitted[1] == "0" {
		t.Fatalf("broker B admitted nothing locally over 20 calls on a plain gate: %v", admitted)
	}
	if text := a.metricsText(t); strings.Contains(text, "retrybroker_store_local_") {
		t.Fatal("broker A (local admission off) exports local admission metrics")
	}

	closed.Store(true)
	before := up.n.Load()
	if resp, err := a.execute(up.URL + "/repos"); err != nil || resp.GetOutcome() != rbv1.Outcome_OUTCOME_HINT_EXCEEDS_MAX_DELAY {
		t.Fatalf("broker A: %v %v", err, resp.GetOutcome())
	}
	time.Sleep(50 * time.Millisecond)
	resp, err := b.execute(up.URL + "/repos")
	if err != nil || resp.GetOutcome() != rbv1.Outcome_OUTCOME_GATE_CLOSED || len(resp.GetAttempts()) != 0 {
		t.Fatalf("broker B after A closed the gate: %v %v with %d attempts, want GATE_CLOSED and none", err, resp.GetOutcome(), len(resp.GetAttempts()))
	}
	if got := up.n.Load() - before; got != 1 {
		t.Fatalf("upstream saw %d calls after the gate closed, want A's one", got)
	}
}
