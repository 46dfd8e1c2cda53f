package server_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
	"github.com/retrybroker/retrybroker/internal/egress"
	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/server"
	"github.com/retrybroker/retrybroker/internal/store/memstore"
	"github.com/retrybroker/retrybroker/internal/tasks"
	"github.com/retrybroker/retrybroker/internal/tenant"
)

// TestTaskRPCsUnimplementedWithoutStorage: a broker without task storage
// answers every task RPC with UNIMPLEMENTED, not a crash or a silent
// success.
func TestTaskRPCsUnimplementedWithoutStorage(t *testing.T) {
	svc := server.New()
	ctx := context.Background()
	calls := map[string]func() error{
		"CreateTask": func() error { _, err := svc.CreateTask(ctx, &rbv1.CreateTaskRequest{}); return err },
		"GetTask":    func() error { _, err := svc.GetTask(ctx, &rbv1.GetTaskRequest{TaskId: "a"}); return err },
		"ListTasks":  func() error { _, err := svc.ListTasks(ctx, &rbv1.ListTasksRequest{}); return err },
		"CancelTask": func() error { _, err := svc.CancelTask(ctx, &rbv1.CancelTaskRequest{TaskId: "a"}); return err },
		"RetryTask":  func() error { _, err := svc.RetryTask(ctx, &rbv1.RetryTaskRequest{TaskId: "a"}); return err },
	}
	for name, call := range calls {
		if got := status.Code(call()); got != codes.Unimplemented {
			t.Errorf("%s: %s, want Unimplemented", name, got)
		}
	}
}

// taskService is a Service with task storage in a new SQLite file (not
// started: nothing is dispatched) and, when keys is not empty, a key file
// of those lines.
func taskService(t *testing.T, keys string, opts ...tasks.Option) (*server.Service, *tasks.RiverStore, *tenant.Tenant) {
	t.Helper()
	return taskServiceWith(t, keys, nil, opts...)
}

// taskServiceWith is taskService with the server's store wrapped by wrap
// (nil: the store itself).
func taskServiceWith(t *testing.T, keys string, wrap func(*tasks.RiverStore) tasks.Store, opts ...tasks.Option) (*server.Service, *tasks.RiverStore, *tenant.Tenant) {
	t.Helper()
	dev, err := tenant.Dev([]string{"127.0.0.1/32"})
	if err != nil {
		t.Fatal(err)
	}
	tr := egress.NewClients(egress.ClientConfig{DialFunc: (&recordingDialer{}).dial})
	t.Cleanup(tr.CloseIdleConnections)
	runner := engine.NewRunner(memstore.New())
	ts := &server.Tasks{Tenant: func(id string) (*tenant.Tenant, bool) { return dev, id == dev.ID }}
	if keys != "" {
		if ts.Keys, err = tasks.ParseKeys([]byte(keys)); err != nil {
			t.Fatal(err)
		}
	}
	svc := server.New(server.WithDefaultTenant(dev), server.WithExecutor(&server.Executor{Runner: runner, Clients: tr}), server.WithTasks(ts))
	st, err := tasks.OpenSQLite(t.Context(), filepath.Join(t.TempDir(), "tasks.db"), runner, svc.PrepareTask, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close(context.Background()) })
	ts.Store = st
	if wrap != nil {
		ts.Store = wrap(st)
	}
	return svc, st, dev
}

var (
	testKeyOld = "old:" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	testKeyNew = "new:" + base64.StdEncoding.EncodeToString([]byte("fedcba9876543210fedcba9876543210"))
)

func sensitiveTask(id string) *rbv1.CreateTaskRequest {
	return &rbv1.CreateTaskRequest{
		TaskId: id, NotBefore: timestamppb.New(time.Now().Add(time.Hour)),
		Execute: &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Url: "http://127.0.0.1:1/x", Headers: []*rbv1.HttpHeader{
			{Name: "authorization", Value: "Bearer s3cret-token"},
			{Name: "X-Api-Key", Value: "k3y-value"},
			{Name: "X-Trace", Value: "plain-value"},
		}}},
	}
}

