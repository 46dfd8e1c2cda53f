package tasks

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/riverqueue/river"

	"github.com/retrybroker/retrybroker/internal/engine"
)

const columns = `seq, tenant, task_id, policy, state, not_before, give_up_after, create_time, update_time, next_run_time,
	wait_reason, idempotency_key, dispatches, outcome, error, attempts, response, request, job_id,
	callback_url, callback_state, callback_attempts, callback_error, callback_id, trace_parent, trace_state`

type row struct {
	Task
	seq   int64
	jobID int64
	// callbackID is the webhook-id of the current final state's callback.
	callbackID string
	// traceParent and traceState are the CreateTask call's W3C trace
	// context (empty when it had none).
	traceParent, traceState string
}

type scanner interface{ Scan(dest ...any) error }

func scanRow(sc scanner) (*row, error) {
	var r row
	var notBefore, giveUp, created, updated, next int64
	var attempts, response []byte
	if err := sc.Scan(&r.seq, &r.Tenant, &r.ID, &r.Policy, &r.State, &notBefore, &giveUp, &created, &updated, &next,
		&r.WaitReason, &r.IdempotencyKey, &r.Dispatches, &r.Outcome, &r.Error, &attempts, &response, &r.Request, &r.jobID,
		&r.CallbackURL, &r.Callback, &r.CallbackAttempts, &r.CallbackError, &r.callbackID, &r.traceParent, &r.traceState); err != nil {
		return nil, err
	}
	r.NotBefore, r.GiveUpAfter, r.CreateTime, r.UpdateTime, r.NextRunTime = unnano(notBefore), unnano(giveUp), unnano(created), unnano(updated), unnano(next)
	if err := json.Unmarshal(attempts, &r.Attempts); err != nil {
		return nil, fmt.Errorf("tasks: stored attempts: %w", err)
	}
	if len(response) > 0 {
		r.Response = new(engine.FinalResponse)
		if err := json.Unmarshal(response, r.Response); err != nil {
			return nil, fmt.Errorf("tasks: stored response: %w", err)
		}
	}
	return &r, nil
}

func (s *RiverStore) getRow(ctx context.Context, tenant, id string) (*row, error) {
	r, err := scanRow(s.db.QueryRowContext(ctx, s.sql(`SELECT `+columns+` FROM retrybroker_task WHERE tenant = ? AND task_id = ?`), tenant, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("tasks: get: %w", err)
	}
	return r, nil
}

// Get implements Store.
func (s *RiverStore) Get(ctx context.Context, tenant, id string) (*Task, error) {
	r, err := s.getRow(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	return &r.Task, nil
}

// List implements Store. The page token is the opaque position of the
// last task returned; a token from another tenant only skips within the
// caller's own tasks.
func (s *RiverStore) List(ctx context.Context, tenant string, state State, pageSize int, pageToken string) ([]*Task, string, error) {
	if pageSize <= 0 {
		pageSize = DefaultPageSize
	}
	pageSize = min(pageSize, MaxPageSize)
	after, err := parsePageToken(pageToken)
	if err != nil {
		return nil, "", err
	}
	q := `SELECT ` + columns + ` FROM retrybroker_task WHERE tenant = ? AND seq > ?`
	args := []any{tenant, after}
	if state != StateUnspecified {
		q += ` AND state = ?`
		args = append(args, state)
	}
	q += ` ORDER BY seq LIMIT ?`
	args = append(args, pageSize+1)
	rows, err := s.db.QueryContext(ctx, s.sql(q), args...)
	if err != nil {
		return nil, "", fmt.Errorf("tasks: list: %w", err)
	}
	defer rows.Close()
	var out []*Task
	var last int64
	next := ""
	for rows.Next() {
		r, err := scanRow(rows)
		if err != nil {
			return nil, "", fmt.Errorf("tasks: list: %w", err)
		}
		if len(out) == pageSize {
			next = encodePageToken(last)
			break
		}
		out = append(out, &r.Task)
		last = r.seq
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("tasks: list: %w", err)
	}
	return out, next, nil
}

// encodePageToken is the token of the page after the task at position seq.
func encodePageToken(seq int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(seq, 10)))
}

