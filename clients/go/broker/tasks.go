package broker

import (
	"context"
	"errors"
	"io"
	"iter"
	"net/http"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	rbv1 "github.com/retrybroker/retrybroker/gen/retrybroker/v1"
)

// TaskState is where a task is in its life (see docs/tasks.md). Its value
// is the proto enum name, for example "TASK_STATE_SUCCEEDED".
type TaskState string

// Task states. TaskSucceeded, TaskFailed and TaskCancelled are final.
const (
	// TaskStateUnspecified is never returned; as an InState filter it
	// means every state.
	TaskStateUnspecified TaskState = "TASK_STATE_UNSPECIFIED"
	// TaskScheduled: stored, waiting for NextRunTime.
	TaskScheduled TaskState = "TASK_STATE_SCHEDULED"
	// TaskWaiting: the last dispatch met a closed gate, an open breaker, a
	// hint beyond max_delay or pacing; it runs again at NextRunTime
	// (WaitReason says why), with none of its attempts used up.
	TaskWaiting TaskState = "TASK_STATE_WAITING"
	// TaskRunning: a broker is running it now.
	TaskRunning TaskState = "TASK_STATE_RUNNING"
	// TaskSucceeded: final; Outcome is OutcomeSuccess.
	TaskSucceeded TaskState = "TASK_STATE_SUCCEEDED"
	// TaskFailed: final; Outcome says why (or GiveUpAfter passed).
	// RetryTask schedules it again.
	TaskFailed TaskState = "TASK_STATE_FAILED"
	// TaskCancelled: final; CancelTask was called.
	TaskCancelled TaskState = "TASK_STATE_CANCELLED"
)

// Final reports whether s is a final state (succeeded, failed or
// cancelled): a watch ends after it.
func (s TaskState) Final() bool {
	return s == TaskSucceeded || s == TaskFailed || s == TaskCancelled
}

func (s TaskState) toProto() (rbv1.TaskState, error) {
	if s == "" {
		return rbv1.TaskState_TASK_STATE_UNSPECIFIED, nil
	}
	v, ok := rbv1.TaskState_value[string(s)]
	if !ok {
		return 0, errorf("unknown task state %q", s)
	}
	return rbv1.TaskState(v), nil
}

// Task is a deferred call the broker keeps durably and runs when it is due
// and its gate allows, and what became of it. Times are the broker's.
type Task struct {
	// ID names the task within its tenant.
	ID string
	// Policy is the policy the task runs under ("": the tenant's default).
	Policy string
	// State is where the task is.
	State TaskState
	// NotBefore is the earliest time the task runs.
	NotBefore time.Time
	// GiveUpAfter is when an unfinished task fails; zero means never.
	GiveUpAfter time.Time
	// Attempts records every send over every dispatch, in order.
	Attempts []Attempt
	// Response is the final HTTP response, once there is one; else nil.
	Response *TaskResponse
	// Outcome is how the last dispatch ended; OutcomeUnspecified before
	// the first.
	Outcome Outcome
	// CreateTime is when the task was created.
	CreateTime time.Time
	// UpdateTime is when the task last changed.
	UpdateTime time.Time
	// NextRunTime is when a SCHEDULED or WAITING task is due next; zero
	// for a final task.
	NextRunTime time.Time
	// WaitReason says why a WAITING task waits, e.g. "gate_closed".
	WaitReason string
	// IdempotencyKey is the value of the policy's idempotency header that
	// every send of the task carries (the request's own, or one the broker
	// generated at creation).
	IdempotencyKey string
}

// TaskResponse is the final HTTP response of a task.
type TaskResponse struct {
	// StatusCode is the HTTP status.
	StatusCode int
	// Header holds the response headers, each name's values in the order
	// received.
	Header http.Header
	// Headers are the header lines exactly as received (order and
	// duplicates kept).
	Headers []HeaderField
	// Body is the response body, up to the policy's max_response_body.
	Body []byte
	// BodyTruncated is true when the body was longer and was cut.
	BodyTruncated bool
	// BodyIncomplete is true when the upstream broke the body off.
	BodyIncomplete bool
}

// TaskOption configures CreateTask.
type TaskOption interface{ applyTask(*taskConfig) }

type taskConfig struct {
	call        []CallOption
	id          string
	notBefore   time.Time
	giveUpAfter time.Time
}

type taskFunc func(*taskConfig)

func (f taskFunc) applyTask(c *taskConfig) { f(c) }

func (o PolicyOption) applyTask(c *taskConfig)   { c.call = append(c.call, o) }
func (o ProviderOption) applyTask(c *taskConfig) { c.call = append(c.call, o) }

// TaskID names the task within the tenant: 1 to 128 characters of
// [A-Za-z0-9_-]. A second CreateTask with the same id returns the first
// task unchanged, so a caller that retries its own CreateTask (after a
// timeout, say) creates the task once. Without it the broker generates an
// id.
func TaskID(id string) TaskOption { return taskFunc(func(c *taskConfig) { c.id = id }) }

