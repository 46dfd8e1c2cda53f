package tasks_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/internal/egress"
	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/store/memstore"
	"github.com/retrybroker/retrybroker/internal/tasks"
)

// reply is one scripted upstream answer.
type reply struct {
	status int
	kv     []string
}

// sent is what the upstream saw of one request.
type sent struct {
	method, idempotencyKey string
	at                     time.Time
}

// upstream is a loopback HTTP server answering from a script (the last
// reply repeats) and recording every request.
type upstream struct {
	*httptest.Server
	mu      sync.Mutex
	replies []reply
	seen    []sent
}

func newUpstream(t *testing.T, replies ...reply) *upstream {
	t.Helper()
	u := &upstream{replies: replies}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		rep := u.replies[min(len(u.seen), len(u.replies)-1)]
		u.seen = append(u.seen, sent{method: r.Method, idempotencyKey: r.Header.Get("Idempotency-Key"), at: time.Now()})
		u.mu.Unlock()
		for i := 0; i+1 < len(rep.kv); i += 2 {
			w.Header().Add(rep.kv[i], rep.kv[i+1])
		}
		w.WriteHeader(rep.status)
		_, _ = w.Write([]byte("body"))
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) requests() []sent {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]sent(nil), u.seen...)
}

// storedRequest is the test's stored request (the server stores an
// ExecuteRequest; the package treats it as opaque bytes either way).
type storedRequest struct {
	Method string `json:"method"`
	URL    string `json:"url"`
}

// loopbackOnly refuses any destination that is not a loopback address,
// so a broken test can never reach elsewhere.
func loopbackOnly(u *url.URL) error {
	switch h := u.Hostname(); {
	case h == "127.0.0.1", h == "::1", strings.HasPrefix(h, "127."):
		return nil
	default:
		return errors.New("test refuses non-loopback destination " + h)
	}
}

// prepareWith returns a Prepare building calls under policy p with a
// plain client (the upstream is loopback; loopbackOnly guards it).
func prepareWith(t testing.TB, p *engine.Policy) tasks.Prepare {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{Proxy: nil}}
	t.Cleanup(client.CloseIdleConnections)
	return func(_ context.Context, tenant, _ string, raw []byte) (*engine.Call, error) {
		var r storedRequest
		if err := json.Unmarshal(raw, &r); err != nil {
			return nil, err
		}
		u, err := url.Parse(r.URL)
		if err != nil {
			return nil, err
		}
		if err := loopbackOnly(u); err != nil {
			return nil, err
		}
		return &engine.Call{
			Policy: p, Reader: p.ReaderFor(""), Method: r.Method, URL: u, Header: http.Header{},
			RedactedURL: egress.RedactURL(u), Client: client, Classify: egress.Classify, Tenant: tenant,
		}, nil
	}
}

