package tasks_test

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/store/memstore"
	"github.com/retrybroker/retrybroker/internal/tasks"
)

// TestTaskDispatchBoundedByRescueAfter: with --tasks-rescue-after 4s a
// dispatch's engine run ends within a quarter of it (1 s) even when the
// policy's total_timeout is longer and the upstream hangs, so that River
// never rescues (and runs a second time) a dispatch that still runs; the
// task is not sent again.
func TestTaskDispatchBoundedByRescueAfter(t *testing.T) {
	eachBackend(t, testTaskDispatchBoundedByRescueAfter)
}

func testTaskDispatchBoundedByRescueAfter(t *testing.T, b backend) {
	release := make(chan struct{})
	var mu sync.Mutex
	sends := 0
	var sentAt time.Time
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		sends++
		sentAt = time.Now()
		mu.Unlock()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(up.Close)
	t.Cleanup(func() { close(release) })
	p := policy(t, func(p *engine.Policy) { p.TotalTimeout = time.Minute; p.MaxRetries = 0 })
	s := open(t, b, b.place(t), p, tasks.WithRescueAfter(4*time.Second))
	if _, _, err := s.Create(t.Context(), tasks.NewTask{Tenant: "a", ID: "slow", Request: request(t, "GET", up.URL)}); err != nil {
		t.Fatal(err)
	}
	done := waitFor(t, s, "a", "slow", final)
	if done.State != tasks.StateFailed || done.Dispatches != 1 {
		t.Fatalf("a hanging upstream: %s after %d dispatches (outcome %s, error %q), want FAILED after 1", done.State, done.Dispatches, done.Outcome, done.Error)
	}
	// The send began after River took the job; the task was final within
	// the rescue delay of it (the engine run is cut at 1 s).
	mu.Lock()
	d := done.UpdateTime.Sub(sentAt)
	mu.Unlock()
	if d > 4*time.Second || d < 500*time.Millisecond {
		t.Fatalf("the task was final %s after its send began; want the engine run cut at about 1s, within the rescue delay (4s)", d)
	}
	// Past the rescue delay and a rescuer round, it was sent once.
	time.Sleep(5 * time.Second)
	mu.Lock()
	defer mu.Unlock()
	if sends != 1 {
		t.Fatalf("upstream saw %d sends, want 1", sends)
	}
}

// TestPostgresReplicasStartTogether: brokers that open one fresh database
// at the same moment all succeed (River's migrations take no lock of
// their own; OpenPostgres serializes them).
func TestPostgresReplicasStartTogether(t *testing.T) {
	dsn := pg.Get(t).NewDatabase(t)
	p := policy(t, nil)
	errs := make(chan error, 4)
	for range cap(errs) {
		go func() {
			s, err := tasks.OpenPostgres(t.Context(), dsn, engine.NewRunner(memstore.New()), prepareWith(t, p))
			if err == nil {
				err = s.Close(t.Context())
			}
			errs <- err
		}()
	}
	for range cap(errs) {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
