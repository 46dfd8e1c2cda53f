package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
)

// TestShutdownEndsCallsParkedOnAReclosingGate (issue 17, defect 8): calls
// parked on a gate that keeps re-closing (the upstream answers every call
// that goes with 429 and Retry-After: 1, so the gate closes again at each
// reopening) have nothing in flight: on SIGTERM each ends at once with its
// attempts, OUTCOME_SHUTTING_DOWN and a retry_after, and the broker exits
// within a second, although --shutdown-timeout is 15 s. Before, their
// waits ended before the drain deadline and went on, and exit took up to
// 13.85 s.
func TestShutdownEndsCallsParkedOnAReclosingGate(t *testing.T) {
	var sent atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		sent.Add(1)
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	t.Cleanup(up.Close)
	p := startProc(t, "--allow-destinations", "127.0.0.1/32", "--shutdown-timeout", "15s")
	const n = 20
	type result struct {
		resp *rbv1.ExecuteResponse
		err  error
	}
	done := make(chan result, n)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for range n {
		go func() {
			r, err := p.client.Execute(ctx, &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Url: up.URL}})
			done <- result{r, err}
		}()
	}
	// Let the gate close and reopen (and close again) at least once.
	for deadline := time.Now().Add(10 * time.Second); sent.Load() < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the upstream saw %d calls in 10 s", sent.Load())
		}
	}
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.done:
		p.done <- err // for the cleanup
	case <-time.After(20 * time.Second):
		t.Fatal("broker still running 20 s after SIGTERM")
	}
	took := time.Since(start)
	t.Logf("SIGTERM with %d calls parked on a re-closing gate (%d sent): exit took %s", n, sent.Load(), took.Round(time.Millisecond))
	for range n {
		r := <-done
		if r.err != nil {
			t.Fatalf("a parked call ended with %v; want a response", r.err)
		}
		if o := r.resp.GetOutcome(); o != rbv1.Outcome_OUTCOME_SHUTTING_DOWN {
			t.Fatalf("outcome %s after %d attempts, want OUTCOME_SHUTTING_DOWN", o, len(r.resp.GetAttempts()))
		}
		if ra := r.resp.GetRetryAfter().AsDuration(); r.resp.GetRetryAfter() == nil || ra < 0 || ra > time.Second {
			t.Fatalf("retry_after %v, want the gate's time (within the 1 s hint)", r.resp.GetRetryAfter())
		}
	}
	if took > time.Second {
		t.Fatalf("exit took %s with only parked calls, want within 1 s", took)
	}
}