// TestCreateTaskSealsSensitiveHeaders: with keys, CreateTask stores the
// values of sensitive headers sealed (the stored bytes hold neither
// secret; a plain header stays plain), the Task it answers holds no
// secret, and PrepareTask opens them for the same task only; a task id
// the broker generates binds them as well.
func TestCreateTaskSealsSensitiveHeaders(t *testing.T) {
	svc, st, dev := taskService(t, testKeyOld)
	ctx := t.Context()
	for _, id := range []string{"t1", ""} {
		task, err := svc.CreateTask(ctx, sensitiveTask(id))
		if err != nil {
			t.Fatal(err)
		}
		answer, _ := proto.Marshal(task)
		stored, err := st.Get(ctx, dev.ID, task.GetTaskId())
		if err != nil {
			t.Fatal(err)
		}
		for _, secret := range []string{"s3cret", "k3y-value"} {
			if bytes.Contains(stored.Request, []byte(secret)) || bytes.Contains(answer, []byte(secret)) {
				t.Fatalf("task %q: %s stored or answered in clear", id, secret)
			}
		}
		if !bytes.Contains(stored.Request, []byte("plain-value")) {
			t.Fatal("a plain header was not stored as it was")
		}
		call, err := svc.PrepareTask(ctx, dev.ID, task.GetTaskId(), stored.Request)
		if err != nil {
			t.Fatal(err)
		}
		if call.Header.Get("Authorization") != "Bearer s3cret-token" || call.Header.Get("X-Api-Key") != "k3y-value" || call.Header.Get("X-Trace") != "plain-value" {
			t.Fatalf("prepared headers %v", call.Header)
		}
		_, err = svc.PrepareTask(ctx, dev.ID, "another-task", stored.Request)
		if err == nil || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "does not open") {
			t.Fatalf("moved to another task: %v", err)
		}
	}
}

// TestTaskSecretsWithoutTheirKey: a broker without keys refuses a task
// carrying a sensitive header (INVALID_ARGUMENT pointing to broker-held
// credentials and the key file); a stored task whose key is no longer in
// the key file, or a broker with no key file at all, fails at dispatch
// with an error naming the key or the flag, never the secret.
func TestTaskSecretsWithoutTheirKey(t *testing.T) {
	ctx := t.Context()
	plain, _, _ := taskService(t, "")
	_, err := plain.CreateTask(ctx, sensitiveTask("t1"))
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "broker-held credential") ||
		!strings.Contains(st.Message(), "--tasks-key-file") || strings.Contains(st.Message(), "s3cret") {
		t.Fatalf("without keys: %v", err)
	}

	svc, st, dev := taskService(t, testKeyOld)
	if _, err := svc.CreateTask(ctx, sensitiveTask("t1")); err != nil {
		t.Fatal(err)
	}
	stored, err := st.Get(ctx, dev.ID, "t1")
	if err != nil {
		t.Fatal(err)
	}
	rotated, _, _ := taskService(t, testKeyNew+"\n"+testKeyOld)
	if call, err := rotated.PrepareTask(ctx, dev.ID, "t1", stored.Request); err != nil || call.Header.Get("Authorization") != "Bearer s3cret-token" {
		t.Fatalf("after rotation: %v", err)
	}
	removed, _, _ := taskService(t, testKeyNew)
	_, err = removed.PrepareTask(ctx, dev.ID, "t1", stored.Request)
	if err == nil || !strings.Contains(err.Error(), `key "old"`) || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("key removed: %v", err)
	}
	_, err = plain.PrepareTask(ctx, dev.ID, "t1", stored.Request)
	if err == nil || !strings.Contains(err.Error(), "--tasks-key-file") || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("no key file: %v", err)
	}
}

