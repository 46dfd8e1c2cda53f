package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
)

// TestShutdownWithOpenWatchStreams (issue #9, defect 9): open
// grpc.health.v1 Watch streams used to hold SIGTERM for the whole
// --shutdown-timeout. They end first now, having seen NOT_SERVING.
func TestShutdownWithOpenWatchStreams(t *testing.T) {
	p := startProc(t, "--shutdown-timeout", "20s")
	var streams []healthpb.Health_WatchClient
	for range 3 {
		s, err := p.health.Watch(context.Background(), &healthpb.HealthCheckRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if r, err := s.Recv(); err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("first watch message %v, %v", r, err)
		}
		streams = append(streams, s)
	}
	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for i, s := range streams {
		r, err := s.Recv()
		if err != nil || r.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
			t.Fatalf("watch %d: %v, %v; want NOT_SERVING before the stream ends", i, r, err)
		}
		if _, err := s.Recv(); err == nil {
			t.Fatalf("watch %d still open after NOT_SERVING", i)
		}
	}
	select {
	case err := <-p.done:
		p.done <- err // for the cleanup
	case <-time.After(10 * time.Second):
		t.Fatal("broker still running 10 s after SIGTERM with watch streams open")
	}
	t.Logf("shutdown with %d open watch streams took %s", len(streams), time.Since(start).Round(time.Millisecond))
}

// TestShutdownEndsParkedCallsWithTheirAttempts (issue #9, defect 9): a call
// parked in a wait when the broker stops ends with its attempts, the
// outcome and a retry_after, instead of a bare UNAVAILABLE.
func TestShutdownEndsParkedCallsWithTheirAttempts(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "30")
		w.WriteHeader(503)
	}))
	t.Cleanup(up.Close)
	p := startProc(t, "--allow-destinations", "127.0.0.1/32", "--shutdown-timeout", "2s")
	type result struct {
		resp *rbv1.ExecuteResponse
		err  error
	}
	done := make(chan result, 1)
	go func() {
		r, err := p.client.Execute(context.Background(), &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Url: up.URL}})
		done <- result{r, err}
	}()
	time.Sleep(300 * time.Millisecond) // the call is parked in its 30 s wait
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("parked call ended with %v; want a response", r.err)
		}
		if r.resp.GetOutcome() != rbv1.Outcome_OUTCOME_SHUTTING_DOWN || len(r.resp.GetAttempts()) != 1 {
			t.Fatalf("outcome %s with %d attempts", r.resp.GetOutcome(), len(r.resp.GetAttempts()))
		}
		if ra := r.resp.GetRetryAfter().AsDuration(); ra < 25*time.Second || ra > 30*time.Second {
			t.Fatalf("retry_after %s, want what was left of the 30 s hint", ra)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the parked call did not end")
	}
}

// wiringConfig is TestRealWiringUnderConcurrency's tenant; its TEST key is
// "wiring-key".
const wiringConfig = `version: 1
tenants:
  - id: wiring
    api_key_sha256: [%s]
    policies:
      default:
        breaker: {min_calls: 100000}
        allow_destinations: ["127.0.0.1/32"]
`

