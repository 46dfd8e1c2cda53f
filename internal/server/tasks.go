package server

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
	"github.com/retrybroker/retrybroker/internal/egress"
	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/tasks"
	"github.com/retrybroker/retrybroker/internal/tenant"
)

// Tasks holds what the task RPCs need: the store (set before the server
// serves; nil means the task RPCs answer UNIMPLEMENTED), the lookup of a
// tenant by its id, for dispatching a stored task with no caller, and the
// keys that seal sensitive header values at rest (nil: a task carrying
// one is refused).
type Tasks struct {
	Store  tasks.Store
	Tenant func(id string) (*tenant.Tenant, bool)
	Keys   *tasks.Keyring
	// Callbacks is true when the store delivers callbacks (the broker has
	// --tasks-callback-secret-file); without it a task with a callback is
	// refused with FAILED_PRECONDITION.
	Callbacks bool
}

// WithTasks enables the task RPCs on ts (with Execute's executor, which
// every dispatch uses).
func WithTasks(ts *Tasks) Option { return func(s *Service) { s.tasks = ts } }

// SensitiveHeaders are the request headers whose values a task never
// stores in clear (canonical names): the headers the broker strips from a
// redirect that leaves the origin (egress.DefaultSensitiveHeaders). With
// keys (--tasks-key-file) their values are sealed before the request is
// stored and opened at dispatch; without, a task carrying one is refused.
var SensitiveHeaders = func() map[string]bool {
	m := map[string]bool{}
	for _, h := range egress.DefaultSensitiveHeaders {
		m[http.CanonicalHeaderKey(h)] = true
	}
	return m
}()

// MaxTaskRefMessage bounds the request of the task RPCs that only name a
// task (or a page): 4 KiB.
const MaxTaskRefMessage = 4 << 10

var taskIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

func (s *Service) taskStore() (tasks.Store, error) {
	if s.tasks == nil || s.tasks.Store == nil || s.exec == nil {
		return nil, status.Error(codes.Unimplemented, "tasks are not enabled on this broker (start it with --tasks-sqlite PATH)")
	}
	return s.tasks.Store, nil
}