// TestCreateTaskPastBoundIsResourceExhausted: a create past the tenant's
// pending bound answers RESOURCE_EXHAUSTED naming the bound.
func TestCreateTaskPastBoundIsResourceExhausted(t *testing.T) {
	svc, _, _ := taskService(t, "", tasks.WithMaxPendingPerTenant(1))
	req := func(id string) *rbv1.CreateTaskRequest {
		return &rbv1.CreateTaskRequest{
			TaskId: id, NotBefore: timestamppb.New(time.Now().Add(time.Hour)),
			Execute: &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Url: "http://127.0.0.1:1/"}},
		}
	}
	if _, err := svc.CreateTask(t.Context(), req("a")); err != nil {
		t.Fatal(err)
	}
	_, err := svc.CreateTask(t.Context(), req("b"))
	if st := status.Convert(err); st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "--tasks-max-pending-per-tenant") {
		t.Fatalf("past the bound: %v", err)
	}
}

// countingStore counts the reads of a task store; its Watch is the
// store's own.
type countingStore struct {
	*tasks.RiverStore
	gets atomic.Int64
}

func (c *countingStore) Get(ctx context.Context, tenant, id string) (*tasks.Task, error) {
	c.gets.Add(1)
	return c.RiverStore.Get(ctx, tenant, id)
}

// watchStream is the server side of one WatchTask stream, recording what
// the handler sends.
type watchStream struct {
	grpc.ServerStream
	ctx  context.Context
	sent chan *rbv1.Task
}

func (w *watchStream) Context() context.Context { return w.ctx }
func (w *watchStream) Send(t *rbv1.Task) error  { w.sent <- t; return nil }

// TestWatchTaskReadsOnChangesAndIsBounded: a watch of a task that does
// not change reads it once a second (not every 100 ms: a thousand idle
// watches would otherwise be ten thousand reads a second on SQLite's one
// connection), a change this broker makes (CancelTask) reaches it at once,
// and past --tasks-max-watches a watch is refused with RESOURCE_EXHAUSTED.
func TestWatchTaskReadsOnChangesAndIsBounded(t *testing.T) {
	var counted *countingStore
	svc, _, _ := taskServiceWith(t, "", func(st *tasks.RiverStore) tasks.Store {
		counted = &countingStore{RiverStore: st}
		return counted
	}, tasks.WithMaxWatches(1))
	req := &rbv1.CreateTaskRequest{
		TaskId: "w", NotBefore: timestamppb.New(time.Now().Add(time.Hour)),
		Execute: &rbv1.ExecuteRequest{Request: &rbv1.HttpRequest{Url: "http://127.0.0.1:1/"}},
	}
	if _, err := svc.CreateTask(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stream := &watchStream{ctx: ctx, sent: make(chan *rbv1.Task, 16)}
	done := make(chan error, 1)
	go func() { done <- svc.WatchTask(&rbv1.WatchTaskRequest{TaskId: "w"}, stream) }()
	if first := <-stream.sent; first.GetState() != rbv1.TaskState_TASK_STATE_SCHEDULED {
		t.Fatalf("first: %s", first.GetState())
	}
	// A second watch past the bound of one (bounded, should it be let in).
	ctx2, cancel2 := context.WithTimeout(ctx, 3*time.Second)
	defer cancel2()
	err := svc.WatchTask(&rbv1.WatchTaskRequest{TaskId: "w"}, &watchStream{ctx: ctx2, sent: make(chan *rbv1.Task, 16)})
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a watch past the bound: %v", err)
	}
	before := counted.gets.Load()
	time.Sleep(2500 * time.Millisecond)
	if idle := counted.gets.Load() - before; idle > 4 {
		t.Fatalf("an idle watch read its task %d times in 2.5 s", idle)
	}
	cancelled := time.Now()
	if _, err := svc.CancelTask(t.Context(), &rbv1.CancelTaskRequest{TaskId: "w"}); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-stream.sent:
		if got.GetState() != rbv1.TaskState_TASK_STATE_CANCELLED {
			t.Fatalf("after the cancel: %s", got.GetState())
		}
		if d := time.Since(cancelled); d > 900*time.Millisecond {
			t.Fatalf("the cancel reached the watch after %s, not by its wake-up", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the watch did not see the cancel")
	}
	if err := <-done; err != nil {
		t.Fatalf("watch ended with %v", err)
	}
}
