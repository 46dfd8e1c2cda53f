package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
)

// TestTaskSurvivesSIGKILL: a task created on a broker that is killed with
// SIGKILL before the task is due (not_before in the future) runs once
// after a new broker starts on the same --tasks-sqlite file: 0 lost, and
// its one send carries the task's idempotency key.
func TestTaskSurvivesSIGKILL(t *testing.T) {
	var mu sync.Mutex
	var keys []string
	var sentAt time.Time
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		sentAt = time.Now()
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(up.Close)
	sent := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), keys...)
	}
	db := filepath.Join(t.TempDir(), "tasks.db")
	args := []string{"--allow-destinations", "127.0.0.1/32", "--tasks-sqlite", db}

	first := startProc(t, args...)
	ctx, cancel := context.WithTimeout(t.Context(), 150*time.Second)
	defer cancel()
	notBefore := time.Now().Add(3 * time.Second)
	created, err := first.client.CreateTask(ctx, &rbv1.CreateTaskRequest{
		TaskId:    "survivor",
		NotBefore: timestamppb.New(notBefore),
		Execute:   &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Method: "POST", Url: up.URL + "/orders", Body: []byte(`{}`)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if created.GetState() != rbv1.TaskState_TASK_STATE_SCHEDULED || created.GetIdempotencyKey() == "" {
		t.Fatalf("created %s with key %q", created.GetState(), created.GetIdempotencyKey())
	}
	// The first broker dies before the task is due.
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	err = <-first.done
	first.done <- err // for the cleanup, which waits for it
	if n := len(sent()); n != 0 {
		t.Fatalf("the task was sent %d times before the kill; not_before is in the future", n)
	}

	second := startProc(t, args...)
	var task *rbv1.Task
	for deadline := time.Now().Add(100 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		task, err = second.client.GetTask(ctx, &rbv1.GetTaskRequest{TaskId: "survivor"})
		if err != nil {
			t.Fatal(err)
		}
		if s := task.GetState(); s == rbv1.TaskState_TASK_STATE_SUCCEEDED || s == rbv1.TaskState_TASK_STATE_FAILED || time.Now().After(deadline) {
			break
		}
	}
	if task.GetState() != rbv1.TaskState_TASK_STATE_SUCCEEDED || task.GetResponse().GetStatusCode() != http.StatusCreated ||
		task.GetOutcome() != rbv1.Outcome_OUTCOME_SUCCESS || len(task.GetAttempts()) != 1 {
		t.Fatalf("after the restart: %s outcome %s response %d, %d attempts", task.GetState(), task.GetOutcome(), task.GetResponse().GetStatusCode(), len(task.GetAttempts()))
	}
	if got := sent(); len(got) != 1 || got[0] != created.GetIdempotencyKey() {
		t.Fatalf("upstream saw keys %q, want one send with %q", got, created.GetIdempotencyKey())
	}
	// Sent by the restarted broker, never before not_before, and soon: a
	// task due within 5 s is inserted available and its first dispatch
	// snoozes the rest, so it waits for no leader (the killed broker's
	// lease lapses after about 15 s). Should the kill come during that
	// early dispatch, its job is rescued after its short timeout and the
	// rescuer's next run (30 s each); 90 s bounds both, and a job left to
	// --tasks-rescue-after (10 min) fails here.
	mu.Lock()
	lag := sentAt.Sub(notBefore.Truncate(time.Microsecond))
	mu.Unlock()
	t.Logf("sent %s after not_before, across a SIGKILL and a restart", lag)
	if lag < 0 || lag > 90*time.Second {
		t.Fatalf("sent %s after not_before; want within [0, 90s]", lag)
	}
	// A second create with the same id returns the first task.
	again, err := second.client.CreateTask(ctx, &rbv1.CreateTaskRequest{
		TaskId:  "survivor",
		Execute: &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Method: "GET", Url: up.URL + "/other"}},
	})
	if err != nil || again.GetIdempotencyKey() != created.GetIdempotencyKey() || again.GetState() != rbv1.TaskState_TASK_STATE_SUCCEEDED {
		t.Fatalf("dedup: %v %v", again, err)
	}
}

