package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/retrybroker/retrybroker/internal/tasks"
)

// WithTasks gives the admin view the task storage: GET /admin/tasks lists
// a tenant's tasks. store is read on every request (the storage opens after
// the view; nil: tasks are off, and the path answers 404).
func WithTasks(store func() tasks.Store) Option { return func(o *options) { o.tasks = store } }

// TaskJSON is one task as the admin view shows it: its state and
// schedule, never its request (which may hold sealed secrets) nor its
// idempotency key.
type TaskJSON struct {
	TaskID      string     `json:"task_id"`
	Policy      string     `json:"policy,omitempty"`
	State       string     `json:"state"`
	WaitReason  string     `json:"wait_reason,omitempty"`
	NextRunTime *time.Time `json:"next_run_time,omitempty"`
	Dispatches  int        `json:"dispatches"`
	Attempts    int        `json:"attempts"`
	Outcome     string     `json:"outcome,omitempty"`
	Callback    string     `json:"callback,omitempty"`
	CreateTime  time.Time  `json:"create_time"`
	UpdateTime  time.Time  `json:"update_time"`
}

// TasksJSON is a page of a tenant's tasks.
type TasksJSON struct {
	Tenant        string     `json:"tenant"`
	State         string     `json:"state,omitempty"`
	Tasks         []TaskJSON `json:"tasks"`
	NextPageToken string     `json:"next_page_token,omitempty"`
}

// taskStates are the state filters /admin/tasks takes.
var taskStates = map[string]tasks.State{
	"scheduled": tasks.StateScheduled, "waiting": tasks.StateWaiting, "running": tasks.StateRunning,
	"succeeded": tasks.StateSucceeded, "failed": tasks.StateFailed, "cancelled": tasks.StateCancelled,
}

// serveTasks lists a tenant's tasks, in creation order, paged:
// GET /admin/tasks?tenant=T[&state=S][&page_size=N][&page_token=X].
func (h *handler) serveTasks(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r.URL.RawQuery, "tenant", "state", "page_size", "page_token")
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	var st tasks.Store
	if h.opts.tasks != nil {
		st = h.opts.tasks()
	}
	if st == nil {
		writeError(w, http.StatusNotFound, "task storage is off on this broker (--tasks-sqlite or --tasks-postgres)")
		return
	}
	tenant, ok := h.tenantOf(w, q)
	if !ok {
		return
	}
	state := tasks.StateUnspecified
	if s, ok := q["state"]; ok {
		if state, ok = taskStates[s]; !ok {
			writeError(w, http.StatusBadRequest, "state must be scheduled, waiting, running, succeeded, failed or cancelled")
			return
		}
	}
	size := DefaultPageSize
	if s, ok := q["page_size"]; ok {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > tasks.MaxPageSize {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("page_size must be a whole number from 1 to %d", tasks.MaxPageSize))
			return
		}
		size = n
	}
	// The store's page token names only a position within the tenant's
	// own tasks, so it needs no sealing.
	token := q["page_token"]
	h.storeRead(w, r, func(ctx context.Context) error {
		page, next, err := st.List(ctx, tenant, state, size, token)
		if errors.Is(err, tasks.ErrBadPageToken) {
			writeError(w, http.StatusBadRequest, "page_token is not one this listing issued")
			return nil
		}
		if err != nil {
			return err
		}
		out := TasksJSON{Tenant: tenant, State: q["state"], Tasks: make([]TaskJSON, 0, len(page)), NextPageToken: next}
		for _, t := range page {
			out.Tasks = append(out.Tasks, taskJSON(t))
		}
		writeJSON(w, http.StatusOK, out)
		return nil
	})
}

func taskJSON(t *tasks.Task) TaskJSON {
	j := TaskJSON{
		TaskID: t.ID, Policy: t.Policy, State: t.State.String(), WaitReason: t.WaitReason,
		Dispatches: t.Dispatches, Attempts: len(t.Attempts), CreateTime: t.CreateTime, UpdateTime: t.UpdateTime,
	}
	if !t.State.Final() && !t.NextRunTime.IsZero() {
		next := t.NextRunTime
		j.NextRunTime = &next
	}
	if t.Dispatches > 0 {
		j.Outcome = t.Outcome.String()
	}
	if t.Callback != tasks.CallbackNone {
		j.Callback = t.Callback.String()
	}
	return j
}
