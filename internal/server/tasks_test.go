package server_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
