package tasks

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/retrybroker/retrybroker/internal/engine"
)

// Default bounds of a tenant's tasks and of their retention.
const (
	// DefaultMaxPendingPerTenant bounds a tenant's tasks that are not
	// final (SCHEDULED, WAITING, RUNNING).
	DefaultMaxPendingPerTenant = 100_000
	// DefaultMaxBytesPerTenant bounds the sum of a tenant's stored
	// requests (every task kept, final or not): 1 GiB.
	DefaultMaxBytesPerTenant = 1 << 30
	// DefaultRetention is how long a SUCCEEDED or CANCELLED task is kept
	// after its last update.
	DefaultRetention = 7 * 24 * time.Hour
	// DefaultFailedRetention is how long a FAILED task is kept after its
	// last update (longer: it may still be retried).
	DefaultFailedRetention = 30 * 24 * time.Hour
	// DefaultMaxResponseBody bounds the response body a task stores: 1 MiB.
	DefaultMaxResponseBody = 1 << 20
)

// limits are a store's per-tenant bounds and retention times.
type limits struct {
	maxPending, maxBytes       int64
	retention, failedRetention time.Duration
	maxResponseBody            int64
	sweepInterval              time.Duration
}

var defaultLimits = limits{
	maxPending: DefaultMaxPendingPerTenant, maxBytes: DefaultMaxBytesPerTenant,
	retention: DefaultRetention, failedRetention: DefaultFailedRetention,
	maxResponseBody: DefaultMaxResponseBody,
}

// WithMaxPendingPerTenant bounds the tasks of one tenant that are not
// final (default DefaultMaxPendingPerTenant); n < 1 keeps the default.
func WithMaxPendingPerTenant(n int64) Option {
	return func(o *options) {
		if n >= 1 {
			o.maxPending = n
		}
	}
}

// WithMaxBytesPerTenant bounds the bytes of the stored requests of one
// tenant's kept tasks (default DefaultMaxBytesPerTenant); n < 1 keeps the
// default.
func WithMaxBytesPerTenant(n int64) Option {
	return func(o *options) {
		if n >= 1 {
			o.maxBytes = n
		}
	}
}

// WithRetention sets how long final tasks are kept after their last
// update: SUCCEEDED and CANCELLED ones for done, FAILED ones for failed
// (defaults DefaultRetention and DefaultFailedRetention); a duration <= 0
// keeps its default.
func WithRetention(done, failed time.Duration) Option {
	return func(o *options) {
		if done > 0 {
			o.retention = done
		}
		if failed > 0 {
			o.failedRetention = failed
		}
	}
}

// WithMaxResponseBody bounds the response body a task stores, in bytes
// (default DefaultMaxResponseBody): a dispatch reads at most this much of
// the final body (or the policy's max_response_body, when smaller), and a
// longer body is stored cut, with Truncated set. n < 1 keeps the default.
func WithMaxResponseBody(n int64) Option {
	return func(o *options) {
		if n >= 1 {
			o.maxResponseBody = n
		}
	}
}

// capResponse narrows the call's response body limit to the store's.
func (s *RiverStore) capResponse(c *engine.Call) {
	if c.MaxResponseBody <= 0 || c.MaxResponseBody > s.maxResponseBody {
		c.MaxResponseBody = s.maxResponseBody
	}
}

// BoundError reports a create (or retry) refused by a per-tenant bound;
// the server answers RESOURCE_EXHAUSTED with its message.
type BoundError struct {
	// Bound names what is bounded: "pending tasks" or "stored bytes".
	Bound string
	// Limit is the bound, Used what the tenant holds, Need what the task
	// would add.
	Limit, Used, Need int64
}

func (e *BoundError) Error() string {
	if e.Bound == boundPending {
		return fmt.Sprintf("the tenant has %d pending tasks, its bound of %d pending tasks (--tasks-max-pending-per-tenant); wait for some to finish or cancel some", e.Used, e.Limit)
	}
	return fmt.Sprintf("the tenant's stored tasks hold %d bytes; %d more would pass its bound of %d stored bytes (--tasks-max-bytes-per-tenant); wait for finished tasks to be deleted (--tasks-retention) or cancel some", e.Used, e.Need, e.Limit)
}

const (
	boundPending = "pending tasks"
	boundBytes   = "stored bytes"
)

// usageSchema holds one counter row per tenant: its tasks that are not
// final and the bytes of all its stored requests. Every change of either
// is made in the transaction that changes the tasks, by a conditional
// UPDATE of this row, so the bounds hold under concurrent creates on any
// database: SQLite has one writer; under PostgreSQL's READ COMMITTED the
// UPDATE locks the row, and a concurrent UPDATE of the same row waits for
// the first to commit and then re-checks its WHERE on the committed
// counts. The index serves the retention sweep. The statements are valid in SQLite and PostgreSQL as they are: BIGINT has
// SQLite's INTEGER affinity and is 64-bit in PostgreSQL.
var usageSchema = []string{
	`CREATE TABLE IF NOT EXISTS retrybroker_tenant_usage (
	tenant TEXT PRIMARY KEY,
	pending BIGINT NOT NULL,
	bytes BIGINT NOT NULL
)`,
	`CREATE INDEX IF NOT EXISTS retrybroker_task_retention ON retrybroker_task (state, update_time)`,
}