// NotBefore is the earliest time the task runs; without it the task is
// due at once.
func NotBefore(t time.Time) TaskOption {
	return taskFunc(func(c *taskConfig) { c.notBefore = t })
}

// GiveUpAfter is when a task that has not succeeded becomes FAILED; it
// must be after NotBefore. Without it the task never gives up (it still
// fails when its policy says the call failed).
func GiveUpAfter(t time.Time) TaskOption {
	return taskFunc(func(c *taskConfig) { c.giveUpAfter = t })
}

// TaskCallOptions applies call options (MaxRetries, MaxDelay,
// TotalTimeout, AttemptTimeout, MaxResponseBody) to every dispatch of the
// task, as they apply to an Execute call. OnResult has no effect on a task.
// Policy and Provider are TaskOptions themselves.
func TaskCallOptions(opts ...CallOption) TaskOption {
	return taskFunc(func(c *taskConfig) { c.call = append(c.call, opts...) })
}

// CreateTask hands req to the broker as a task: the broker stores it
// durably and sends it, through the same engine and policy as Execute,
// when it is due (NotBefore) and its gate allows; a closed gate or an open
// breaker makes it wait (TaskWaiting) without using up its attempts. The
// task survives broker restarts. Every send carries the same idempotency
// key (req's own value of the policy's idempotency header, or one the
// broker generates), so a POST task is retried safely.
//
// req is read as Execute reads it (headers, body into memory, closed). The
// broker refuses with INVALID_ARGUMENT a task whose request carries a
// sensitive header (Authorization, Cookie, X-Api-Key): it would be
// stored; let the broker hold the credential instead (docs/policy.md,
// "Broker-held credentials"). It answers UNIMPLEMENTED when it runs
// without task storage (--tasks-sqlite). ctx bounds the RPC only, not
// the task.
func (c *Client) CreateTask(ctx context.Context, req *http.Request, opts ...TaskOption) (*Task, error) {
	var cfg taskConfig
	for _, o := range opts {
		o.applyTask(&cfg)
	}
	_, er, err := c.executeRequest("CreateTask", req, cfg.call)
	if err != nil {
		return nil, err
	}
	pr := &rbv1.CreateTaskRequest{Execute: er, TaskId: cfg.id}
	if !cfg.notBefore.IsZero() {
		pr.NotBefore = timestamppb.New(cfg.notBefore)
	}
	if !cfg.giveUpAfter.IsZero() {
		pr.GiveUpAfter = timestamppb.New(cfg.giveUpAfter)
	}
	t, err := c.rpc.CreateTask(ctx, pr, c.callOpts...)
	if err != nil {
		return nil, fromRPC(err)
	}
	return taskFromProto(t), nil
}

// GetTask returns the caller's task id. A task that does not exist, or
// belongs to another tenant, is a NOT_FOUND *Error (IsNotFound).
func (c *Client) GetTask(ctx context.Context, id string) (*Task, error) {
	t, err := c.rpc.GetTask(ctx, &rbv1.GetTaskRequest{TaskId: id}, c.callOpts...)
	if err != nil {
		return nil, fromRPC(err)
	}
	return taskFromProto(t), nil
}

// CancelTask cancels the caller's task id unless it is final, and returns
// it (TaskCancelled; a final task unchanged). A send already in flight is
// not recalled. NOT_FOUND as for GetTask.
func (c *Client) CancelTask(ctx context.Context, id string) (*Task, error) {
	t, err := c.rpc.CancelTask(ctx, &rbv1.CancelTaskRequest{TaskId: id}, c.callOpts...)
	if err != nil {
		return nil, fromRPC(err)
	}
	return taskFromProto(t), nil
}

// RetryTask schedules the caller's FAILED task id again (it becomes
// TaskScheduled, due at once, with the same idempotency key) and returns
// it. A task that is not FAILED is a FAILED_PRECONDITION *Error
// (IsFailedPrecondition); NOT_FOUND as for GetTask.
func (c *Client) RetryTask(ctx context.Context, id string) (*Task, error) {
	t, err := c.rpc.RetryTask(ctx, &rbv1.RetryTaskRequest{TaskId: id}, c.callOpts...)
	if err != nil {
		return nil, fromRPC(err)
	}
	return taskFromProto(t), nil
}

// WatchTask streams the caller's task id: the task as it is now, then
// again on every change, ending after a final state. An error (NOT_FOUND,
// the context's deadline, a broken stream) is yielded once, as the last
// element, with a nil task. Breaking out of the loop cancels the stream.
// ctx bounds the whole watch: give it a deadline as long as the task may
// wait.
//
//	for task, err := range client.WatchTask(ctx, id) {
//		if err != nil {
//			return err
//		}
//		log.Println(task.State)
//	}
func (c *Client) WatchTask(ctx context.Context, id string) iter.Seq2[*Task, error] {
	return func(yield func(*Task, error) bool) {
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		st, err := c.rpc.WatchTask(sctx, &rbv1.WatchTaskRequest{TaskId: id}, c.callOpts...)
		if err != nil {
			yield(nil, fromRPC(err))
			return
		}
		for {
			t, err := st.Recv()
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				yield(nil, fromRPC(err))
				return
			}
			if !yield(taskFromProto(t), nil) {
				return
			}
		}
	}
}

