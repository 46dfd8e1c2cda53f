// Package tasks keeps deferred calls (tasks) durably and runs them through
// the engine when they are due: a task's row lives in the broker's own
// table, its schedule is a River job in the same database, and each
// dispatch is exactly one engine Run. A closed gate, an open breaker, a
// hint beyond max_delay or pacing moves the task to WAITING through
// River's snooze, which uses up none of its attempts. See docs/tasks.md.
//
// It knows nothing of gRPC: the server validates requests, stores them as
// opaque bytes, and gives the package a Prepare function that turns them
// back into an engine call at dispatch.
package tasks

import (
	"context"
	"errors"
	"time"

	"github.com/retrybroker/retrybroker/internal/engine"
)

// State is where a task is in its life.
type State int8

// States; the values match the proto's TaskState.
const (
	StateUnspecified State = iota
	StateScheduled
	StateWaiting
	StateRunning
	StateSucceeded
	StateFailed
	StateCancelled
)

var stateNames = [...]string{"unspecified", "scheduled", "waiting", "running", "succeeded", "failed", "cancelled"}

// String returns the state's lower-case name, e.g. "waiting".
func (s State) String() string {
	if s < 0 || int(s) >= len(stateNames) {
		return "unspecified"
	}
	return stateNames[s]
}

// Final reports whether s is SUCCEEDED, FAILED or CANCELLED.
func (s State) Final() bool { return s >= StateSucceeded }

// Task is a deferred call and what became of it.
type Task struct {
	Tenant string
	ID     string
	// Policy is the policy name the request gave (empty: the default).
	Policy string
	State  State
	// NotBefore is the earliest run time; GiveUpAfter (zero: never) is when
	// an unfinished task fails.
	NotBefore   time.Time
	GiveUpAfter time.Time
	// Attempts accumulates every attempt of every dispatch, in order.
	Attempts []engine.AttemptRecord
	// Response is the last dispatch's final response (nil before one).
	Response *engine.FinalResponse
	// Outcome is how the last dispatch ended (unspecified before one).
	Outcome engine.Outcome
	// Error describes a dispatch that ended without a Result (a refused
	// destination, an invalid stored request); never a secret.
	Error       string
	CreateTime  time.Time
	UpdateTime  time.Time
	NextRunTime time.Time
	// WaitReason says why a WAITING task waits: the outcome's name
	// ("gate_closed", "breaker_open", "hint_exceeds_max_delay",
	// "deadline_too_short", "shutting_down") or "pacing".
	WaitReason string
	// IdempotencyKey is sent on every attempt of every dispatch.
	IdempotencyKey string
	// Dispatches counts the engine runs the task has had.
	Dispatches int
	// Request is the stored request, opaque to this package.
	Request []byte
	// CallbackURL is where the final task is POSTed (empty: no callback);
	// Callback, CallbackAttempts and CallbackError say how its delivery
	// for the current final state goes (see callback.go).
	CallbackURL      string
	Callback         CallbackState
	CallbackAttempts int
	CallbackError    string
}

// NewTask is what Create stores.
type NewTask struct {
	Tenant string
	// ID names the task within its tenant; empty means a generated UUID.
	ID     string
	Policy string
	// NotBefore zero means now. GiveUpAfter zero means never.
	NotBefore   time.Time
	GiveUpAfter time.Time
	// IdempotencyKey is the request's own key, when it has one; empty
	// means a generated UUID.
	IdempotencyKey string
	Request        []byte
	// CallbackURL, when set, receives the final task (WithCallbacks must
	// be configured; the server checks that).
	CallbackURL string
	// TraceParent and TraceState are the W3C trace context the task's
	// dispatch spans link to; Create fills them from its context's span
	// when both are empty.
	TraceParent, TraceState string
}

// ErrNotFound reports a task that does not exist in the caller's tenant.
// Another tenant's task is reported the same way, so IDs cannot be probed.
var ErrNotFound = errors.New("task not found")