// TestRealWiringUnderConcurrency (issue #9, defect 6): the broker as
// cmd/broker wires it, driven by 16 concurrent callers. `make test` runs
// this package with -race, which reported 5 races in this setup before the
// runner applied its defaults once.
//
// Half of the callers start only after the upstream has answered 6 calls,
// as callers scheduled late on a loaded machine do. Each caller's first
// call gets a 503 with a zero Retry-After (a failure: it closes nothing),
// so late starters can put failures at half of the gate's first 20 calls,
// which rightly opens the breaker; its probes, new URLs answered 503 again,
// then kept it open 5+10+20+40 s (CI: 75 s, every later call
// OUTCOME_BREAKER_OPEN). That is the breaker's documented rule, not
// wiring, so the tenant's breaker counts calls but needs more of them than
// the test makes (min_calls 100,000).
func TestRealWiringUnderConcurrency(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]bool{}
	answered := 0
	lateStart := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		first := !seen[r.URL.RawQuery]
		seen[r.URL.RawQuery] = true
		fail := first && r.URL.Query().Get("n") == "0"
		if !fail {
			if answered++; answered == 6 {
				close(lateStart)
			}
		}
		mu.Unlock()
		if fail { // one 503 with a zero Retry-After, then success
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(503)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(up.Close)
	// The reports go to another gate (another port): on Execute's own gate,
	// 160 reported 429s would rightly teach the broker a quota and hold or
	// refuse the Executes, which is timing, not wiring.
	reported := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(reported.Close)
	ctx, cancel := context.WithCancel(context.Background())
	cfg := filepath.Join(t.TempDir(), "broker.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(wiringConfig, keyHash("wiring-key"))), 0o600); err != nil {
		t.Fatal(err)
	}
	ready := make(chan net.Addr, 1)
	exited := make(chan int, 1)
	go func() {
		exited <- run(ctx, []string{"--listen", "127.0.0.1:0", "--config", cfg, "--log-level", "error"}, io.Discard, ready)
	}()
	var addr net.Addr
	select {
	case addr = <-ready:
	case <-time.After(20 * time.Second):
		t.Fatal("broker did not start")
	}
	t.Cleanup(func() {
		cancel()
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			t.Error("broker did not stop")
		}
	})
	conn, err := grpc.NewClient(addr.String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	client := rbv1.NewBrokerServiceClient(conn)
	var wg sync.WaitGroup
	errs := make(chan error, 16*10)
	for c := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if c >= 8 {
				<-lateStart
			}
			ctx := withKey(context.Background(), "wiring-key")
			for i := range 10 {
				url := up.URL + "/?c=" + strconv.Itoa(c) + "&n=" + strconv.Itoa(i%3)
				resp, err := client.Execute(ctx, &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Url: url}})
				if err != nil {
					errs <- err
					continue
				}
				if resp.GetOutcome() != rbv1.Outcome_OUTCOME_SUCCESS {
					t.Errorf("%s: outcome %s after %d attempts", url, resp.GetOutcome(), len(resp.GetAttempts()))
				}
				if _, err := client.ClassifyResponse(ctx, &rbv1.ClassifyResponseRequest{
					Url: reported.URL + "/?c=" + strconv.Itoa(c), StatusCode: 429, Headers: []*rbv1.HttpHeader{{Name: "Retry-After", Value: "0"}},
				}); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestUnauthenticatedFloodCostsLittleMemory (issue #9, defect 3, measured on
// a real broker process): 8 concurrent unauthenticated 10 MiB
// ClassifyResponse messages made of empty header entries. Before identity
// was checked ahead of decoding, four of them took the broker from 19 to
// 1,581 MiB. The peak RSS growth must stay within 128 MiB.
func TestUnauthenticatedFloodCostsLittleMemory(t *testing.T) {
	p := startProc(t, "--config", "../../testdata/config/two-tenants.yaml")
	before, err := procStatusKiB(p.cmd.Process.Pid, "VmRSS:")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	msg := make([]byte, 0, 10<<20)
	for len(msg) < 10<<20 {
		msg = append(msg, 0x2a, 0x00) // headers (field 5), an empty entry
	}
	var wg sync.WaitGroup
	codes := make([]string, 8)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in, out := rawMsg(msg), rawMsg(nil)
			err := p.conn.Invoke(context.Background(), rbv1.BrokerService_ClassifyResponse_FullMethodName, &in, &out,
				grpc.ForceCodecV2(rawCodec{}), grpc.MaxCallSendMsgSize(64<<20))
			codes[i] = status.Code(err).String()
		}()
	}
	wg.Wait()
	peak, err := procStatusKiB(p.cmd.Process.Pid, "VmHWM:")
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range codes {
		if c != "Unauthenticated" {
			t.Errorf("call %d answered %s", i, c)
		}
	}
	growth := (peak - before) >> 10
	t.Logf("RSS %d MiB before, peak %d MiB after 8 concurrent unauthenticated 10 MiB messages: growth %d MiB (target <= 128)", before>>10, peak>>10, growth)
	if growth > 128 {
		t.Errorf("peak RSS grew by %d MiB", growth)
	}
}

// procStatusKiB reads a "VmXxx:" line of /proc/PID/status, in KiB.
func procStatusKiB(pid int, field string) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("%s not in /proc/%d/status", field, pid)
}

// rawMsg is a message sent as is by rawCodec.
type rawMsg []byte

type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*rawMsg))}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*rawMsg) = data.Materialize()
	return nil
}

func (rawCodec) Name() string { return "proto" }

// TestDistinctHostsKeepHeapBounded (issue #9, defect 2, measured on a real
// broker process): ClassifyResponse with a url over many distinct hosts,
// each a 429 with a long Retry-After, closes one gate per host. Before,
// 1.29 million hosts kept 290 MB of heap, never freed. With the per-tenant
// gate bound, the heap in use stays within 64 MiB. HOSTILE_HOSTS sets the
// number of hosts (default 50,000; the figure in the closing note used
// 1,000,000).
func TestDistinctHostsKeepHeapBounded(t *testing.T) {
	hosts := 50_000
	if v := os.Getenv("HOSTILE_HOSTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatal(err)
		}
		hosts = n
	}
	metricsAddr := freePort(t)
	p := startProc(t, "--metrics-listen", metricsAddr, "--log-level", "error")
	heap := func() float64 {
		t.Helper()
		resp, err := http.Get("http://" + metricsAddr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "go_memstats_heap_inuse_bytes "); ok {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					t.Fatal(err)
				}
				return f
			}
		}
		t.Fatal("no go_memstats_heap_inuse_bytes")
		return 0
	}
	before := heap()
	var wg sync.WaitGroup
	const workers = 16
	errs := make(chan error, workers)
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < hosts; i += workers {
				_, err := p.client.ClassifyResponse(context.Background(), &rbv1.ClassifyResponseRequest{
					Url: "https://h" + strconv.Itoa(i) + ".example/", StatusCode: 429,
					Headers: []*rbv1.HttpHeader{{Name: "Retry-After", Value: "3600"}},
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	after := heap()
	t.Logf("%d distinct hosts in %s: heap in use %.1f MiB before, %.1f MiB after (target <= 64 MiB)",
		hosts, time.Since(start).Round(time.Second), before/(1<<20), after/(1<<20))
	if after > 64<<20 {
		t.Errorf("heap in use %.1f MiB after %d distinct hosts", after/(1<<20), hosts)
	}
}
