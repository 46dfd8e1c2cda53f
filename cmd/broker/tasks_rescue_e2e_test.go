package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
)

// TestTaskRunningAtSIGKILLRunsAgain: a broker killed with SIGKILL while a
// task's send is in flight (the task RUNNING, its River job held) loses
// it not: a new broker on the same --tasks-sqlite file takes the job
// over after --tasks-rescue-after (River's rescuer, once the dead
// broker's leader lease expired) and sends it again with the same
// idempotency key, and the task ends SUCCEEDED.
func TestTaskRunningAtSIGKILLRunsAgain(t *testing.T) {
	var mu sync.Mutex
	var keys []string
	inFlight := make(chan struct{}, 1)
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		first := len(keys) == 1
		mu.Unlock()
		if first {
			inFlight <- struct{}{}
			select { // held until the broker is dead
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(up.Close)
	db := filepath.Join(t.TempDir(), "tasks.db")
	args := []string{"--allow-destinations", "127.0.0.1/32", "--tasks-sqlite", db, "--tasks-rescue-after", "2s"}

	first := startProc(t, args...)
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Second)
	defer cancel()
	created, err := first.client.CreateTask(ctx, &rbv1.CreateTaskRequest{
		TaskId:  "in-flight",
		Execute: &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Method: "POST", Url: up.URL + "/orders", Body: []byte(`{}`)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-inFlight:
	case <-ctx.Done():
		t.Fatal("the task was never sent")
	}
	if task, err := first.client.GetTask(ctx, &rbv1.GetTaskRequest{TaskId: "in-flight"}); err != nil || task.GetState() != rbv1.TaskState_TASK_STATE_RUNNING {
		t.Fatalf("during the send: %v %v, want RUNNING", task.GetState(), err)
	}
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	err = <-first.done
	first.done <- err // for the cleanup, which waits for it
	close(release)

	second := startProc(t, args...)
	var task *rbv1.Task
	for deadline := time.Now().Add(80 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		task, err = second.client.GetTask(ctx, &rbv1.GetTaskRequest{TaskId: "in-flight"})
		if err != nil {
			t.Fatal(err)
		}
		if s := task.GetState(); s == rbv1.TaskState_TASK_STATE_SUCCEEDED || s == rbv1.TaskState_TASK_STATE_FAILED || time.Now().After(deadline) {
			break
		}
	}
	if task.GetState() != rbv1.TaskState_TASK_STATE_SUCCEEDED || task.GetResponse().GetStatusCode() != http.StatusCreated {
		t.Fatalf("after the restart: %s (response %d); a task RUNNING at the kill must run again", task.GetState(), task.GetResponse().GetStatusCode())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(keys) != 2 || keys[0] != created.GetIdempotencyKey() || keys[1] != created.GetIdempotencyKey() {
		t.Fatalf("upstream saw keys %q, want two sends with %q", keys, created.GetIdempotencyKey())
	}
}
