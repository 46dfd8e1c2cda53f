package tasks

import (
	"context"
	"fmt"
	"time"
)

// SweepBatch is how many tasks one sweep deletes per transaction.
const SweepBatch = 1000

// sweepEvery is how often the sweeper runs: WithSweepInterval's, or a
// tenth of the shorter retention, between a second and a minute.
func (l limits) sweepEvery() time.Duration {
	if l.sweepInterval > 0 {
		return l.sweepInterval
	}
	return min(max(min(l.retention, l.failedRetention)/10, time.Second), time.Minute)
}

// WithSweepInterval sets how often the store deletes final tasks past
// their retention (default a tenth of the shorter retention, between a
// second and a minute); d <= 0 keeps the default. The interval is real
// time, as River's polling is; what is past its retention is decided by
// the store's clock (WithClock).
func WithSweepInterval(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.sweepInterval = d
		}
	}
}

// riverRetention is how long River keeps the job rows of final tasks
// (their completed and cancelled jobs) and of jobs it discarded: never
// longer than the tasks they ran, nor than River's own defaults (a day for
// completed and cancelled jobs, a week for discarded ones). A final task's
// River job holds nothing the task needs: RetryTask inserts a new one.
func (l limits) riverRetention() (done, discarded time.Duration) {
	return min(l.retention, l.failedRetention, 24*time.Hour), min(l.failedRetention, 7*24*time.Hour)
}

// Sweep deletes the final tasks past their retention, as of the store's
// clock: SUCCEEDED and CANCELLED ones whose last update is older than the
// retention, FAILED ones older than the failed retention. Their bytes are
// taken off their tenants' counters in the same transaction. It returns
// how many tasks it deleted. Replicas may sweep at once: a task is deleted
// (and counted off) by one of them.
func (s *RiverStore) Sweep(ctx context.Context) (int, error) {
	total := 0
	for {
		n, err := s.sweepBatch(ctx)
		total += n
		if err != nil || n < SweepBatch {
			return total, err
		}
	}
}

func (s *RiverStore) sweepBatch(ctx context.Context) (int, error) {
	now := s.clock.Now()
	done, failed := nano(now.Add(-s.retention)), nano(now.Add(-s.failedRetention))
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("tasks: sweep: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	// The condition is repeated outside the subquery: under PostgreSQL's
	// READ COMMITTED a row retried (FAILED to SCHEDULED) after the subquery
	// chose it is re-checked, and kept.
	const expired = `((state IN (?, ?) AND update_time < ?) OR (state = ? AND update_time < ?))`
	args := []any{StateSucceeded, StateCancelled, done, StateFailed, failed}
	rows, err := tx.QueryContext(ctx, s.sql(`DELETE FROM retrybroker_task WHERE seq IN
		(SELECT seq FROM retrybroker_task WHERE `+expired+` LIMIT ?) AND `+expired+`
		RETURNING tenant, LENGTH(request)`), append(append(append([]any{}, args...), SweepBatch), args...)...)
	if err != nil {
		return 0, fmt.Errorf("tasks: sweep: %w", err)
	}
	freed := map[string]int64{}
	n := 0
	for rows.Next() {
		var tenant string
		var size int64
		if err := rows.Scan(&tenant, &size); err != nil {
			_ = rows.Close()
			return 0, fmt.Errorf("tasks: sweep: %w", err)
		}
		freed[tenant] += size
		n++
	}
	if err := rows.Close(); err != nil {
		return 0, fmt.Errorf("tasks: sweep: %w", err)
	}
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("tasks: sweep: %w", err)
	}
	for tenant, size := range freed {
		if err := s.release(ctx, tx, tenant, 0, size); err != nil {
			return 0, err
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("tasks: sweep: commit: %w", err)
	}
	return n, nil
}

// sweepLoop runs Sweep at once and then every sweepEvery until ctx ends;
// a failed sweep is logged and tried again at the next tick. The ticks are
// real time (an auto-advancing test clock would make them back to back).
func (s *RiverStore) sweepLoop(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if n, err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
			s.logger.WarnContext(ctx, "tasks: retention sweep", "error", err)
		} else if n > 0 {
			s.logger.DebugContext(ctx, "tasks: retention sweep", "deleted", n)
		}
		t.Reset(s.sweepEvery())
	}
}
