package broker_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/retrybroker/retrybroker/clients/go/broker"
	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
)

// tasksBroker starts a broker for one test with task storage in a SQLite
// file under the test's temporary directory, allowed to call 127.0.0.1;
// the process is killed by its pid when the test ends.
func tasksBroker(t *testing.T) *broker.Client {
	t.Helper()
	p := startBrokerProcess(t, "--allow-destinations", "127.0.0.1/32",
		"--tasks-sqlite", filepath.Join(t.TempDir(), "tasks.db"))
	c, err := broker.New(p.target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// watchAll watches task id to its end and returns every task it yielded.
func watchAll(t *testing.T, ctx context.Context, c *broker.Client, id string) []*broker.Task {
	t.Helper()
	var seen []*broker.Task
	for task, err := range c.WatchTask(ctx, id) {
		if err != nil {
			t.Fatalf("WatchTask(%s) after %d tasks: %v", id, len(seen), err)
		}
		if task.ID != id {
			t.Fatalf("WatchTask(%s) yielded task %q", id, task.ID)
		}
		seen = append(seen, task)
	}
	if len(seen) == 0 {
		t.Fatalf("WatchTask(%s) yielded nothing", id)
	}
	return seen
}

func states(ts []*broker.Task) []broker.TaskState {
	out := make([]broker.TaskState, len(ts))
	for i, t := range ts {
		out[i] = t.State
	}
	return out
}

// TestTasksRealBroker runs the task methods against a real broker process
// with --tasks-sqlite and a loopback upstream. The subtests run in order
// on one broker: the list subtest counts the SCHEDULED tasks, so every
// other subtest leaves its tasks final.
func TestTasksRealBroker(t *testing.T) {
	t.Parallel()
	c := tasksBroker(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	future := time.Now().Add(time.Hour)

	t.Run("POST task retried to SUCCEEDED with one idempotency key", func(t *testing.T) {
		up := newUpstream(t, reply(503, "Retry-After: 0"), reply(201))
		req, _ := http.NewRequest(http.MethodPost, up.URL+"/orders", strings.NewReader(`{"qty":1}`))
		req.Header.Set("Content-Type", "application/json")
		created, err := c.CreateTask(ctx, req, broker.TaskID("post-1"))
		if err != nil {
			t.Fatal(err)
		}
		if created.ID != "post-1" || created.State != broker.TaskScheduled || created.IdempotencyKey == "" ||
			created.CreateTime.IsZero() || created.NextRunTime.IsZero() || created.Outcome != broker.OutcomeUnspecified {
			t.Fatalf("created %+v", created)
		}
		seen := watchAll(t, ctx, c, "post-1")
		final := seen[len(seen)-1]
		if final.State != broker.TaskSucceeded || final.Outcome != broker.OutcomeSuccess || !final.NextRunTime.IsZero() {
			t.Fatalf("watched %v; final %+v", states(seen), final)
		}
		for _, s := range seen[:len(seen)-1] {
			if s.State.Final() {
				t.Fatalf("watch went on after a final state: %v", states(seen))
			}
		}
		if len(final.Attempts) != 2 || final.Attempts[0].Status != 503 || final.Attempts[1].Status != 201 ||
			final.Attempts[0].Decision.Action != broker.ActionRetry {
			t.Fatalf("attempts %+v", final.Attempts)
		}
		if r := final.Response; r == nil || r.StatusCode != 201 || string(r.Body) != "Created" || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/plain") {
			t.Fatalf("response %+v", final.Response)
		}
		if final.IdempotencyKey != created.IdempotencyKey {
			t.Fatalf("key changed from %q to %q", created.IdempotencyKey, final.IdempotencyKey)
		}
		up.mu.Lock()
		defer up.mu.Unlock()
		if len(up.headers) != 2 {
			t.Fatalf("upstream saw %d sends, want 2", len(up.headers))
		}
		for i, h := range up.headers {
			if got := h.Get("Idempotency-Key"); got != created.IdempotencyKey {
				t.Fatalf("send %d carried Idempotency-Key %q, want %q", i+1, got, created.IdempotencyKey)
			}
		}
		got, err := c.GetTask(ctx, "post-1")
		if err != nil || got.State != broker.TaskSucceeded || len(got.Attempts) != 2 {
			t.Fatalf("GetTask: %+v, %v", got, err)
		}
	})

	t.Run("task_id deduplicates creation", func(t *testing.T) {
		first, err := c.CreateTask(ctx, mustRequest(t, http.MethodGet, "http://127.0.0.1:1/a", nil),
			broker.TaskID("dedup"), broker.NotBefore(future))
		if err != nil {
			t.Fatal(err)
		}
		second := mustRequest(t, http.MethodPost, "http://127.0.0.1:1/b", nil)
		second.Header.Set("Idempotency-Key", "another-key")
		again, err := c.CreateTask(ctx, second, broker.TaskID("dedup"))
		if err != nil {
			t.Fatal(err)
		}
		if again.IdempotencyKey != first.IdempotencyKey || again.IdempotencyKey == "another-key" ||
			!again.CreateTime.Equal(first.CreateTime) || !again.NotBefore.Equal(first.NotBefore) || again.State != broker.TaskScheduled {
			t.Fatalf("second create returned %+v, want the first %+v", again, first)
		}
		if first.NotBefore.Sub(future).Abs() > time.Millisecond {
			t.Fatalf("not_before %v, want %v", first.NotBefore, future)
		}
		cancelled, err := c.CancelTask(ctx, "dedup")
		if err != nil || cancelled.State != broker.TaskCancelled {
			t.Fatalf("cancel: %+v %v", cancelled, err)
		}
	})

	t.Run("cancel a task whose not_before is in the future", func(t *testing.T) {
		up := newUpstream(t, reply(200))
		created, err := c.CreateTask(ctx, mustRequest(t, http.MethodGet, up.URL+"/later", nil),
			broker.TaskID("later"), broker.NotBefore(future), broker.GiveUpAfter(future.Add(time.Hour)))
		if err != nil {
			t.Fatal(err)
		}
		if created.State != broker.TaskScheduled || created.NextRunTime.Sub(future).Abs() > time.Millisecond ||
			created.GiveUpAfter.Sub(future.Add(time.Hour)).Abs() > time.Millisecond {
			t.Fatalf("created %+v", created)
		}
		cancelled, err := c.CancelTask(ctx, "later")
		if err != nil {
			t.Fatal(err)
		}
		if cancelled.State != broker.TaskCancelled || !cancelled.NextRunTime.IsZero() || len(cancelled.Attempts) != 0 {
			t.Fatalf("cancelled %+v", cancelled)
		}
		again, err := c.CancelTask(ctx, "later") // a final task comes back unchanged
		if err != nil || again.State != broker.TaskCancelled || !again.UpdateTime.Equal(cancelled.UpdateTime) {
			t.Fatalf("second cancel: %+v %v", again, err)
		}
		if seen := watchAll(t, ctx, c, "later"); len(seen) != 1 || seen[0].State != broker.TaskCancelled {
			t.Fatalf("watch of a cancelled task: %v", states(seen))
		}
		if _, err := c.RetryTask(ctx, "later"); !broker.IsFailedPrecondition(err) {
			t.Fatalf("retry of a cancelled task: %v, want FAILED_PRECONDITION", err)
		}
		if n := len(up.times()); n != 0 {
			t.Fatalf("the upstream saw %d sends of a cancelled task", n)
		}
	})

	t.Run("ListTasks by state, paged", func(t *testing.T) {
		var want []string
		for i := range 5 {
			id := fmt.Sprintf("list-%d", i)
			if _, err := c.CreateTask(ctx, mustRequest(t, http.MethodGet, "http://127.0.0.1:1/", nil),
				broker.TaskID(id), broker.NotBefore(future)); err != nil {
				t.Fatal(err)
			}
			want = append(want, id)
		}
		var got []string
		for task, err := range c.ListTasks(ctx, broker.InState(broker.TaskScheduled), broker.PageSize(2)) {
			if err != nil {
				t.Fatal(err)
			}
			if task.State != broker.TaskScheduled {
				t.Fatalf("listed %s in state %s", task.ID, task.State)
			}
			got = append(got, task.ID)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("listed %v, want %v (oldest first)", got, want)
		}
		// The pages themselves: 2, 2, 1, the last without a token.
		var sizes []int
		token := ""
		for {
			page, err := c.ListTasksPage(ctx, token, broker.InState(broker.TaskScheduled), broker.PageSize(2))
			if err != nil {
				t.Fatal(err)
			}
			sizes = append(sizes, len(page.Tasks))
			if page.NextPageToken == "" {
				break
			}
			token = page.NextPageToken
		}
		if !slices.Equal(sizes, []int{2, 2, 1}) {
			t.Fatalf("page sizes %v, want [2 2 1]", sizes)
		}
		// Breaking out of the loop stops it.
		n := 0
		for _, err := range c.ListTasks(ctx, broker.InState(broker.TaskScheduled), broker.PageSize(2)) {
			if err != nil {
				t.Fatal(err)
			}
			n++
			if n == 3 {
				break
			}
		}
		if n != 3 {
			t.Fatalf("loop ran %d times", n)
		}
		var cancelled []string
		for task, err := range c.ListTasks(ctx, broker.InState(broker.TaskCancelled)) {
			if err != nil {
				t.Fatal(err)
			}
			cancelled = append(cancelled, task.ID)
		}
		if !slices.Equal(cancelled, []string{"dedup", "later"}) {
			t.Fatalf("cancelled tasks %v, want [dedup later]", cancelled)
		}
		all := 0
		for _, err := range c.ListTasks(ctx) {
			if err != nil {
				t.Fatal(err)
			}
			all++
		}
		if all != 8 { // post-1, dedup, later, list-0..4
			t.Fatalf("%d tasks in every state, want 8", all)
		}
		// Leaving a watch of a task due in an hour ends the loop at once (an
		// iterator that went on yielding after the break would panic).
		watched := 0
		for task, err := range c.WatchTask(ctx, "list-0") {
			if err != nil || task.State != broker.TaskScheduled {
				t.Fatalf("watch of list-0: %+v %v", task, err)
			}
			watched++
			break
		}
		if watched != 1 {
			t.Fatalf("watch yielded %d times before the break", watched)
		}
		for _, id := range want {
			if _, err := c.CancelTask(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		_, err := c.ListTasksPage(ctx, "not-a-token")
		if !broker.IsInvalidArgument(err) {
			t.Fatalf("bad page token: %v", err)
		}
	})

	t.Run("RetryTask runs a FAILED task again", func(t *testing.T) {
		up := newUpstream(t, reply(400), reply(200))
		created, err := c.CreateTask(ctx, mustRequest(t, http.MethodGet, up.URL+"/flaky", nil), broker.TaskID("retry-me"))
		if err != nil {
			t.Fatal(err)
		}
		seen := watchAll(t, ctx, c, "retry-me")
		failed := seen[len(seen)-1]
		if failed.State != broker.TaskFailed || failed.Outcome != broker.OutcomeNotRetryable ||
			len(failed.Attempts) != 1 || failed.Response == nil || failed.Response.StatusCode != 400 {
			t.Fatalf("first run: watched %v, final %+v", states(seen), failed)
		}
		retried, err := c.RetryTask(ctx, "retry-me")
		if err != nil {
			t.Fatal(err)
		}
		if retried.State != broker.TaskScheduled || retried.IdempotencyKey != created.IdempotencyKey {
			t.Fatalf("retried %+v", retried)
		}
		seen = watchAll(t, ctx, c, "retry-me")
		done := seen[len(seen)-1]
		if done.State != broker.TaskSucceeded || done.Response == nil || done.Response.StatusCode != 200 || len(done.Attempts) != 2 {
			t.Fatalf("after retry: watched %v, final %+v", states(seen), done)
		}
		if n := len(up.times()); n != 2 {
			t.Fatalf("the upstream saw %d sends, want 2", n)
		}
		if _, err := c.RetryTask(ctx, "retry-me"); !broker.IsFailedPrecondition(err) {
			t.Fatalf("retry of a succeeded task: %v, want FAILED_PRECONDITION", err)
		}
	})

	t.Run("unknown task is NOT_FOUND", func(t *testing.T) {
		check := func(op string, err error) {
			t.Helper()
			var be *broker.Error
			if !broker.IsNotFound(err) || !errors.As(err, &be) || be.Code != codes.NotFound ||
				!strings.Contains(err.Error(), "not found (NOT_FOUND)") {
				t.Fatalf("%s of an unknown task: %v, want a NOT_FOUND *broker.Error", op, err)
			}
		}
		_, err := c.GetTask(ctx, "nope")
		check("GetTask", err)
		_, err = c.CancelTask(ctx, "nope")
		check("CancelTask", err)
		_, err = c.RetryTask(ctx, "nope")
		check("RetryTask", err)
		n := 0
		for task, err := range c.WatchTask(ctx, "nope") {
			n++
			if task != nil {
				t.Fatalf("watch yielded %+v", task)
			}
			check("WatchTask", err)
		}
		if n != 1 {
			t.Fatalf("watch of an unknown task yielded %d times, want once (the error)", n)
		}
	})

	t.Run("a sensitive header is refused", func(t *testing.T) {
		req := mustRequest(t, http.MethodGet, "http://127.0.0.1:1/", nil)
		req.Header.Set("Authorization", "Bearer s3cret")
		_, err := c.CreateTask(ctx, req)
		var be *broker.Error
		if !broker.IsInvalidArgument(err) || !errors.As(err, &be) || len(be.FieldViolations) != 1 ||
			!strings.Contains(be.FieldViolations[0].Description, "broker-held credential") || strings.Contains(err.Error(), "s3cret") {
			t.Fatalf("task with Authorization: %v", err)
		}
	})
}

// TestTasksUnimplementedRealBroker: a broker without --tasks-sqlite
// answers the task methods with UNIMPLEMENTED.
func TestTasksUnimplementedRealBroker(t *testing.T) {
	t.Parallel()
	c := realClient(t)
	_, err := c.GetTask(t.Context(), "x")
	var be *broker.Error
	if !errors.As(err, &be) || be.Code != codes.Unimplemented || !strings.Contains(be.Message, "--tasks-sqlite") {
		t.Fatalf("GetTask without task storage: %v", err)
	}
}

func mustRequest(t *testing.T, method, url string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// TestTaskStatesFollowTheProto: every proto TaskState has a constant, and
// only the three final ones are Final.
func TestTaskStatesFollowTheProto(t *testing.T) {
	known := map[broker.TaskState]bool{
		broker.TaskStateUnspecified: false, broker.TaskScheduled: false, broker.TaskWaiting: false,
		broker.TaskRunning: false, broker.TaskSucceeded: true, broker.TaskFailed: true, broker.TaskCancelled: true,
	}
	if len(known) != len(rbv1.TaskState_name) {
		t.Fatalf("%d constants for %d proto states", len(known), len(rbv1.TaskState_name))
	}
	for _, name := range rbv1.TaskState_name {
		final, ok := known[broker.TaskState(name)]
		if !ok {
			t.Fatalf("no constant for %s", name)
		}
		if broker.TaskState(name).Final() != final {
			t.Fatalf("%s.Final() = %v", name, !final)
		}
	}
}