// usageBackfill counts the tasks of a tenant that has none counted: those
// of a database written before the counters were (make run keeps one). A
// tenant with a counter row is left alone.
const usageBackfill = `INSERT INTO retrybroker_tenant_usage (tenant, pending, bytes)
	SELECT tenant, SUM(CASE WHEN state < ? THEN 1 ELSE 0 END), SUM(LENGTH(request))
	FROM retrybroker_task WHERE true GROUP BY tenant
	ON CONFLICT (tenant) DO NOTHING`

func (s *RiverStore) createUsage(ctx context.Context) error {
	for _, q := range usageSchema {
		if _, err := s.db.ExecContext(ctx, s.sql(q)); err != nil {
			return fmt.Errorf("tasks: create usage table: %w", err)
		}
	}
	if _, err := s.db.ExecContext(ctx, s.sql(usageBackfill), StateSucceeded); err != nil {
		return fmt.Errorf("tasks: count stored tasks: %w", err)
	}
	return nil
}

// execer is a *sql.Tx or a *sql.DB.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// reserve adds pending tasks and bytes (each >= 0) to tenant's counters
// in tx, or returns a *BoundError, changing nothing, when either would
// pass its bound.
func (s *RiverStore) reserve(ctx context.Context, tx execer, tenant string, pending, bytes int64) error {
	if _, err := tx.ExecContext(ctx, s.sql(`INSERT INTO retrybroker_tenant_usage (tenant, pending, bytes) VALUES (?, 0, 0)
		ON CONFLICT (tenant) DO NOTHING`), tenant); err != nil {
		return fmt.Errorf("tasks: usage: %w", err)
	}
	res, err := tx.ExecContext(ctx, s.sql(`UPDATE retrybroker_tenant_usage SET pending = pending + ?, bytes = bytes + ?
		WHERE tenant = ? AND pending + ? <= ? AND bytes + ? <= ?`),
		pending, bytes, tenant, pending, s.maxPending, bytes, s.maxBytes)
	if err != nil {
		return fmt.Errorf("tasks: usage: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return nil
	}
	var used, usedBytes int64
	if err := tx.QueryRowContext(ctx, s.sql(`SELECT pending, bytes FROM retrybroker_tenant_usage WHERE tenant = ?`), tenant).
		Scan(&used, &usedBytes); err != nil {
		return fmt.Errorf("tasks: usage: %w", err)
	}
	if used+pending > s.maxPending {
		return &BoundError{Bound: boundPending, Limit: s.maxPending, Used: used, Need: pending}
	}
	return &BoundError{Bound: boundBytes, Limit: s.maxBytes, Used: usedBytes, Need: bytes}
}

// admitCreated counts the task id of tenant, just inserted in tx with a
// request of size bytes, against the tenant's bounds. Past one it deletes
// the row again (in tx, so a transaction that stores other tasks too can
// still commit them) and returns the *BoundError.
func (s *RiverStore) admitCreated(ctx context.Context, tx execer, tenant, id string, size int64) error {
	err := s.reserve(ctx, tx, tenant, 1, size)
	var be *BoundError
	if !errors.As(err, &be) {
		return err
	}
	if _, derr := tx.ExecContext(ctx, s.sql(`DELETE FROM retrybroker_task WHERE tenant = ? AND task_id = ?`), tenant, id); derr != nil {
		return fmt.Errorf("tasks: undo a refused create: %w", derr)
	}
	return err
}

// release takes pending tasks and bytes (each >= 0) off tenant's
// counters in tx; it is never refused.
func (s *RiverStore) release(ctx context.Context, tx execer, tenant string, pending, bytes int64) error {
	if pending == 0 && bytes == 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, s.sql(`UPDATE retrybroker_tenant_usage SET pending = pending - ?, bytes = bytes - ?
		WHERE tenant = ?`), pending, bytes, tenant); err != nil {
		return fmt.Errorf("tasks: usage: %w", err)
	}
	return nil
}

// execRecord runs the UPDATE q of a dispatch's verdict on task r; when it
// moves the task to a final state, the task stops counting as pending and
// its callback (if any) is scheduled, in the same transaction.
func (s *RiverStore) execRecord(ctx context.Context, r *row, to State, q string, args ...any) (sql.Result, error) {
	if !to.Final() {
		return s.db.ExecContext(ctx, q, args...)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback() }()
	res, err := tx.ExecContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	if n, _ := res.RowsAffected(); n == 1 {
		if err := s.release(ctx, tx, r.Tenant, 1, 0); err != nil {
			return nil, err
		}
		if err := s.scheduleCallback(ctx, tx, r); err != nil {
			return nil, err
		}
	}
	return res, tx.Commit()
}

// Usage returns what tenant holds against its bounds: tasks that are not
// final, and the bytes of its stored requests.
func (s *RiverStore) Usage(ctx context.Context, tenant string) (pending, bytes int64, err error) {
	err = s.db.QueryRowContext(ctx, s.sql(`SELECT pending, bytes FROM retrybroker_tenant_usage WHERE tenant = ?`), tenant).Scan(&pending, &bytes)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, fmt.Errorf("tasks: usage: %w", err)
	}
	return pending, bytes, nil
}