// parsePageToken returns the position a token of encodePageToken names (0 for
// the empty token), or ErrBadPageToken for anything else.
func parsePageToken(tok string) (int64, error) {
	if tok == "" {
		return 0, nil
	}
	if len(tok) > 32 {
		return 0, ErrBadPageToken
	}
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return 0, ErrBadPageToken
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil || n <= 0 || encodePageToken(n) != tok {
		return 0, ErrBadPageToken
	}
	return n, nil
}

// ErrBadPageToken reports a page token List did not issue.
var ErrBadPageToken = errors.New("invalid page token")

// Cancel implements Store: the row becomes CANCELLED (unless final), no
// longer pending, and its River job is cancelled; a dispatch already running finishes its
// engine run, but its result no longer changes the task.
func (s *RiverStore) Cancel(ctx context.Context, tenant, id string) (*Task, error) {
	r, err := s.getRow(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	if r.State.Final() {
		return &r.Task, nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("tasks: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	res, err := tx.ExecContext(ctx, s.sql(`UPDATE retrybroker_task SET state = ?, update_time = ?
		WHERE tenant = ? AND task_id = ? AND state < ?`), StateCancelled, nano(s.clock.Now()), tenant, id, StateSucceeded)
	if err != nil {
		return nil, fmt.Errorf("tasks: cancel: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		if err := s.release(ctx, tx, tenant, 1, 0); err != nil {
			return nil, err
		}
		if err := s.scheduleCallback(ctx, tx, r); err != nil {
			return nil, err
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("tasks: commit: %w", err)
	}
	if _, err := s.client.JobCancel(ctx, r.jobID); err != nil && !errors.Is(err, river.ErrNotFound) {
		// The row is what counts: a job that still runs finds it cancelled.
		s.logger.WarnContext(ctx, "tasks: cancel river job", "task_id", id, "error", err)
	}
	s.changed(tenant, id)
	return s.Get(ctx, tenant, id)
}

// Retry implements Store: in one transaction the row becomes SCHEDULED
// again (due now, give_up_after cleared when passed), it counts as
// pending again (a *BoundError past the tenant's bound), and a new River
// job is inserted for it.
func (s *RiverStore) Retry(ctx context.Context, tenant, id string) (*Task, error) {
	r, err := s.getRow(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	if r.State != StateFailed {
		return nil, ErrNotFailed
	}
	now := s.clock.Now()
	giveUp := nano(r.GiveUpAfter)
	if giveUp != 0 && !now.Before(r.GiveUpAfter) {
		giveUp = 0 // a retry after give_up_after would fail at once
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("tasks: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	res, err := tx.ExecContext(ctx, s.sql(`UPDATE retrybroker_task SET state = ?, update_time = ?, next_run_time = ?, give_up_after = ?,
		wait_reason = '', error = '', callback_state = ?, callback_attempts = 0, callback_error = '', callback_id = ''
		WHERE seq = ? AND state = ?`),
		StateScheduled, nano(now), nano(now), giveUp, callbackStateAtCreate(r.CallbackURL), r.seq, StateFailed)
	if err != nil {
		return nil, fmt.Errorf("tasks: retry: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return nil, ErrNotFailed // changed meanwhile
	}
	if err := s.reserve(ctx, tx, tenant, 1, 0); err != nil {
		return nil, err // pending again: within the bound
	}
	job, err := s.client.InsertTx(ctx, tx, dispatchArgs{Tenant: tenant, TaskID: id}, nil)
	if err != nil {
		return nil, fmt.Errorf("tasks: schedule: %w", err)
	}
	if _, err := tx.ExecContext(ctx, s.sql(`UPDATE retrybroker_task SET job_id = ? WHERE seq = ?`), job.Job.ID, r.seq); err != nil {
		return nil, fmt.Errorf("tasks: link job: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("tasks: commit: %w", err)
	}
	s.changed(tenant, id)
	return s.Get(ctx, tenant, id)
}

// nano stores a time as Unix nanoseconds; the zero time is 0.
func nano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func unnano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}
