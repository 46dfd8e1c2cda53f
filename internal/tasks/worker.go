package tasks

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/riverqueue/river"

	"github.com/retrybroker/retrybroker/internal/engine"
)

// worker dispatches one due task.
type worker struct {
	river.WorkerDefaults[dispatchArgs]
	s *RiverStore
}

// Timeout is a dispatch job's timeout for River: WithRescueAfter's d. Work
// ends the dispatch itself by d/2 (and boundedRunner its engine run by
// d/4), so River, which rescues a job running past both its timeout and
// RescueStuckJobsAfter, takes only the job of a broker that died.
//
// An early dispatch (a run that starts before the task's due time as the
// job was inserted) only reads the row and snoozes: its timeout is
// earlyTimeout, so River rescues it soon if its broker dies meanwhile.
func (w *worker) Timeout(job *river.Job[dispatchArgs]) time.Duration {
	if early(job) {
		return earlyTimeout
	}
	return w.s.rescueAfter
}

// early reports whether this run of job started before the task's due
// time as the job was inserted.
func early(job *river.Job[dispatchArgs]) bool {
	return job.Args.Due != 0 && job.AttemptedAt != nil && job.AttemptedAt.Before(unnano(job.Args.Due))
}

// Work runs the task's engine call once and records what it decided. It
// returns river.JobSnooze for a wait (River counts no attempt), nil for a
// final state, and an error only when the database failed (River retries).
func (w *worker) Work(ctx context.Context, job *river.Job[dispatchArgs]) error {
	s := w.s
	ctx, cancel := context.WithTimeout(ctx, s.rescueAfter/2)
	defer cancel()
	r, err := s.getRow(ctx, job.Args.Tenant, job.Args.TaskID)
	if errors.Is(err, ErrNotFound) || (err == nil && r.State.Final()) {
		return nil // deleted or already final (cancelled): nothing to run
	}
	if err != nil {
		return err
	}
	now := s.clock.Now()
	due := r.NextRunTime
	if !r.GiveUpAfter.IsZero() && r.GiveUpAfter.Before(due) {
		due = r.GiveUpAfter // then it fails, on time
	}
	if now.Before(due) || early(job) {
		// Early (see insertAt): snooze the rest, even when it is gone by
		// now, so that the run with the policy's time has the full timeout.
		return snooze(due.Sub(now))
	}
	if !r.GiveUpAfter.IsZero() && !now.Before(r.GiveUpAfter) {
		return s.finish(ctx, r, verdict{state: StateFailed}, nil, errors.New("give_up_after passed before the task succeeded"))
	}
	becameDue := r.NextRunTime
	if ok, err := s.transition(ctx, r, StateRunning, now); err != nil || !ok {
		return err
	}
	s.obs.TaskDispatchStarted(now.Sub(becameDue))
	ctx, span := s.dispatchSpan(ctx, r)
	defer span.End()
	call, err := s.prepare(ctx, r.Tenant, r.ID, r.Request)
	if err != nil {
		s.dispatchDone(span, "error", StateFailed)
		return s.finish(ctx, r, verdict{state: StateFailed}, nil, err)
	}
	s.capResponse(call)
	if h := call.Policy.IdempotencyHeader; h != "" {
		call.Header = call.Header.Clone()
		call.Header.Set(h, r.IdempotencyKey)
	}
	res, runErr := s.runner.Run(ctx, call)
	if ctx.Err() != nil {
		// The broker is stopping: the task runs again at the next start,
		// with no attempt used up.
		s.dispatchDone(span, "interrupted", StateScheduled)
		if _, err := s.record(context.WithoutCancel(ctx), r, verdict{state: StateScheduled}, res, nil); err != nil {
			return err
		}
		return river.JobSnooze(0)
	}
	v := judge(res, runErr)
	if v.state == StateWaiting && !r.GiveUpAfter.IsZero() && !s.clock.Now().Add(v.wait).Before(r.GiveUpAfter) {
		v = verdict{state: StateFailed}
		if runErr == nil {
			runErr = fmt.Errorf("the task would wait (%s) past give_up_after", res.Outcome)
		}
	}
	s.dispatchDone(span, outcomeLabel(res, runErr, v), v.state)
	return s.finish(ctx, r, v, res, runErr)
}

