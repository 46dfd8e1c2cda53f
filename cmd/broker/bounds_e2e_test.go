package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
)

// bigBodiesConfig is a tenant whose policy returns bodies of up to 64 MiB
// from loopback upstreams; its TEST key is "big-bodies-key".
const bigBodiesConfig = `version: 1
tenants:
  - id: big
    api_key_sha256: [%s]
    policies:
      default:
        max_response_body: 64MiB
        allow_destinations: ["127.0.0.1/32"]
`

// TestConcurrentLargeBodiesStayWithinTheBudget (issue 17, defect 2, on a
// real broker process): 16 concurrent Executes of 64 MiB responses took
// the broker to 2,503-3,094 MiB of peak RSS (up to about 195 MiB per call:
// three copies of the body), their sum bounded by nothing. With the
// default --max-buffered-bytes (256 MiB), the calls take turns for room
// (each reserves its 64 MiB before it sends) and each body is held once,
// so the peak RSS stays within the budget + 128 MiB, and every call
// succeeds. (The bodies are bounded by the budget exactly; the slack is the
// runtime's: 284-287 MiB here, idle or loaded, and 342 MiB once on the CI
// machine, freed heap not yet returned to the system.) BIG_BODIES_CALLS sets the number of calls (default 16).
func TestConcurrentLargeBodiesStayWithinTheBudget(t *testing.T) {
	calls := 16
	if v := os.Getenv("BIG_BODIES_CALLS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatal(err)
		}
		calls = n
	}
	const budget = 256 // MiB: the default of --max-buffered-bytes
	before, peak := largeBodies(t, calls)
	if peak>>10 > budget+128 {
		t.Errorf("peak RSS %d MiB, over the budget + 128 MiB (%d MiB); %d MiB before", peak>>10, budget+128, before>>10)
	}
}

// TestOneLargeBodyIsHeldOnce (issue 17, defect 2): one Execute of a 64 MiB
// response grew the broker's RSS by 158-288 MiB over two runs (2.5 to 4.5
// times the body: the reads, the append, the gRPC encoding, and garbage
// not yet collected). The body must be held at most 1.25 times.
func TestOneLargeBodyIsHeldOnce(t *testing.T) {
	before, peak := largeBodies(t, 1)
	if growth, bound := (peak-before)>>10, int64(80); growth > bound {
		t.Errorf("one 64 MiB body grew the RSS by %d MiB (bound 1.25 x 64 = %d MiB)", growth, bound)
	}
}

// largeBodies runs calls concurrent Executes of 64 MiB responses (with a
// Content-Length) through a real broker and returns its RSS before and its
// peak RSS after, in KiB.
func largeBodies(t *testing.T, calls int) (before, peak int64) {
	t.Helper()
	if testing.Short() {
		t.Skip("moves 64 MiB per call over loopback")
	}
	const size = 64 << 20
	body := bytes.Repeat([]byte("b"), size)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(size))
		_, _ = w.Write(body)
	}))
	defer up.Close()
	path := filepath.Join(t.TempDir(), "broker.yaml")
	if err := os.WriteFile(path, []byte(fmt.Sprintf(bigBodiesConfig, keyHash("big-bodies-key"))), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startProc(t, "--config", path, "--log-level", "error")
	before, err := procStatusKiB(p.cmd.Process.Pid, "VmRSS:")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	var wg sync.WaitGroup
	errs := make([]error, calls)
	took := make([]time.Duration, calls)
	start := time.Now()
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			resp, err := p.client.Execute(withKey(t.Context(), "big-bodies-key"), &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Url: up.URL}},
				grpc.MaxCallRecvMsgSize(128<<20))
			took[i] = time.Since(t0)
			switch {
			case err != nil:
				errs[i] = err
			case resp.GetOutcome() != rbv1.Outcome_OUTCOME_SUCCESS || len(resp.GetResponse().GetBody()) != size:
				errs[i] = fmt.Errorf("outcome %s, %d body bytes", resp.GetOutcome(), len(resp.GetResponse().GetBody()))
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	peak, err = procStatusKiB(p.cmd.Process.Pid, "VmHWM:")
	if err != nil {
		t.Fatal(err)
	}
	for i, err := range errs {
		if err != nil {
			t.Errorf("call %d: %v", i, err)
		}
	}
	slices.Sort(took)
	t.Logf("%d concurrent Executes of 64 MiB: RSS %d MiB before, peak %d MiB; latency p50 %s, max %s; wall %s",
		calls, before>>10, peak>>10, took[len(took)/2].Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond), wall.Round(time.Millisecond))
	return before, peak
}

// TestMaxBufferedBytesFlag: the budget defaults to 256 MiB and may not be
// smaller than the largest bodies of one call.
func TestMaxBufferedBytesFlag(t *testing.T) {
	o, err := parseFlags(nil, io.Discard)
	if err != nil || o.maxBufferedBytes != 256<<20 {
		t.Fatalf("default %d (%v), want 256 MiB", o.maxBufferedBytes, err)
	}
	if _, err := parseFlags([]string{"--max-buffered-bytes", "1000"}, io.Discard); err == nil || !strings.Contains(err.Error(), "at least") {
		t.Fatalf("a budget of 1000 bytes: %v, want refused", err)
	}
}