// ListOption configures ListTasks and ListTasksPage.
type ListOption interface{ applyList(*listConfig) }

type listConfig struct {
	state    TaskState
	pageSize int
}

type listFunc func(*listConfig)

func (f listFunc) applyList(c *listConfig) { f(c) }

// InState lists only the tasks in state s; without it (or with
// TaskStateUnspecified) every state is listed.
func InState(s TaskState) ListOption { return listFunc(func(c *listConfig) { c.state = s }) }

// PageSize is the number of tasks per RPC: 1 to 1000; without it the
// broker's default (100).
func PageSize(n int) ListOption { return listFunc(func(c *listConfig) { c.pageSize = n }) }

// TaskPage is one page of ListTasksPage.
type TaskPage struct {
	// Tasks are the page's tasks, oldest first.
	Tasks []*Task
	// NextPageToken fetches the next page; "" on the last.
	NextPageToken string
}

// ListTasksPage returns one page of the caller's tasks, oldest first:
// the first with pageToken "", the next with the previous page's
// NextPageToken. A token the broker did not issue is INVALID_ARGUMENT.
func (c *Client) ListTasksPage(ctx context.Context, pageToken string, opts ...ListOption) (*TaskPage, error) {
	var cfg listConfig
	for _, o := range opts {
		o.applyList(&cfg)
	}
	state, err := cfg.state.toProto()
	if err != nil {
		return nil, err
	}
	if cfg.pageSize < 0 || cfg.pageSize > 1<<31-1 {
		return nil, errorf("PageSize: must be 1 to 1000 (0: the broker's default), got %d", cfg.pageSize)
	}
	out, err := c.rpc.ListTasks(ctx, &rbv1.ListTasksRequest{
		State: state, PageSize: int32(cfg.pageSize), PageToken: pageToken,
	}, c.callOpts...)
	if err != nil {
		return nil, fromRPC(err)
	}
	page := &TaskPage{NextPageToken: out.GetNextPageToken(), Tasks: make([]*Task, 0, len(out.GetTasks()))}
	for _, t := range out.GetTasks() {
		page.Tasks = append(page.Tasks, taskFromProto(t))
	}
	return page, nil
}

// ListTasks iterates over the caller's tasks, oldest first, fetching one
// page (PageSize) per RPC as the loop needs it. An error is yielded once,
// as the last element, with a nil task; breaking out of the loop fetches
// no further page.
//
//	for task, err := range client.ListTasks(ctx, broker.InState(broker.TaskWaiting)) {
//		if err != nil {
//			return err
//		}
//		log.Println(task.ID, task.WaitReason, task.NextRunTime)
//	}
func (c *Client) ListTasks(ctx context.Context, opts ...ListOption) iter.Seq2[*Task, error] {
	return func(yield func(*Task, error) bool) {
		token := ""
		for {
			page, err := c.ListTasksPage(ctx, token, opts...)
			if err != nil {
				yield(nil, err)
				return
			}
			for _, t := range page.Tasks {
				if !yield(t, nil) {
					return
				}
			}
			if page.NextPageToken == "" {
				return
			}
			token = page.NextPageToken
		}
	}
}

func timeOf(ts *timestamppb.Timestamp) time.Time {
	if ts == nil {
		return time.Time{}
	}
	return ts.AsTime()
}

func taskFromProto(t *rbv1.Task) *Task {
	out := &Task{
		ID:             t.GetTaskId(),
		Policy:         t.GetPolicy(),
		State:          TaskState(t.GetState().String()),
		NotBefore:      timeOf(t.GetNotBefore()),
		GiveUpAfter:    timeOf(t.GetGiveUpAfter()),
		Attempts:       attemptsFromProto(t.GetAttempts()),
		Outcome:        Outcome(t.GetOutcome().String()),
		CreateTime:     timeOf(t.GetCreateTime()),
		UpdateTime:     timeOf(t.GetUpdateTime()),
		NextRunTime:    timeOf(t.GetNextRunTime()),
		WaitReason:     t.GetWaitReason(),
		IdempotencyKey: t.GetIdempotencyKey(),
	}
	if r := t.GetResponse(); r != nil {
		resp := &TaskResponse{
			StatusCode:     int(r.GetStatusCode()),
			Header:         make(http.Header, len(r.GetHeaders())),
			Headers:        make([]HeaderField, 0, len(r.GetHeaders())),
			Body:           r.GetBody(),
			BodyTruncated:  r.GetBodyTruncated(),
			BodyIncomplete: r.GetBodyIncomplete(),
		}
		for _, h := range r.GetHeaders() {
			resp.Header.Add(h.GetName(), h.GetValue())
			resp.Headers = append(resp.Headers, HeaderField{Name: h.GetName(), Value: h.GetValue()})
		}
		out.Response = resp
	}
	return out
}