// outcomeLabel names how a dispatch ended, for the dispatch counter: the
// engine's outcome ("success", "gate_closed", ...), "pacing",
// "store_unavailable", or "error" (a refused destination, an invalid
// stored request).
func outcomeLabel(res *engine.Result, runErr error, v verdict) string {
	switch {
	case v.state == StateWaiting && (v.reason == "pacing" || v.reason == "store_unavailable"):
		return v.reason
	case runErr != nil || res == nil:
		return "error"
	}
	return res.Outcome.String()
}

// transition moves r from its stored state to to; false when the row
// changed meanwhile (cancelled). Dispatches' moves are group-committed
// (batcher, moveBatch): when many tasks fall due at once (a gate reopens
// on a hundred waiting tasks), each no longer waits for the fsyncs of
// every move ahead of it on SQLite's one connection before it sends.
func (s *RiverStore) transition(ctx context.Context, r *row, to State, now time.Time) (bool, error) {
	q := &transitionReq{seq: r.seq, from: r.State, to: to, now: now}
	if err := s.moves.do(ctx, q, maxMoveBatch, moveTimeout, s.moveBatch); err != nil {
		return false, fmt.Errorf("tasks: mark %s: %w", to, err)
	}
	if q.err != nil {
		return false, fmt.Errorf("tasks: mark %s: %w", to, q.err)
	}
	if q.moved {
		r.State = to
		s.changed(r.Tenant, r.ID)
	}
	return q.moved, nil
}

// transitionReq is one move of a task's row (seq) from state from to
// state to, waiting for its batch; moved and err are its result.
type transitionReq struct {
	seq      int64
	from, to State
	now      time.Time
	moved    bool
	err      error
}

// maxMoveBatch bounds the moves of one batch; moveTimeout bounds its
// transaction.
const (
	maxMoveBatch = 256
	moveTimeout  = 10 * time.Second
)

// moveBatch writes a batch of moves, in one transaction when there are
// several (one commit, one fsync on SQLite): each is one UPDATE by seq,
// the primary key, conditional on the state it expects, so a row whose
// state changed meanwhile is not moved. (A multi-row UPDATE with seq
// IN (...) would make a statement text per batch size, each kept in
// SQLite's statement cache, and is planned badly by PostgreSQL while its
// statistics lag behind the table, as the job links of creates were; see
// linkJobs.) A statement that fails fails every move of the batch, none
// of which is then written (the dispatches return the error, and River
// runs them again).
func (s *RiverStore) moveBatch(ctx context.Context, batch []*transitionReq) {
	fail := func(err error) {
		for _, q := range batch {
			q.moved, q.err = false, err
		}
	}
	var ex execer = s.db
	var tx *sql.Tx
	if len(batch) > 1 {
		var err error
		if tx, err = s.db.BeginTx(ctx, nil); err != nil {
			fail(err)
			return
		}
		defer func() { _ = tx.Rollback() }() // a no-op once committed
		ex = tx
	}
	stmt := s.sql(`UPDATE retrybroker_task SET state = ?, update_time = ? WHERE seq = ? AND state = ?`)
	for _, q := range batch {
		res, err := ex.ExecContext(ctx, stmt, q.to, nano(q.now), q.seq, q.from)
		if err != nil {
			fail(err)
			return
		}
		n, err := res.RowsAffected()
		if err != nil {
			fail(err)
			return
		}
		q.moved = n == 1
	}
	if tx != nil {
		if err := tx.Commit(); err != nil {
			fail(err)
		}
	}
}

// finish records a dispatch's verdict and tells River what to do next.
func (s *RiverStore) finish(ctx context.Context, r *row, v verdict, res *engine.Result, runErr error) error {
	ok, err := s.record(ctx, r, v, res, runErr)
	if err != nil || !ok {
		return err
	}
	if v.state == StateWaiting {
		return snooze(v.wait)
	}
	return nil
}

// River's scheduler (on the leader only, every 5 s:
// maintenance.JobSchedulerIntervalDefault, not configurable in v0.51)
// frees 'scheduled' jobs due within its next interval, keeping their exact
// run time, which the fetch loop honours within its poll interval. A
// snooze of at most 5 s skips the scheduler: the job is 'available' at
// once, with its exact run time.

