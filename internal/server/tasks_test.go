package server_test

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
	"github.com/retrybroker/retrybroker/internal/server"
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
