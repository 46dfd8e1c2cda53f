package tasks_test

import (
	"errors"
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/tasks"
)

// TestRetentionSweep: as the store's clock passes, SUCCEEDED and
// CANCELLED tasks are deleted after the retention, FAILED ones only after
// the failed retention, and a task that is not final never; the bytes of
// the deleted tasks leave their tenant's counter.
func TestRetentionSweep(t *testing.T) {
	ok, bad := newUpstream(t, reply{status: 200}), newUpstream(t, reply{status: 400})
	clock := engine.NewManualClock(time.Now())
	s := openWith(t, policy(t, nil), tasks.WithClock(clock), tasks.WithRetention(time.Hour, 2*time.Hour), tasks.WithSweepInterval(time.Hour))
	later := time.Now().Add(24 * time.Hour)
	pending := request(t, "GET", bad.URL+"/pending")
	for _, nt := range []tasks.NewTask{
		{Tenant: "a", ID: "ok", Request: request(t, "GET", ok.URL)},
		{Tenant: "a", ID: "bad", Request: request(t, "GET", bad.URL)},
		{Tenant: "a", ID: "cancelled", NotBefore: later, Request: request(t, "GET", ok.URL)},
		{Tenant: "a", ID: "pending", NotBefore: later, Request: pending},
	} {
		if _, _, err := s.Create(t.Context(), nt); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Cancel(t.Context(), "a", "cancelled"); err != nil {
		t.Fatal(err)
	}
	if got := waitFor(t, s, "a", "ok", final); got.State != tasks.StateSucceeded {
		t.Fatalf("ok: %s", got.State)
	}
	if got := waitFor(t, s, "a", "bad", final); got.State != tasks.StateFailed {
		t.Fatalf("bad: %s", got.State)
	}
	kept := func(want ...string) {
		t.Helper()
		for _, id := range []string{"ok", "bad", "cancelled", "pending"} {
			_, err := s.Get(t.Context(), "a", id)
			isKept := err == nil
			wanted := false
			for _, w := range want {
				wanted = wanted || w == id
			}
			if isKept != wanted || (err != nil && !errors.Is(err, tasks.ErrNotFound)) {
				t.Errorf("task %s kept %v (%v), want %v", id, isKept, err, wanted)
			}
		}
	}
	clock.Advance(time.Hour - time.Second)
	if n, err := s.Sweep(t.Context()); err != nil || n != 0 {
		t.Fatalf("sweep before the retention: %d %v", n, err)
	}
	kept("ok", "bad", "cancelled", "pending")
	clock.Advance(2 * time.Second)
	if n, err := s.Sweep(t.Context()); err != nil || n != 2 {
		t.Fatalf("sweep past the retention: %d %v", n, err)
	}
	kept("bad", "pending")
	clock.Advance(time.Hour)
	if n, err := s.Sweep(t.Context()); err != nil || n != 1 {
		t.Fatalf("sweep past the failed retention: %d %v", n, err)
	}
	kept("pending")
	clock.Advance(1000 * time.Hour)
	if n, err := s.Sweep(t.Context()); err != nil || n != 0 {
		t.Fatalf("sweep of a pending task: %d %v", n, err)
	}
	kept("pending")
	if p, b := usage(t, s, "a"); p != 1 || b != int64(len(pending)) {
		t.Fatalf("usage %d pending, %d bytes; want 1 and %d", p, b, len(pending))
	}
}

// TestRetentionSweeperRuns: the store's own sweeper deletes a final task
// once the store's clock is past its retention, with no Sweep call.
func TestRetentionSweeperRuns(t *testing.T) {
	clock := engine.NewManualClock(time.Now())
	s := openWith(t, policy(t, nil), tasks.WithClock(clock), tasks.WithRetention(time.Minute, time.Minute), tasks.WithSweepInterval(20*time.Millisecond))
	if _, _, err := s.Create(t.Context(), tasks.NewTask{Tenant: "a", ID: "c", NotBefore: time.Now().Add(time.Hour), Request: request(t, "GET", "http://127.0.0.1:1/")}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Cancel(t.Context(), "a", "c"); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute + time.Second)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, err := s.Get(t.Context(), "a", "c")
		if errors.Is(err, tasks.ErrNotFound) {
			return
		}
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("the cancelled task is still kept 30s after its retention: %v", err)
		}
	}
}