// insertAt is the ScheduledAt of a new River job for a task due at next.
// It is zero (available now) unless next is more than 5 s away: a job
// inserted with a run time is 'scheduled', and River's scheduler, which
// runs every 5 s on the leader only, frees it up to 5 s ahead, so a task
// due sooner than the scheduler's next run would start up to 5 s late
// (and, after a restart, only once a killed leader's lease lapses). Such a
// task's first dispatch comes early and snoozes the rest of the wait
// exactly (Work); it has a short job timeout (Timeout), so that a broker
// killed during it strands the job for seconds, not for
// --tasks-rescue-after.
func insertAt(now, next time.Time) time.Time {
	if next.Sub(now) > 5*time.Second {
		return next.Add(runPad)
	}
	return time.Time{}
}

// runPad is added to every run time the store gives River (snooze, and
// insertAt's scheduled insert), so that a job is never fetched before its
// task's time. SQLite keeps River's times to the millisecond, rounded
// (riversqlite's timeString), and River's fetch compares them with the
// current millisecond: a job due at 12.3 ms was stored as 12 ms and could
// be fetched from 12.0 ms on. Its run, finding the task not yet due (or,
// with attempted_at kept as 12 ms, taking itself for the early dispatch),
// snoozed again and waited for another fetch. BenchmarkTaskLag's p99 on
// SQLite (200 tasks) was 116-242 ms in 6 runs of 6 without the pad, and
// 35-38 ms with it. A time stored at least half a millisecond late is
// fetched at or after the task's time on either database; the pad costs
// at most 1.5 ms of lag.
const runPad = time.Millisecond

// snooze tells River to run the job again in d (at once when d is not
// positive), plus runPad.
func snooze(d time.Duration) error { return river.JobSnooze(max(d, 0) + runPad) }

// earlyTimeout is an early dispatch's job timeout: it only reads the row
// and snoozes.
const earlyTimeout = 10 * time.Second

// record writes the verdict, appending the run's attempts, unless the
// row left r's state meanwhile (cancelled): false then.
func (s *RiverStore) record(ctx context.Context, r *row, v verdict, res *engine.Result, runErr error) (bool, error) {
	now := s.clock.Now()
	attempts := r.Attempts
	var response []byte
	outcome := r.Outcome
	if res != nil {
		attempts = append(attempts, res.Attempts...)
		outcome = res.Outcome
		if res.Response != nil {
			b, err := json.Marshal(res.Response)
			if err != nil {
				return false, fmt.Errorf("tasks: encode response: %w", err)
			}
			response = b
		}
	}
	if attempts == nil {
		attempts = []engine.AttemptRecord{}
	}
	ab, err := json.Marshal(attempts)
	if err != nil {
		return false, fmt.Errorf("tasks: encode attempts: %w", err)
	}
	msg := ""
	if runErr != nil {
		msg = runErr.Error()
	}
	next := now
	if v.state == StateWaiting {
		next = now.Add(v.wait)
	}
	dispatches := r.Dispatches
	if res != nil {
		dispatches++
	}
	q := `UPDATE retrybroker_task SET state = ?, update_time = ?, next_run_time = ?, wait_reason = ?, dispatches = ?,
		outcome = ?, error = ?, attempts = ?` + map[bool]string{true: `, response = ?`, false: ``}[response != nil] +
		` WHERE seq = ? AND state = ?`
	args := []any{v.state, nano(now), nano(next), v.reason, dispatches, outcome, msg, ab}
	if response != nil {
		args = append(args, response)
	}
	args = append(args, r.seq, r.State)
	// A final state, the task's release from its tenant's pending count
	// and its callback's job are written in one transaction (execRecord):
	// a broker killed between them would lose the callback.
	ures, err := s.execRecord(ctx, r, v.state, s.sql(q), args...)
	if err != nil {
		return false, fmt.Errorf("tasks: record %s: %w", v.state, err)
	}
	n, _ := ures.RowsAffected()
	if n == 1 {
		s.changed(r.Tenant, r.ID)
	}
	return n == 1, nil
}