// CreateTask validates the request as Execute does, stores it and
// schedules it.
func (s *Service) CreateTask(ctx context.Context, req *rbv1.CreateTaskRequest) (*rbv1.Task, error) {
	st, err := s.taskStore()
	if err != nil {
		return nil, err
	}
	t, err := s.tenantFrom(ctx)
	if err != nil {
		return nil, err
	}
	var v violations
	if req.GetExecute() == nil {
		v.add("execute", "required")
	}
	if id := req.GetTaskId(); id != "" && !taskIDPattern.MatchString(id) {
		v.add("task_id", "must be 1 to 128 characters of A-Z, a-z, 0-9, _ and -")
	}
	notBefore, giveUp := checkTime(&v, "not_before", req.GetNotBefore()), checkTime(&v, "give_up_after", req.GetGiveUpAfter())
	if !giveUp.IsZero() && !notBefore.IsZero() && !giveUp.After(notBefore) {
		v.add("give_up_after", "must be after not_before")
	}
	callbackURL := ""
	if cb := req.GetCallback(); cb != nil {
		if _, err := parseHTTPURL(cb.GetUrl()); cb.GetUrl() == "" {
			v.add("callback.url", "required")
		} else if err != nil {
			v.add("callback.url", "%s", err.Error())
		} else {
			callbackURL = cb.GetUrl()
		}
	}
	if s.tasks.Keys == nil {
		for i, h := range req.GetExecute().GetRequest().GetHeaders() {
			if SensitiveHeaders[http.CanonicalHeaderKey(h.GetName())] {
				v.add(fieldIndex("execute.request.headers", i, "name"),
					"%s would be stored with the task, and this broker has no key to encrypt it (--tasks-key-file); configure a broker-held credential (tenants[].credentials, docs/policy.md) for the policy instead", http.CanonicalHeaderKey(h.GetName()))
			}
		}
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	if callbackURL != "" && !s.tasks.Callbacks {
		return nil, status.Error(codes.FailedPrecondition,
			"task callbacks are not enabled on this broker (start it with --tasks-callback-secret-file FILE)")
	}
	call, _, err := s.prepare(ctx, req.GetExecute()) // every check Execute makes
	if err != nil {
		return nil, err
	}
	id := req.GetTaskId()
	if id == "" {
		id = uuid.NewString() // now, not in the store: a sealed value is bound to it
	}
	exec, err := s.sealHeaders(req.GetExecute(), tasks.SealBinding{Tenant: t.ID, TaskID: id})
	if err != nil {
		return nil, status.Error(codes.Internal, "internal error")
	}
	raw, err := proto.Marshal(exec)
	if err != nil {
		return nil, status.Error(codes.Internal, "internal error")
	}
	task, _, err := st.Create(ctx, tasks.NewTask{
		Tenant: t.ID, ID: id, Policy: req.GetExecute().GetPolicy(),
		NotBefore: notBefore, GiveUpAfter: giveUp,
		IdempotencyKey: call.Header.Get(call.Policy.IdempotencyHeader), Request: raw,
		CallbackURL: callbackURL,
	})
	if err != nil {
		return nil, taskError(err)
	}
	return taskToProto(task), nil
}

func checkTime(v *violations, field string, ts *timestamppb.Timestamp) time.Time {
	if ts == nil {
		return time.Time{}
	}
	if err := ts.CheckValid(); err != nil {
		v.add(field, "invalid timestamp")
		return time.Time{}
	}
	return ts.AsTime()
}

// GetTask returns one of the caller's tasks.
func (s *Service) GetTask(ctx context.Context, req *rbv1.GetTaskRequest) (*rbv1.Task, error) {
	st, tenantID, err := s.taskCaller(ctx, req.GetTaskId())
	if err != nil {
		return nil, err
	}
	task, err := st.Get(ctx, tenantID, req.GetTaskId())
	if err != nil {
		return nil, taskError(err)
	}
	return taskToProto(task), nil
}

// CancelTask cancels one of the caller's tasks.
func (s *Service) CancelTask(ctx context.Context, req *rbv1.CancelTaskRequest) (*rbv1.Task, error) {
	st, tenantID, err := s.taskCaller(ctx, req.GetTaskId())
	if err != nil {
		return nil, err
	}
	task, err := st.Cancel(ctx, tenantID, req.GetTaskId())
	if err != nil {
		return nil, taskError(err)
	}
	return taskToProto(task), nil
}

// ListTasks pages through the caller's tasks.
func (s *Service) ListTasks(ctx context.Context, req *rbv1.ListTasksRequest) (*rbv1.ListTasksResponse, error) {
	st, err := s.taskStore()
	if err != nil {
		return nil, err
	}
	t, err := s.tenantFrom(ctx)
	if err != nil {
		return nil, err
	}
	var v violations
	if n := req.GetPageSize(); n < 0 || n > tasks.MaxPageSize {
		v.add("page_size", "must be 0 (default %d) to %d", tasks.DefaultPageSize, tasks.MaxPageSize)
	}
	state := tasks.State(req.GetState())
	if _, ok := rbv1.TaskState_name[int32(req.GetState())]; !ok {
		v.add("state", "unknown task state %d", int32(req.GetState()))
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	list, next, err := st.List(ctx, t.ID, state, int(req.GetPageSize()), req.GetPageToken())
	if err != nil {
		return nil, taskError(err)
	}
	out := &rbv1.ListTasksResponse{NextPageToken: next, Tasks: make([]*rbv1.Task, len(list))}
	for i, task := range list {
		out.Tasks[i] = taskToProto(task)
	}
	return out, nil
}

// taskCaller checks the store, the caller and the id of a one-task RPC.
func (s *Service) taskCaller(ctx context.Context, id string) (tasks.Store, string, error) {
	st, err := s.taskStore()
	if err != nil {
		return nil, "", err
	}
	t, err := s.tenantFrom(ctx)
	if err != nil {
		return nil, "", err
	}
	if !taskIDPattern.MatchString(id) {
		var v violations
		v.add("task_id", "must be 1 to 128 characters of A-Z, a-z, 0-9, _ and -")
		return nil, "", v.err()
	}
	return st, t.ID, nil
}

// sealHeaders returns req with the value of every sensitive header sealed
// for its task (b, with the header's canonical name), or req itself when
// it has none; req is not changed.
func (s *Service) sealHeaders(req *rbv1.ExecuteRequest, b tasks.SealBinding) (*rbv1.ExecuteRequest, error) {
	var out *rbv1.ExecuteRequest
	for i, h := range req.GetRequest().GetHeaders() {
		name := http.CanonicalHeaderKey(h.GetName())
		if !SensitiveHeaders[name] {
			continue
		}
		if out == nil {
			out = proto.Clone(req).(*rbv1.ExecuteRequest)
		}
		b.Header = name
		sealed, err := s.tasks.Keys.Seal(h.GetValue(), b)
		if err != nil {
			return nil, err
		}
		out.GetRequest().GetHeaders()[i].Value = sealed
	}
	if out == nil {
		return req, nil
	}
	return out, nil
}

// openHeaders opens, in place, every sealed header value of a stored
// request of the tenant's task id. Its errors name the header, never a
// value.
func (s *Service) openHeaders(req *rbv1.ExecuteRequest, b tasks.SealBinding) error {
	for _, h := range req.GetRequest().GetHeaders() {
		if !tasks.IsSealed(h.GetValue()) {
			continue
		}
		b.Header = http.CanonicalHeaderKey(h.GetName())
		plain, err := s.tasks.Keys.Open(h.GetValue(), b)
		if err != nil {
			return fmt.Errorf("header %s: %w", b.Header, err)
		}
		h.Value = plain
	}
	return nil
}

func taskError(err error) error {
	var be *tasks.BoundError
	switch {
	case errors.As(err, &be):
		return status.Error(codes.ResourceExhausted, be.Error())
	case errors.Is(err, tasks.ErrNotFound):
		return status.Error(codes.NotFound, "task not found")
	case errors.Is(err, tasks.ErrBadPageToken):
		return status.Error(codes.InvalidArgument, "invalid request: page_token: not a token this broker issued")
	}
	if s := contextStatus(err); s != nil {
		return s
	}
	return status.Error(codes.Unavailable, "task storage is unavailable; try again later")
}

// PrepareTask is the tasks.Prepare of the broker: it decodes a stored
// ExecuteRequest of the tenant's task id, opens its sealed header values,
// and builds, in its tenant as it is configured now, the call Execute
// would make. Its errors hold no secret.
func (s *Service) PrepareTask(ctx context.Context, tenantID, taskID string, raw []byte) (*engine.Call, error) {
	if s.exec == nil || s.tasks == nil || s.tasks.Tenant == nil {
		return nil, errors.New("tasks are not enabled")
	}
	t, ok := s.tasks.Tenant(tenantID)
	if !ok {
		return nil, errors.New("the task's tenant is no longer configured")
	}
	var req rbv1.ExecuteRequest
	if err := proto.Unmarshal(raw, &req); err != nil {
		return nil, errors.New("the stored request cannot be decoded")
	}
	if err := s.openHeaders(&req, tasks.SealBinding{Tenant: tenantID, TaskID: taskID}); err != nil {
		if s.exec.Logger != nil { // the operator's to fix (the key file); the error holds no secret
			s.exec.Logger.WarnContext(ctx, "task secrets do not open; the task fails", "tenant", tenantID, "task_id", taskID, "error", err.Error())
		}
		return nil, err
	}
	call, _, err := s.prepare(tenant.NewContext(ctx, t), &req)
	if err != nil {
		return nil, errors.New(status.Convert(err).Message())
	}
	return call, nil
}

func taskToProto(t *tasks.Task) *rbv1.Task {
	out := &rbv1.Task{
		TaskId: t.ID, Policy: t.Policy, State: rbv1.TaskState(t.State),
		NotBefore: timestamppb.New(t.NotBefore), Attempts: attemptsToProto(t.Attempts, ""),
		Outcome:    rbv1.Outcome(outcomes.proto(t.Outcome)),
		CreateTime: timestamppb.New(t.CreateTime), UpdateTime: timestamppb.New(t.UpdateTime),
		WaitReason: t.WaitReason, IdempotencyKey: t.IdempotencyKey,
		CallbackState: rbv1.TaskCallbackState(t.Callback), CallbackAttempts: int32(min(t.CallbackAttempts, math.MaxInt32)),
		CallbackLastError: t.CallbackError,
	}
	if !t.GiveUpAfter.IsZero() {
		out.GiveUpAfter = timestamppb.New(t.GiveUpAfter)
	}
	if !t.State.Final() {
		out.NextRunTime = timestamppb.New(t.NextRunTime)
	}
	if r := t.Response; r != nil {
		out.Response = &rbv1.HttpResponse{
			StatusCode: int32(r.Status), Headers: fromHTTPHeader(r.Header),
			Body: r.Body, BodyTruncated: r.Truncated, BodyIncomplete: r.Incomplete,
		}
	}
	return out
}

// RetryTask schedules one of the caller's FAILED tasks again.
func (s *Service) RetryTask(ctx context.Context, req *rbv1.RetryTaskRequest) (*rbv1.Task, error) {
	st, tenantID, err := s.taskCaller(ctx, req.GetTaskId())
	if err != nil {
		return nil, err
	}
	task, err := st.Retry(ctx, tenantID, req.GetTaskId())
	if errors.Is(err, tasks.ErrNotFailed) {
		return nil, status.Error(codes.FailedPrecondition, "only a FAILED task can be retried")
	}
	if err != nil {
		return nil, taskError(err)
	}
	return taskToProto(task), nil
}

// WatchPoll is how often WatchTask reads its task for a change when the
// store cannot tell it of changes; WatchRemotePoll is how often it reads
// it anyway when it can (a change made by another replica is seen then).
const (
	WatchPoll       = 100 * time.Millisecond
	WatchRemotePoll = time.Second
)

// taskWatcher is a store that wakes a watch on each change it makes to a
// task (*tasks.RiverStore).
type taskWatcher interface {
	Watch(tenant, id string) (*tasks.Watch, error)
}

// WatchTask sends the caller's task now and on every change of its state
// (or of its update time), and ends after it sent a final state. It reads
// the task when the store says it changed, and at least every
// WatchRemotePoll (every WatchPoll with a store that cannot say). Past the
// store's bound on open watches it answers RESOURCE_EXHAUSTED.
func (s *Service) WatchTask(req *rbv1.WatchTaskRequest, stream grpc.ServerStreamingServer[rbv1.Task]) error {
	ctx := stream.Context()
	st, tenantID, err := s.taskCaller(ctx, req.GetTaskId())
	if err != nil {
		return err
	}
	var wake <-chan struct{}
	poll := WatchPoll
	if tw, ok := st.(taskWatcher); ok {
		w, err := tw.Watch(tenantID, req.GetTaskId())
		if errors.Is(err, tasks.ErrTooManyWatches) {
			return status.Error(codes.ResourceExhausted, "too many task watches are open on this broker; watch again later or poll GetTask")
		}
		if err != nil {
			return taskError(err)
		}
		defer w.Close()
		wake, poll = w.C, WatchRemotePoll
	}
	var last time.Time
	lastState := tasks.StateUnspecified
	tick := time.NewTicker(poll)
	defer tick.Stop()
	for {
		task, err := st.Get(ctx, tenantID, req.GetTaskId())
		if err != nil {
			return taskError(err)
		}
		if task.State != lastState || !task.UpdateTime.Equal(last) {
			if err := stream.Send(taskToProto(task)); err != nil {
				return err
			}
			last, lastState = task.UpdateTime, task.State
		}
		if task.State.Final() {
			return nil
		}
		select {
		case <-ctx.Done():
			return contextStatus(ctx.Err())
		case <-wake:
		case <-tick.C:
		}
	}
}

// TaskJSON is the body of a task's callback: the Task message in
// protobuf's JSON mapping (lowerCamelCase names, enums by name, times in
// RFC 3339, bytes in base64), as a client decodes it with its protojson.
func TaskJSON(t *tasks.Task) ([]byte, error) {
	return protojson.Marshal(taskToProto(t))
}