func policy(t *testing.T, mut func(*engine.Policy)) *engine.Policy {
	t.Helper()
	p := engine.DefaultPolicy()
	p.Backoff.Base = 10 * time.Millisecond
	p.Backoff.Cap = 10 * time.Millisecond
	if mut != nil {
		mut(&p)
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	return &p
}

// open opens a store of backend b at place with a real engine runner over
// a memory store and opts, and starts it; it is closed when the test ends.
func open(t *testing.T, b backend, place string, p *engine.Policy, opts ...tasks.Option) *tasks.RiverStore {
	t.Helper()
	runner := engine.NewRunner(memstore.New())
	s, err := b.open(t.Context(), place, runner, prepareWith(t, p), append([]tasks.Option{tasks.WithPollInterval(50 * time.Millisecond)}, opts...)...)
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

func request(t testing.TB, method, rawURL string) []byte {
	t.Helper()
	b, err := json.Marshal(storedRequest{Method: method, URL: rawURL})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// waitFor polls the task until cond holds, within a generous bound for a
// loaded machine (River polls; its scheduler moves due jobs every few
// seconds).
func waitFor(t *testing.T, s tasks.Store, tenant, id string, cond func(*tasks.Task) bool) *tasks.Task {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		task, err := s.Get(t.Context(), tenant, id)
		if err != nil {
			t.Fatal(err)
		}
		if cond(task) {
			return task
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s still %s (outcome %s, wait %q, error %q) after 60s", id, task.State, task.Outcome, task.WaitReason, task.Error)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// riverJobSettled returns the task's River job once River has recorded
// the end of its last run (River completes jobs asynchronously).
func riverJobSettled(t *testing.T, s *tasks.RiverStore, tenant, id string) (int, string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		attempt, state, err := s.RiverJob(t.Context(), tenant, id)
		if err != nil {
			t.Fatal(err)
		}
		if state != "running" && state != "available" || time.Now().After(deadline) {
			return attempt, state
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func final(task *tasks.Task) bool { return task.State.Final() }

func TestTaskRunsToSucceeded(t *testing.T) { eachBackend(t, testTaskRunsToSucceeded) }

func testTaskRunsToSucceeded(t *testing.T, b backend) {
	up := newUpstream(t, reply{status: 503}, reply{status: 200})
	s := open(t, b, b.place(t), policy(t, nil))
	task, created, err := s.Create(t.Context(), tasks.NewTask{Tenant: "a", ID: "t1", Request: request(t, "POST", up.URL+"/x")})
	if err != nil || !created {
		t.Fatalf("create: %v created=%v", err, created)
	}
	if task.State != tasks.StateScheduled || task.IdempotencyKey == "" {
		t.Fatalf("created %s with key %q", task.State, task.IdempotencyKey)
	}
	done := waitFor(t, s, "a", "t1", final)
	if done.State != tasks.StateSucceeded || done.Outcome != engine.OutcomeSuccess || done.Response == nil || done.Response.Status != 200 {
		t.Fatalf("final %s outcome %s response %+v error %q", done.State, done.Outcome, done.Response, done.Error)
	}
	if len(done.Attempts) != 2 || done.Attempts[0].Status != 503 || done.Attempts[1].Status != 200 || done.Dispatches != 1 {
		t.Fatalf("attempts %+v dispatches %d", done.Attempts, done.Dispatches)
	}
	// The generated key made the POST retry-safe, and both sends carried it.
	for i, r := range up.requests() {
		if r.idempotencyKey != task.IdempotencyKey {
			t.Errorf("send %d carried key %q, want %q", i+1, r.idempotencyKey, task.IdempotencyKey)
		}
	}
}

// TestTaskWaitsOnLongHintWithoutUsingAttempts: a 429 with Retry-After: 2
// beyond max_delay (1 s) moves the task to WAITING with its reason and
// time; the next dispatch gets the policy's full attempts again (here 2:
// a 503 then a 200, which a used-up budget of 2 would not allow), River
// counts no attempt for the wait, and every send carries the same key.
func TestTaskWaitsOnLongHintWithoutUsingAttempts(t *testing.T) {
	eachBackend(t, testTaskWaitsOnLongHintWithoutUsingAttempts)
}

func testTaskWaitsOnLongHintWithoutUsingAttempts(t *testing.T, b backend) {
	up := newUpstream(t, reply{status: 429, kv: []string{"Retry-After", "2"}}, reply{status: 503}, reply{status: 200})
	p := policy(t, func(p *engine.Policy) { p.MaxRetries = 1; p.MaxDelay = time.Second })
	s := open(t, b, b.place(t), p)
	if _, _, err := s.Create(t.Context(), tasks.NewTask{Tenant: "a", ID: "w", IdempotencyKey: "caller-key", Request: request(t, "POST", up.URL)}); err != nil {
		t.Fatal(err)
	}
	waiting := waitFor(t, s, "a", "w", func(task *tasks.Task) bool {
		return task.State != tasks.StateScheduled && task.State != tasks.StateRunning
	})
	if waiting.State != tasks.StateWaiting || waiting.WaitReason != "hint_exceeds_max_delay" || waiting.Outcome != engine.OutcomeHintExceedsMaxDelay {
		t.Fatalf("after the 429: %s reason %q outcome %s error %q", waiting.State, waiting.WaitReason, waiting.Outcome, waiting.Error)
	}
	if d := waiting.NextRunTime.Sub(waiting.UpdateTime); d != 2*time.Second {
		t.Fatalf("next_run_time is %s after the update, want 2s", d)
	}
	done := waitFor(t, s, "a", "w", final)
	if done.State != tasks.StateSucceeded || len(done.Attempts) != 3 || done.Dispatches != 2 {
		t.Fatalf("final %s, %d attempts, %d dispatches, error %q", done.State, len(done.Attempts), done.Dispatches, done.Error)
	}
	reqs := up.requests()
	if len(reqs) != 3 {
		t.Fatalf("upstream saw %d sends, want 3", len(reqs))
	}
	if gap := reqs[1].at.Sub(reqs[0].at); gap < 2*time.Second {
		t.Fatalf("second send %s after the 429, before its Retry-After (2s)", gap)
	}
	for i, r := range reqs {
		if r.idempotencyKey != "caller-key" {
			t.Errorf("send %d carried key %q, want the caller's", i+1, r.idempotencyKey)
		}
	}
	attempt, state := riverJobSettled(t, s, "a", "w")
	if attempt != 1 || state != "completed" {
		t.Fatalf("river job attempt %d state %s; the snooze must not count an attempt", attempt, state)
	}
}

// TestTaskIDDeduplicatesCreation: a second create with the same task_id
// returns the first task, unchanged, and schedules nothing more.
func TestTaskIDDeduplicatesCreation(t *testing.T) { eachBackend(t, testTaskIDDeduplicatesCreation) }

func testTaskIDDeduplicatesCreation(t *testing.T, b backend) {
	up := newUpstream(t, reply{status: 200})
	other := newUpstream(t, reply{status: 200})
	s := open(t, b, b.place(t), policy(t, nil))
	first, created, err := s.Create(t.Context(), tasks.NewTask{Tenant: "a", ID: "same", Request: request(t, "GET", up.URL)})
	if err != nil || !created {
		t.Fatalf("first: %v %v", err, created)
	}
	second, created, err := s.Create(t.Context(), tasks.NewTask{Tenant: "a", ID: "same", Request: request(t, "GET", other.URL)})
	if err != nil || created {
		t.Fatalf("second: %v created=%v", err, created)
	}
	if second.IdempotencyKey != first.IdempotencyKey || !second.CreateTime.Equal(first.CreateTime) {
		t.Fatalf("second create returned another task: %+v vs %+v", second, first)
	}
	waitFor(t, s, "a", "same", final)
	if n, m := len(up.requests()), len(other.requests()); n != 1 || m != 0 {
		t.Fatalf("first upstream saw %d, second %d; want 1 and 0", n, m)
	}
	// Another tenant may use the same id for its own task.
	if _, created, err := s.Create(t.Context(), tasks.NewTask{Tenant: "b", ID: "same", Request: request(t, "GET", other.URL)}); err != nil || !created {
		t.Fatalf("tenant b: %v created=%v", err, created)
	}
}

// TestTaskCancel: a scheduled task cancelled before it is due never runs,
// and its River job ends: cancelled, or completed when a dispatch that
// had already fetched it found the row cancelled; cancelling again returns
// it unchanged.
func TestTaskCancel(t *testing.T) { eachBackend(t, testTaskCancel) }

func testTaskCancel(t *testing.T, b backend) {
	up := newUpstream(t, reply{status: 200})
	s := open(t, b, b.place(t), policy(t, nil))
	if _, _, err := s.Create(t.Context(), tasks.NewTask{Tenant: "a", ID: "c", NotBefore: time.Now().Add(2 * time.Second), Request: request(t, "GET", up.URL)}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Cancel(t.Context(), "a", "c")
	if err != nil || got.State != tasks.StateCancelled {
		t.Fatalf("cancel: %v %v", err, got)
	}
	again, err := s.Cancel(t.Context(), "a", "c")
	if err != nil || again.State != tasks.StateCancelled || !again.UpdateTime.Equal(got.UpdateTime) {
		t.Fatalf("second cancel: %v %+v", err, again)
	}
	if _, state := riverJobSettled(t, s, "a", "c"); state != "cancelled" && state != "completed" {
		t.Fatalf("river job %s, want cancelled or completed", state)
	}
	// Past its not_before (and a scheduler round), it still has not run.
	time.Sleep(3 * time.Second)
	if n := len(up.requests()); n != 0 {
		t.Fatalf("a cancelled task was sent %d times", n)
	}
}

// TestTaskTenantIsolation: tenant b cannot get, cancel or list tenant a's
// task, and is told NOT_FOUND (ErrNotFound), as for an id that does not
// exist, so ids cannot be probed.
func TestTaskTenantIsolation(t *testing.T) { eachBackend(t, testTaskTenantIsolation) }

func testTaskTenantIsolation(t *testing.T, b backend) {
	s := open(t, b, b.place(t), policy(t, nil))
	if _, _, err := s.Create(t.Context(), tasks.NewTask{Tenant: "a", ID: "secret", NotBefore: time.Now().Add(time.Hour), Request: request(t, "GET", "http://127.0.0.1:1/")}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(t.Context(), "b", "secret"); !errors.Is(err, tasks.ErrNotFound) {
		t.Fatalf("b got a's task: %v", err)
	}
	if _, err := s.Cancel(t.Context(), "b", "secret"); !errors.Is(err, tasks.ErrNotFound) {
		t.Fatalf("b cancelled a's task: %v", err)
	}
	if _, err := s.Get(t.Context(), "b", "nonexistent"); !errors.Is(err, tasks.ErrNotFound) {
		t.Fatalf("unknown id: %v", err)
	}
	list, next, err := s.List(t.Context(), "b", tasks.StateUnspecified, 10, "")
	if err != nil || len(list) != 0 || next != "" {
		t.Fatalf("b listed %d tasks (next %q, %v)", len(list), next, err)
	}
	task, err := s.Get(t.Context(), "a", "secret")
	if err != nil || task.State != tasks.StateScheduled {
		t.Fatalf("a's own task: %v %v", task, err)
	}
}

// TestTaskListPagesByState: pages in creation order, filtered by state,
// with a token that ends on the last page; a forged token is refused.
func TestTaskListPagesByState(t *testing.T) { eachBackend(t, testTaskListPagesByState) }

func testTaskListPagesByState(t *testing.T, b backend) {
	s := open(t, b, b.place(t), policy(t, nil))
	later := time.Now().Add(time.Hour)
	for _, id := range []string{"1", "2", "3", "4", "5"} {
		if _, _, err := s.Create(t.Context(), tasks.NewTask{Tenant: "a", ID: id, NotBefore: later, Request: request(t, "GET", "http://127.0.0.1:1/")}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Cancel(t.Context(), "a", "2"); err != nil {
		t.Fatal(err)
	}
	var ids []string
	token := ""
	for range 5 {
		page, next, err := s.List(t.Context(), "a", tasks.StateScheduled, 2, token)
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range page {
			ids = append(ids, task.ID)
		}
		if token = next; token == "" {
			break
		}
	}
	if strings.Join(ids, ",") != "1,3,4,5" {
		t.Fatalf("scheduled tasks listed %v, want 1,3,4,5", ids)
	}
	if _, _, err := s.List(t.Context(), "a", tasks.StateUnspecified, 2, "not-a-token!"); !errors.Is(err, tasks.ErrBadPageToken) {
		t.Fatalf("forged token: %v", err)
	}
}

// TestTaskSurvivesRestart: a task created by one store and not yet due
// when it closes runs after a new store opens the same file.
func TestTaskSurvivesRestart(t *testing.T) { eachBackend(t, testTaskSurvivesRestart) }

func testTaskSurvivesRestart(t *testing.T, b backend) {
	up := newUpstream(t, reply{status: 200})
	path := b.place(t)
	p := policy(t, nil)
	first, err := b.open(t.Context(), path, engine.NewRunner(memstore.New()), prepareWith(t, p))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := first.Create(t.Context(), tasks.NewTask{Tenant: "a", ID: "r", NotBefore: time.Now().Add(time.Second), Request: request(t, "GET", up.URL)}); err != nil {
		t.Fatal(err)
	}
	if err := first.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	s := open(t, b, path, p)
	done := waitFor(t, s, "a", "r", final)
	if done.State != tasks.StateSucceeded || len(up.requests()) != 1 {
		t.Fatalf("after restart: %s, %d sends", done.State, len(up.requests()))
	}
}

// TestTaskRetryAfterFailure: a task that failed (a 400 is not retryable)
// is scheduled again by Retry and succeeds, keeping its first attempt and
// its idempotency key; Retry of a task that is not FAILED is refused.
func TestTaskRetryAfterFailure(t *testing.T) { eachBackend(t, testTaskRetryAfterFailure) }

func testTaskRetryAfterFailure(t *testing.T, b backend) {
	up := newUpstream(t, reply{status: 400}, reply{status: 200})
	s := open(t, b, b.place(t), policy(t, nil))
	created, _, err := s.Create(t.Context(), tasks.NewTask{Tenant: "a", ID: "f", Request: request(t, "POST", up.URL)})
	if err != nil {
		t.Fatal(err)
	}
	failed := waitFor(t, s, "a", "f", final)
	if failed.State != tasks.StateFailed || failed.Outcome != engine.OutcomeNotRetryable {
		t.Fatalf("first run: %s %s", failed.State, failed.Outcome)
	}
	if _, err := s.Retry(t.Context(), "b", "f"); !errors.Is(err, tasks.ErrNotFound) {
		t.Fatalf("tenant b retried a's task: %v", err)
	}
	again, err := s.Retry(t.Context(), "a", "f")
	if err != nil || again.State != tasks.StateScheduled {
		t.Fatalf("retry: %v %+v", err, again)
	}
	done := waitFor(t, s, "a", "f", final)
	if done.State != tasks.StateSucceeded || len(done.Attempts) != 2 || done.Dispatches != 2 {
		t.Fatalf("after retry: %s, %d attempts, %d dispatches", done.State, len(done.Attempts), done.Dispatches)
	}
	for i, r := range up.requests() {
		if r.idempotencyKey != created.IdempotencyKey {
			t.Errorf("send %d key %q, want %q", i+1, r.idempotencyKey, created.IdempotencyKey)
		}
	}
	if _, err := s.Retry(t.Context(), "a", "f"); !errors.Is(err, tasks.ErrNotFailed) {
		t.Fatalf("retry of a succeeded task: %v", err)
	}
}

// TestTaskDueSoonRunsOnTime: on a store just opened, a task due now and
// one due 3 s later are sent on time and never before their due time: the
// second does not wait for River's scheduler (every 5 s on the leader,
// which would send it up to 5 s late; seen on PostgreSQL in CI) but is
// fetched at once and snoozed to its time. Within 1 s is generous for a
// loaded machine.
func TestTaskDueSoonRunsOnTime(t *testing.T) {
	eachBackend(t, testTaskDueSoonRunsOnTime)
}

func testTaskDueSoonRunsOnTime(t *testing.T, b backend) {
	now := newUpstream(t, reply{status: 200})
	soon := newUpstream(t, reply{status: 200})
	s := open(t, b, b.place(t), policy(t, nil))
	created := time.Now()
	if _, _, err := s.Create(t.Context(), tasks.NewTask{Tenant: "a", ID: "now", Request: request(t, "GET", now.URL)}); err != nil {
		t.Fatal(err)
	}
	dueSoon := created.Add(3 * time.Second).Truncate(time.Millisecond)
	if _, _, err := s.Create(t.Context(), tasks.NewTask{Tenant: "a", ID: "soon", NotBefore: dueSoon, Request: request(t, "GET", soon.URL)}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		id  string
		up  *upstream
		due time.Time
	}{{"now", now, created}, {"soon", soon, dueSoon}} {
		done := waitFor(t, s, "a", c.id, final)
		reqs := c.up.requests()
		if done.State != tasks.StateSucceeded || len(reqs) != 1 || done.Dispatches != 1 {
			t.Fatalf("%s: %s after %d dispatches and %d sends", c.id, done.State, done.Dispatches, len(reqs))
		}
		if reqs[0].at.Before(c.due) {
			t.Fatalf("%s: sent %s before its due time", c.id, c.due.Sub(reqs[0].at))
		}
		lag := reqs[0].at.Sub(c.due)
		t.Logf("%s: sent %s after its due time", c.id, lag)
		if lag > time.Second {
			t.Fatalf("%s: sent %s after its due time", c.id, lag)
		}
	}
}

// TestTaskDueLaterRunsOnTimeNotEarly: a task created with not_before 7 s
// ahead (its River job 'scheduled', freed by River's scheduler up to 5 s
// ahead with its exact time) and a task waiting on a 7 s Retry-After are
// sent at or after their due time, never before, and soon after it: within
// 2 s, generous for a loaded machine. Each records one dispatch per send.
func TestTaskDueLaterRunsOnTimeNotEarly(t *testing.T) {
	eachBackend(t, testTaskDueLaterRunsOnTimeNotEarly)
}

func testTaskDueLaterRunsOnTimeNotEarly(t *testing.T, b backend) {
	later := newUpstream(t, reply{status: 200})
	hinted := newUpstream(t, reply{status: 429, kv: []string{"Retry-After", "7"}}, reply{status: 200})
	p := policy(t, func(p *engine.Policy) { p.MaxDelay = time.Second })
	s := open(t, b, b.place(t), p)
	notBefore := time.Now().Add(7 * time.Second).Truncate(time.Millisecond)
	if _, _, err := s.Create(t.Context(), tasks.NewTask{Tenant: "a", ID: "later", NotBefore: notBefore, Request: request(t, "GET", later.URL)}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Create(t.Context(), tasks.NewTask{Tenant: "a", ID: "hinted", Request: request(t, "GET", hinted.URL)}); err != nil {
		t.Fatal(err)
	}
	waiting := waitFor(t, s, "a", "hinted", func(task *tasks.Task) bool { return task.State == tasks.StateWaiting })
	for _, c := range []struct {
		id  string
		up  *upstream
		due time.Time
	}{{"later", later, notBefore}, {"hinted", hinted, waiting.NextRunTime}} {
		done := waitFor(t, s, "a", c.id, final)
		reqs := c.up.requests()
		last := reqs[len(reqs)-1].at
		if done.State != tasks.StateSucceeded || done.Dispatches != len(reqs) {
			t.Fatalf("%s: %s after %d dispatches and %d sends", c.id, done.State, done.Dispatches, len(reqs))
		}
		if last.Before(c.due) {
			t.Fatalf("%s: sent %s before its due time", c.id, c.due.Sub(last))
		}
		if lag := last.Sub(c.due); lag > 2*time.Second {
			t.Fatalf("%s: sent %s after its due time", c.id, lag)
		}
		t.Logf("%s: sent %s after its due time", c.id, last.Sub(c.due))
	}
}

// TestTaskConcurrentCreatesDeduplicate: 200 concurrent creates of 50 ids
// (each id four times, so duplicates meet inside one group-committed
// transaction and across them) create each id exactly once; every create
// of an id returns the same task (its idempotency key), and each task is
// sent once.
func TestTaskConcurrentCreatesDeduplicate(t *testing.T) {
	eachBackend(t, testTaskConcurrentCreatesDeduplicate)
}

func testTaskConcurrentCreatesDeduplicate(t *testing.T, b backend) {
	up := newUpstream(t, reply{status: 200})
	s := open(t, b, b.place(t), policy(t, nil))
	const ids, copies = 50, 4
	type result struct {
		key     string
		created bool
	}
	results := make([][]result, ids)
	for i := range results {
		results[i] = make([]result, copies)
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range ids {
		for c := range copies {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				task, created, err := s.Create(t.Context(), tasks.NewTask{
					Tenant: "a", ID: "id-" + strconv.Itoa(i),
					Request: request(t, "GET", up.URL+"/?i="+strconv.Itoa(i)),
				})
				if err != nil {
					t.Error(err)
					return
				}
				results[i][c] = result{task.IdempotencyKey, created}
			}()
		}
	}
	close(start)
	wg.Wait()
	for i, rs := range results {
		n := 0
		for _, r := range rs {
			if r.created {
				n++
			}
			if r.key == "" || r.key != rs[0].key {
				t.Fatalf("id %d: creates returned keys %+v", i, rs)
			}
		}
		if n != 1 {
			t.Fatalf("id %d created %d times: %+v", i, n, rs)
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for len(up.requests()) < ids && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // room for a duplicate send to show
	sent := map[string]int{}
	for _, r := range up.requests() {
		sent[r.idempotencyKey]++
	}
	if len(sent) != ids {
		t.Fatalf("%d distinct tasks sent, want %d", len(sent), ids)
	}
	for k, n := range sent {
		if n != 1 {
			t.Fatalf("task with key %s sent %d times", k, n)
		}
	}
}