// TestTaskRPCStatuses: the task RPCs answer precise statuses through a
// real broker: an unknown id is NOT_FOUND, a sensitive header is refused
// (pointing to broker-held credentials), a bad request is INVALID_ARGUMENT
// as in Execute, and a broker without --tasks-sqlite answers UNIMPLEMENTED.
func TestTaskRPCStatuses(t *testing.T) {
	b := startProc(t, "--allow-destinations", "127.0.0.1/32", "--tasks-sqlite", filepath.Join(t.TempDir(), "tasks.db"))
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := b.client.GetTask(ctx, &rbv1.GetTaskRequest{TaskId: "nope"}); status.Code(err) != codes.NotFound {
		t.Fatalf("unknown task: %v", err)
	}
	if _, err := b.client.CancelTask(ctx, &rbv1.CancelTaskRequest{TaskId: "nope"}); status.Code(err) != codes.NotFound {
		t.Fatalf("cancel unknown task: %v", err)
	}
	_, err := b.client.CreateTask(ctx, &rbv1.CreateTaskRequest{Execute: &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{
		Url: "http://127.0.0.1:1/", Headers: []*rbv1.HttpHeader{{Name: "authorization", Value: "Bearer s3cret"}},
	}}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "broker-held credential") || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("sensitive header: %v", err)
	}
	if _, err := b.client.CreateTask(ctx, &rbv1.CreateTaskRequest{Execute: &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Url: "ftp://x/"}}}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("bad url: %v", err)
	}
	if _, err := b.client.CreateTask(ctx, &rbv1.CreateTaskRequest{TaskId: "bad id!", Execute: &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Url: "http://127.0.0.1:1/"}}}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("bad task_id: %v", err)
	}
	later, err := b.client.CreateTask(ctx, &rbv1.CreateTaskRequest{
		TaskId: "later", NotBefore: timestamppb.New(time.Now().Add(time.Hour)),
		Execute: &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Url: "http://127.0.0.1:1/"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	list, err := b.client.ListTasks(ctx, &rbv1.ListTasksRequest{State: rbv1.TaskState_TASK_STATE_SCHEDULED})
	if err != nil || len(list.GetTasks()) != 1 || list.GetTasks()[0].GetTaskId() != later.GetTaskId() {
		t.Fatalf("list: %v %v", list, err)
	}
	if c, err := b.client.CancelTask(ctx, &rbv1.CancelTaskRequest{TaskId: "later"}); err != nil || c.GetState() != rbv1.TaskState_TASK_STATE_CANCELLED {
		t.Fatalf("cancel: %v %v", c, err)
	}

	off := startProc(t, "--allow-destinations", "127.0.0.1/32")
	if _, err := off.client.GetTask(ctx, &rbv1.GetTaskRequest{TaskId: "x"}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("without --tasks-sqlite: %v", err)
	}
}

// TestTaskWatchAndRetry: WatchTask streams a task's states through a real
// broker and ends after a final one; RetryTask runs a FAILED task again
// (a 400, then a 200) and refuses one that is not FAILED.
func TestTaskWatchAndRetry(t *testing.T) {
	var mu sync.Mutex
	n := 0
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		n++
		first := n == 1
		mu.Unlock()
		if first {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(up.Close)
	b := startProc(t, "--allow-destinations", "127.0.0.1/32", "--tasks-sqlite", filepath.Join(t.TempDir(), "tasks.db"))
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	watch := func() []rbv1.TaskState {
		t.Helper()
		stream, err := b.client.WatchTask(ctx, &rbv1.WatchTaskRequest{TaskId: "w"})
		if err != nil {
			t.Fatal(err)
		}
		var states []rbv1.TaskState
		for {
			task, err := stream.Recv()
			if err != nil {
				if !errors.Is(err, io.EOF) {
					t.Fatalf("watch: %v", err)
				}
				return states
			}
			states = append(states, task.GetState())
		}
	}
	if _, err := b.client.CreateTask(ctx, &rbv1.CreateTaskRequest{
		TaskId: "w", NotBefore: timestamppb.New(time.Now().Add(500 * time.Millisecond)),
		Execute: &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Url: up.URL}},
	}); err != nil {
		t.Fatal(err)
	}
	states := watch()
	if len(states) < 2 || states[0] != rbv1.TaskState_TASK_STATE_SCHEDULED || states[len(states)-1] != rbv1.TaskState_TASK_STATE_FAILED {
		t.Fatalf("watched %v, want SCHEDULED first and FAILED last", states)
	}
	retried, err := b.client.RetryTask(ctx, &rbv1.RetryTaskRequest{TaskId: "w"})
	if err != nil || retried.GetState() != rbv1.TaskState_TASK_STATE_SCHEDULED {
		t.Fatalf("retry: %v %v", retried, err)
	}
	if states := watch(); states[len(states)-1] != rbv1.TaskState_TASK_STATE_SUCCEEDED {
		t.Fatalf("after retry watched %v, want SUCCEEDED last", states)
	}
	if _, err := b.client.RetryTask(ctx, &rbv1.RetryTaskRequest{TaskId: "w"}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("retry of a succeeded task: %v", err)
	}
	nf, err := b.client.WatchTask(ctx, &rbv1.WatchTaskRequest{TaskId: "unknown"})
	if err == nil {
		_, err = nf.Recv()
	}
	if status.Code(err) != codes.NotFound {
		t.Fatalf("watch of an unknown task: %v", err)
	}
}