// Store keeps tasks. Every method is scoped to one tenant.
type Store interface {
	// Create stores t and schedules it; when the tenant already has a
	// task with t.ID it returns that task and created false, unchanged.
	Create(ctx context.Context, t NewTask) (task *Task, created bool, err error)
	// Get returns the tenant's task id, or ErrNotFound.
	Get(ctx context.Context, tenant, id string) (*Task, error)
	// List returns up to pageSize (1..MaxPageSize) of the tenant's tasks
	// in creation order after pageToken (empty: from the start), only
	// those in state unless it is StateUnspecified, and the token of the
	// next page (empty on the last).
	List(ctx context.Context, tenant string, state State, pageSize int, pageToken string) ([]*Task, string, error)
	// Cancel moves the tenant's task id to CANCELLED unless it is final,
	// and returns it; ErrNotFound when there is none.
	Cancel(ctx context.Context, tenant, id string) (*Task, error)
	// Retry schedules the tenant's FAILED task id to run now, keeping its
	// attempts, idempotency key and request, and returns it; ErrNotFound
	// when there is none, ErrNotFailed when it is not FAILED.
	Retry(ctx context.Context, tenant, id string) (*Task, error)
}

// ErrNotFailed reports a Retry of a task that is not FAILED.
var ErrNotFailed = errors.New("only a FAILED task can be retried")

// MaxPageSize bounds List's page; DefaultPageSize is used for 0.
const (
	MaxPageSize     = 1000
	DefaultPageSize = 100
)

// Runner runs one engine call; *engine.Runner satisfies it.
type Runner interface {
	Run(ctx context.Context, c *engine.Call) (*engine.Result, error)
}

// Prepare turns the stored request of tenant's task id back into the
// engine call Execute would make (policy resolved now, guarded client,
// credentials, sealed values opened). An error fails the task with its
// message (which must hold no secret).
type Prepare func(ctx context.Context, tenant, id string, request []byte) (*engine.Call, error)

// DefaultWait is how long a task waits when the engine asked it to wait
// but gave no time.
const DefaultWait = time.Second

// verdict is what one dispatch decided.
type verdict struct {
	state  State
	wait   time.Duration // WAITING only
	reason string        // WAITING only
}

// judge maps one engine run to the task's next state: success is final;
// a closed gate, an open breaker, a hint beyond max_delay, a deadline too
// short for the next wait, the broker's drain and pacing are waits of
// retry_after (DefaultWait when none), with none of the task's attempts
// used up; everything else fails the task.
func judge(res *engine.Result, err error) verdict {
	var pe *engine.PacingError
	var se *engine.StoreError
	switch {
	case errors.As(err, &pe):
		return verdict{state: StateWaiting, wait: positive(pe.Wait), reason: "pacing"}
	case errors.As(err, &se):
		return verdict{state: StateWaiting, wait: DefaultWait, reason: "store_unavailable"}
	case err != nil:
		return verdict{state: StateFailed}
	}
	switch res.Outcome {
	case engine.OutcomeSuccess:
		return verdict{state: StateSucceeded}
	case engine.OutcomeGateClosed, engine.OutcomeBreakerOpen, engine.OutcomeHintExceedsMaxDelay, engine.OutcomeShuttingDown:
		return verdict{state: StateWaiting, wait: retryAfter(res), reason: res.Outcome.String()}
	case engine.OutcomeDeadlineTooShort:
		if res.HasRetryAfter {
			return verdict{state: StateWaiting, wait: retryAfter(res), reason: res.Outcome.String()}
		}
	}
	return verdict{state: StateFailed}
}

func retryAfter(res *engine.Result) time.Duration {
	if !res.HasRetryAfter {
		return DefaultWait
	}
	return positive(res.RetryAfter)
}

func positive(d time.Duration) time.Duration {
	if d <= 0 {
		return DefaultWait
	}
	return d
}
