package tasks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"github.com/retrybroker/retrybroker/internal/engine"
)

// Creation is group-committed (batcher): concurrent Creates share one
// transaction (and, on SQLite, one fsync), and their River jobs are
// inserted with one InsertManyTx. A batch that fails fails each of its
// Creates, and none of its tasks is stored.

// maxCreateBatch bounds the Creates of one transaction.
const maxCreateBatch = 256

// createTimeout bounds one batch's transaction: a batch holds others'
// creates too, so no caller's cancellation applies to it, only the values
// of its first request's context.
const createTimeout = 30 * time.Second

// createReq is one Create waiting for its batch.
type createReq struct {
	nt      NewTask
	next    time.Time // when it is first due
	seq     int64     // its row's key, once inserted
	task    *Task
	created bool
	err     error
}

// Create implements Store: the row, the tenant's counters and its River
// job are written in one transaction, so a broker killed at any moment has
// all or none. A task past the tenant's pending or bytes bound is refused
// with a *BoundError.
func (s *RiverStore) Create(ctx context.Context, nt NewTask) (*Task, bool, error) {
	if nt.ID == "" {
		nt.ID = uuid.NewString()
	}
	if nt.IdempotencyKey == "" {
		nt.IdempotencyKey = uuid.NewString()
	}
	if nt.TraceParent == "" && nt.TraceState == "" {
		nt.TraceParent, nt.TraceState = traceContextOf(ctx) // the caller's, not the batch runner's
	}
	r := &createReq{nt: nt}
	if err := s.creates.do(ctx, r, maxCreateBatch, createTimeout, s.createBatch); err != nil {
		// The batch may still store the task: a create repeated with the
		// same task_id then finds it.
		return nil, false, err
	}
	return r.task, r.created, r.err
}

// createBatch stores the batch's tasks in one transaction and sets each
// request's result: its new task, or the task its tenant already has with
// that id (an earlier one of the same batch included).
func (s *RiverStore) createBatch(ctx context.Context, batch []*createReq) {
	fail := func(err error) {
		for _, r := range batch {
			r.task, r.created, r.err = nil, false, err
		}
	}
	now := s.clock.Now()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		fail(fmt.Errorf("tasks: begin: %w", err))
		return
	}
	defer func() { _ = tx.Rollback() }()
	first := map[taskKey]*createReq{}
	var cands, fresh []*createReq
	for _, r := range batch {
		nt := &r.nt
		r.next = nt.NotBefore
		if r.next.IsZero() || r.next.Before(now) {
			r.next = now
		}
		if nt.NotBefore.IsZero() {
			nt.NotBefore = now
		}
		k := taskKey{nt.Tenant, nt.ID}
		if first[k] != nil {
			continue // the same id earlier in this batch: answered after the commit
		}
		first[k] = r
		cands = append(cands, r)
	}
	inserted, err := s.insertTasks(ctx, tx, cands, now)
	if err != nil {
		fail(err)
		return
	}
	// The bounds are checked after the dedup: a second create of a task
	// the tenant has is answered with it, whatever the tenant holds. A
	// refused task is deleted again in this transaction, and the batch's
	// others commit. They are checked after every insert: an insert may
	// wait for a dispatch that is updating a task of the same id, and that
	// dispatch then updates the tenant's counters, so the batch must not
	// hold their row while it waits (PostgreSQL found that deadlock).
	if fresh, err = s.admitBatch(ctx, tx, inserted); err != nil {
		fail(err)
		return
	}
	if len(fresh) > 0 {
		params := make([]river.InsertManyParams, len(fresh))
		for i, r := range fresh {
			params[i] = river.InsertManyParams{
				Args:       dispatchArgs{Tenant: r.nt.Tenant, TaskID: r.nt.ID, Due: nano(r.next)},
				InsertOpts: &river.InsertOpts{ScheduledAt: insertAt(now, r.next)},
			}
		}
		jobs, err := s.client.InsertManyTx(ctx, tx, params)
		if err != nil {
			fail(fmt.Errorf("tasks: schedule: %w", err))
			return
		}
		if len(jobs) != len(fresh) {
			fail(fmt.Errorf("tasks: schedule: River inserted %d jobs for %d tasks", len(jobs), len(fresh)))
			return
		}
		ids := make([]int64, len(jobs))
		for i, j := range jobs {
			ids[i] = j.Job.ID
		}
		if err := s.linkJobs(ctx, tx, fresh, ids); err != nil {
			fail(err)
			return
		}
	}
	if err := tx.Commit(); err != nil {
		fail(fmt.Errorf("tasks: commit: %w", err))
		return
	}
	stored := func(t time.Time) time.Time { return unnano(nano(t)) } // as Get returns it
	isFresh := make(map[*createReq]bool, len(fresh))
	for _, r := range fresh {
		isFresh[r] = true
		nt := r.nt
		r.task, r.created = &Task{
			Tenant: nt.Tenant, ID: nt.ID, Policy: nt.Policy, State: StateScheduled,
			NotBefore: stored(nt.NotBefore), GiveUpAfter: stored(nt.GiveUpAfter), Attempts: []engine.AttemptRecord{},
			CreateTime: stored(now), UpdateTime: stored(now), NextRunTime: stored(r.next),
			IdempotencyKey: nt.IdempotencyKey, Request: nt.Request,
			CallbackURL: nt.CallbackURL, Callback: callbackStateAtCreate(nt.CallbackURL),
		}, true
	}
	for _, r := range batch {
		if f := first[taskKey{r.nt.Tenant, r.nt.ID}]; f != r && f.err != nil {
			r.err = f.err // the same id, refused earlier in this batch
			continue
		}
		if !isFresh[r] && r.err == nil {
			r.task, r.err = s.Get(ctx, r.nt.Tenant, r.nt.ID)
			if errors.Is(r.err, ErrNotFound) {
				r.err = fmt.Errorf("tasks: task %q neither inserted nor found", r.nt.ID)
			}
		}
	}
}
