package tasks_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/store/memstore"
	"github.com/retrybroker/retrybroker/internal/tasks"
)

// openWith opens and starts a store on a new file with opts (after a
// fast poll); it is closed when the test ends.
func openWith(t *testing.T, p *engine.Policy, opts ...tasks.Option) *tasks.RiverStore {
	t.Helper()
	s, err := tasks.OpenSQLite(t.Context(), filepath.Join(t.TempDir(), "tasks.db"), engine.NewRunner(memstore.New()), prepareWith(t, p),
		append([]tasks.Option{tasks.WithPollInterval(50 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Close(ctx)
	})
	return s
}

func usage(t *testing.T, s *tasks.RiverStore, tenant string) (int64, int64) {
	t.Helper()
	p, b, err := s.Usage(t.Context(), tenant)
	if err != nil {
		t.Fatal(err)
	}
	return p, b
}

func boundOf(err error) string {
	var be *tasks.BoundError
	if errors.As(err, &be) {
		return be.Bound
	}
	return ""
}

// TestBoundPendingPerTenant: a tenant at its bound of pending tasks is
// refused a new one (a *BoundError naming the bound and its flag), and
// RetryTask of a FAILED task is refused too; other tenants are not
// affected; a create of a task the tenant has still answers with it; a
// task that ends (here cancelled; the worker's final states below) frees
// its place.
func TestBoundPendingPerTenant(t *testing.T) {
	up := newUpstream(t, reply{status: 400}, reply{status: 200})
	s := openWith(t, policy(t, nil), tasks.WithMaxPendingPerTenant(2))
	if _, _, err := s.Create(t.Context(), tasks.NewTask{Tenant: "a", ID: "f", Request: request(t, "POST", up.URL)}); err != nil {
		t.Fatal(err)
	}
	if failed := waitFor(t, s, "a", "f", final); failed.State != tasks.StateFailed {
		t.Fatalf("f: %s", failed.State)
	}
	if p, _ := usage(t, s, "a"); p != 0 {
		t.Fatalf("%d pending after the task failed, want 0", p)
	}
	later := time.Now().Add(time.Hour)
	for _, id := range []string{"x", "y"} {
		if _, _, err := s.Create(t.Context(), tasks.NewTask{Tenant: "a", ID: id, NotBefore: later, Request: request(t, "GET", up.URL)}); err != nil {
			t.Fatal(err)
		}
	}
	_, _, err := s.Create(t.Context(), tasks.NewTask{Tenant: "a", ID: "z", NotBefore: later, Request: request(t, "GET", up.URL)})
	if boundOf(err) != "pending tasks" || !strings.Contains(err.Error(), "--tasks-max-pending-per-tenant") || !strings.Contains(err.Error(), "2 pending") {
		t.Fatalf("third pending task: %v", err)
	}
	if _, err := s.Get(t.Context(), "a", "z"); !errors.Is(err, tasks.ErrNotFound) {
		t.Fatalf("the refused task was stored: %v", err)
	}
	if _, err := s.Retry(t.Context(), "a", "f"); boundOf(err) != "pending tasks" {
		t.Fatalf("retry at the bound: %v", err)
	}
	if got, err := s.Get(t.Context(), "a", "f"); err != nil || got.State != tasks.StateFailed {
		t.Fatalf("the refused retry changed the task: %v %v", got, err)
	}
	if again, created, err := s.Create(t.Context(), tasks.NewTask{Tenant: "a", ID: "x", Request: request(t, "GET", up.URL)}); err != nil || created || again.ID != "x" {
		t.Fatalf("create of an existing task at the bound: %v %v", created, err)
	}
	if _, _, err := s.Create(t.Context(), tasks.NewTask{Tenant: "b", ID: "z", NotBefore: later, Request: request(t, "GET", up.URL)}); err != nil {
		t.Fatalf("tenant b: %v", err)
	}
	if _, err := s.Cancel(t.Context(), "a", "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Cancel(t.Context(), "a", "x"); err != nil { // cancelled again: counted once
		t.Fatal(err)
	}
	if p, _ := usage(t, s, "a"); p != 1 {
		t.Fatalf("%d pending after a cancel, want 1", p)
	}
	if _, err := s.Retry(t.Context(), "a", "f"); err != nil {
		t.Fatalf("retry within the bound: %v", err)
	}
	if done := waitFor(t, s, "a", "f", final); done.State != tasks.StateSucceeded {
		t.Fatalf("retried f: %s", done.State)
	}
	if p, _ := usage(t, s, "a"); p != 1 {
		t.Fatalf("%d pending after the retried task succeeded, want 1 (y)", p)
	}
}

// TestBoundBytesPerTenant: the stored requests of a tenant's kept tasks
// (final ones too, until retention deletes them) are bounded; a refused
// create names the bound and its flag.
func TestBoundBytesPerTenant(t *testing.T) {
	clock := engine.NewManualClock(time.Now())
	s := openWith(t, policy(t, nil), tasks.WithMaxBytesPerTenant(250), tasks.WithClock(clock),
		tasks.WithRetention(time.Hour, 2*time.Hour))
	later := time.Now().Add(time.Hour)
	body := request(t, "GET", "http://127.0.0.1:1/"+strings.Repeat("x", 100)) // 140 bytes or so
	if _, _, err := s.Create(t.Context(), tasks.NewTask{Tenant: "a", ID: "one", NotBefore: later, Request: body}); err != nil {
		t.Fatal(err)
	}
	if _, b := usage(t, s, "a"); b != int64(len(body)) {
		t.Fatalf("%d bytes counted, want %d", b, len(body))
	}
	_, _, err := s.Create(t.Context(), tasks.NewTask{Tenant: "a", ID: "two", NotBefore: later, Request: body})
	if boundOf(err) != "stored bytes" || !strings.Contains(err.Error(), "--tasks-max-bytes-per-tenant") {
		t.Fatalf("past the bytes bound: %v", err)
	}
	// A cancelled task still holds its bytes until retention deletes it.
	if _, err := s.Cancel(t.Context(), "a", "one"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Create(t.Context(), tasks.NewTask{Tenant: "a", ID: "two", NotBefore: later, Request: body}); boundOf(err) != "stored bytes" {
		t.Fatalf("after a cancel: %v", err)
	}
	clock.Advance(time.Hour + time.Second)
	if n, err := s.Sweep(t.Context()); err != nil || n != 1 {
		t.Fatalf("sweep: %d %v", n, err)
	}
	if _, b := usage(t, s, "a"); b != 0 {
		t.Fatalf("%d bytes after the sweep, want 0", b)
	}
	if _, _, err := s.Create(t.Context(), tasks.NewTask{Tenant: "a", ID: "two", NotBefore: later, Request: body}); err != nil {
		t.Fatalf("after the sweep: %v", err)
	}
}

// TestBoundHoldsUnderConcurrentCreates: 40 creates at once against a
// bound of 5 store exactly 5 tasks; the others are refused.
func TestBoundHoldsUnderConcurrentCreates(t *testing.T) {
	s := openWith(t, policy(t, nil), tasks.WithMaxPendingPerTenant(5))
	later := time.Now().Add(time.Hour)
	var wg sync.WaitGroup
	var mu sync.Mutex
	created, refused := 0, 0
	for i := range 40 {
		wg.Go(func() {
			_, ok, err := s.Create(t.Context(), tasks.NewTask{Tenant: "a", ID: fmt.Sprint("c", i), NotBefore: later, Request: request(t, "GET", "http://127.0.0.1:1/")})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil && ok:
				created++
			case boundOf(err) != "":
				refused++
			default:
				t.Errorf("create %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	list, _, err := s.List(t.Context(), "a", tasks.StateUnspecified, 100, "")
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := usage(t, s, "a"); created != 5 || refused != 35 || len(list) != 5 || p != 5 {
		t.Fatalf("created %d, refused %d, stored %d, counted %d; want 5, 35, 5, 5", created, refused, len(list), p)
	}
}

// TestStoredResponseBodyCapped: a dispatch stores at most the store's
// response cap (or the policy's max_response_body, when smaller), and a
// cut body is marked truncated; a body within the cap is stored whole and
// not marked.
func TestStoredResponseBodyCapped(t *testing.T) {
	body := strings.Repeat("b", 100)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(up.Close)
	for _, c := range []struct {
		name        string
		cap, policy int64
		want        int
		cut         bool
	}{
		{"store cap", 10, 0, 10, true},
		{"policy smaller", 50, 7, 7, true},
		{"within", 1000, 0, 100, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := policy(t, func(p *engine.Policy) {
				if c.policy > 0 {
					p.MaxResponseBody = c.policy
				}
			})
			s := openWith(t, p, tasks.WithMaxResponseBody(c.cap))
			if _, _, err := s.Create(t.Context(), tasks.NewTask{Tenant: "a", ID: "r", Request: request(t, "GET", up.URL)}); err != nil {
				t.Fatal(err)
			}
			done := waitFor(t, s, "a", "r", final)
			if done.Response == nil || len(done.Response.Body) != c.want || done.Response.Truncated != c.cut || string(done.Response.Body) != body[:c.want] {
				t.Fatalf("%s, response %+v; want %d bytes, truncated %v", done.State, done.Response, c.want, c.cut)
			}
		})
	}
}

// TestCreateBatchRows: one batch of 102 creates, written with multi-row
// statements in chunks (64 + 32 + 4 + 1 distinct tasks): tenant a, with
// one task stored before and a bound of 60 pending, gets its first 59 new
// tasks and has the next 11 refused (one by one, once the whole batch does
// not fit), a second create of a task in the same batch and a create of
// the task it had are answered with those tasks; tenant b's 30 all fit
// (reserved at once). Every stored task is linked to the River job made
// for it, the counters match, and refused tasks are not stored.
func TestCreateBatchRows(t *testing.T) { eachBackend(t, testCreateBatchRows) }

func testCreateBatchRows(t *testing.T, b backend) {
	s := open(t, b, b.place(t), policy(t, nil), tasks.WithMaxPendingPerTenant(60))
	ctx := t.Context()
	later := time.Now().Add(time.Hour)
	req := request(t, "GET", "http://127.0.0.1:1/")
	had, _, err := s.Create(ctx, tasks.NewTask{Tenant: "a", ID: "had", NotBefore: later, Request: req})
	if err != nil {
		t.Fatal(err)
	}
	var nts []tasks.NewTask
	for i := range 70 {
		nts = append(nts, tasks.NewTask{Tenant: "a", ID: fmt.Sprint("a", i), NotBefore: later, Request: req})
		if i == 5 {
			nts = append(nts, tasks.NewTask{Tenant: "b", ID: "b-first", NotBefore: later, Request: req})
		}
	}
	nts = append(nts, tasks.NewTask{Tenant: "a", ID: "a5", NotBefore: later, Request: req, IdempotencyKey: "other"})
	nts = append(nts, tasks.NewTask{Tenant: "a", ID: "had", NotBefore: later, Request: req})
	for i := range 29 {
		nts = append(nts, tasks.NewTask{Tenant: "b", ID: fmt.Sprint("b", i), NotBefore: later, Request: req})
	}
	got, created, errs := s.CreateBatch(ctx, nts)
	keyOf := map[string]string{}
	for i, nt := range nts {
		name := nt.Tenant + "/" + nt.ID
		var n int
		_, _ = fmt.Sscanf(nt.ID, "a%d", &n)
		switch {
		case nt.ID == "had":
			if errs[i] != nil || created[i] || got[i].IdempotencyKey != had.IdempotencyKey {
				t.Fatalf("%s: %v, created %v, %+v; want the task stored before", name, errs[i], created[i], got[i])
			}
		case nt.IdempotencyKey == "other":
			if errs[i] != nil || created[i] || got[i].IdempotencyKey != keyOf[name] {
				t.Fatalf("%s again: %v, created %v, %+v; want the batch's first create of it", name, errs[i], created[i], got[i])
			}
		case nt.Tenant == "a" && n >= 59:
			if boundOf(errs[i]) == "" {
				t.Fatalf("%s: %v, created %v; want refused by the bound", name, errs[i], created[i])
			}
			if _, err := s.Get(ctx, nt.Tenant, nt.ID); !errors.Is(err, tasks.ErrNotFound) {
				t.Fatalf("%s refused, yet Get: %v", name, err)
			}
		default:
			if errs[i] != nil || !created[i] || got[i].ID != nt.ID {
				t.Fatalf("%s: %v, created %v, %+v; want created", name, errs[i], created[i], got[i])
			}
			keyOf[name] = got[i].IdempotencyKey
			tenant, id, err := s.RiverJobTask(ctx, nt.Tenant, nt.ID)
			if err != nil || tenant != nt.Tenant || id != nt.ID {
				t.Fatalf("%s is linked to the job of %s/%s (%v)", name, tenant, id, err)
			}
		}
	}
	if len(keyOf) != 59+30 {
		t.Fatalf("%d tasks created, want 89", len(keyOf))
	}
	if p, _ := usage(t, s, "a"); p != 60 {
		t.Fatalf("tenant a counts %d pending, want 60", p)
	}
	if p, _ := usage(t, s, "b"); p != 30 {
		t.Fatalf("tenant b counts %d pending, want 30", p)
	}
}
