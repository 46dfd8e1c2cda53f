package tasks

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	_ "modernc.org/sqlite" // the pure-Go SQLite driver ("sqlite"), the one River's own SQLite tests use

	"github.com/retrybroker/retrybroker/internal/engine"
)

// dispatchArgs is the River job of one task: it names the row, which
// holds everything else.
type dispatchArgs struct {
	Tenant string `json:"tenant"`
	TaskID string `json:"task_id"`
}

// Kind implements river.JobArgs.
func (dispatchArgs) Kind() string { return "retrybroker_task" }

// schema is the broker's own table, next to River's in the same database.
const schema = `CREATE TABLE IF NOT EXISTS retrybroker_task (
	seq INTEGER PRIMARY KEY AUTOINCREMENT,
	tenant TEXT NOT NULL,
	task_id TEXT NOT NULL,
	policy TEXT NOT NULL,
	state INTEGER NOT NULL,
	not_before INTEGER NOT NULL,
	give_up_after INTEGER NOT NULL,
	create_time INTEGER NOT NULL,
	update_time INTEGER NOT NULL,
	next_run_time INTEGER NOT NULL,
	wait_reason TEXT NOT NULL,
	idempotency_key TEXT NOT NULL,
	dispatches INTEGER NOT NULL,
	outcome INTEGER NOT NULL,
	error TEXT NOT NULL,
	attempts BLOB NOT NULL,
	response BLOB,
	request BLOB NOT NULL,
	job_id INTEGER NOT NULL,
	UNIQUE (tenant, task_id)
)`

// RiverStore is the Store over River and a SQLite file; it also runs the
// River client whose worker dispatches due tasks.
type RiverStore struct {
	db      *sql.DB
	client  *river.Client[*sql.Tx]
	runner  Runner
	prepare Prepare
	clock   engine.Clock
	logger  *slog.Logger
}

// Option configures OpenSQLite.
type Option func(*options)

type options struct {
	clock        engine.Clock
	logger       *slog.Logger
	workers      int
	pollInterval time.Duration
}

// WithClock sets the clock of the task times (default the system clock).
// River schedules by the database's and the system's clock whatever it is.
func WithClock(c engine.Clock) Option { return func(o *options) { o.clock = c } }

// WithLogger sets the logger of River and of the worker (default discard).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithWorkers sets how many tasks one broker runs at once (default 100).
func WithWorkers(n int) Option { return func(o *options) { o.workers = n } }

// WithPollInterval sets how often River looks for due jobs (default 100 ms;
// SQLite has no LISTEN/NOTIFY, so River polls).
func WithPollInterval(d time.Duration) Option { return func(o *options) { o.pollInterval = d } }

// OpenSQLite opens (creating when missing) the SQLite file at path, runs
// River's migrations and the broker's, and returns a store whose worker
// dispatches each due task with prepare and runner. Call Start to begin
// dispatching and Close to stop.
func OpenSQLite(ctx context.Context, path string, runner Runner, prepare Prepare, opts ...Option) (*RiverStore, error) {
	o := options{clock: engine.SystemClock{}, logger: slog.New(slog.DiscardHandler), workers: 100, pollInterval: 100 * time.Millisecond}
	for _, opt := range opts {
		opt(&o)
	}
	// WAL and one connection, as River's SQLite driver recommends: SQLite
	// allows one writer, and River works concurrently. busy_timeout covers
	// another process (a second broker by mistake) holding the file.
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)&_pragma=synchronous(FULL)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("tasks: open %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	s, err := newRiverStore(ctx, db, runner, prepare, o)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return s, nil
}

func newRiverStore(ctx context.Context, db *sql.DB, runner Runner, prepare Prepare, o options) (*RiverStore, error) {
	driver := riversqlite.New(db)
	migrator, err := rivermigrate.New(driver, &rivermigrate.Config{Logger: o.logger})
	if err != nil {
		return nil, fmt.Errorf("tasks: river migrator: %w", err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return nil, fmt.Errorf("tasks: river migrations: %w", err)
	}
	if _, err := db.ExecContext(ctx, schema); err != nil {
		return nil, fmt.Errorf("tasks: create table: %w", err)
	}
	s := &RiverStore{db: db, runner: runner, prepare: prepare, clock: o.clock, logger: o.logger}
	workers := river.NewWorkers()
	river.AddWorker(workers, &worker{s: s})
	s.client, err = river.NewClient(driver, &river.Config{
		Logger:            o.logger,
		Workers:           workers,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: o.workers}},
		FetchPollInterval: o.pollInterval,
		FetchCooldown:     min(o.pollInterval, 100*time.Millisecond),
		JobTimeout:        -1, // the policy's total_timeout bounds a dispatch
		MaxAttempts:       25,
	})
	if err != nil {
		return nil, fmt.Errorf("tasks: river client: %w", err)
	}
	return s, nil
}

// Start begins dispatching due tasks; it returns at once.
func (s *RiverStore) Start(ctx context.Context) error { return s.client.Start(ctx) }

// Close stops dispatching (a running dispatch is given until ctx ends,
// then canceled: its task runs again on the next start) and closes the
// database.
func (s *RiverStore) Close(ctx context.Context) error {
	err := s.client.Stop(ctx)
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		err = s.client.StopAndCancel(context.Background())
	}
	return errors.Join(err, s.db.Close())
}

// Create implements Store: the row and its River job are inserted in one
// transaction, so a broker killed at any moment has both or neither.
func (s *RiverStore) Create(ctx context.Context, nt NewTask) (*Task, bool, error) {
	if nt.ID == "" {
		nt.ID = uuid.NewString()
	}
	if nt.IdempotencyKey == "" {
		nt.IdempotencyKey = uuid.NewString()
	}
	now := s.clock.Now()
	next := nt.NotBefore
	if next.IsZero() || next.Before(now) {
		next = now
	}
	if nt.NotBefore.IsZero() {
		nt.NotBefore = now
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, false, fmt.Errorf("tasks: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	res, err := tx.ExecContext(ctx, `INSERT INTO retrybroker_task
		(tenant, task_id, policy, state, not_before, give_up_after, create_time, update_time, next_run_time,
		 wait_reason, idempotency_key, dispatches, outcome, error, attempts, response, request, job_id)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, '', ?, 0, 0, '', '[]', NULL, ?, 0)
		ON CONFLICT (tenant, task_id) DO NOTHING`,
		nt.Tenant, nt.ID, nt.Policy, StateScheduled, nano(nt.NotBefore), nano(nt.GiveUpAfter),
		nano(now), nano(now), nano(next), nt.IdempotencyKey, nt.Request)
	if err != nil {
		return nil, false, fmt.Errorf("tasks: insert: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		_ = tx.Rollback()
		t, err := s.Get(ctx, nt.Tenant, nt.ID)
		return t, false, err
	}
	job, err := s.client.InsertTx(ctx, tx, dispatchArgs{Tenant: nt.Tenant, TaskID: nt.ID}, &river.InsertOpts{ScheduledAt: next})
	if err != nil {
		return nil, false, fmt.Errorf("tasks: schedule: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE retrybroker_task SET job_id = ? WHERE tenant = ? AND task_id = ?`,
		job.Job.ID, nt.Tenant, nt.ID); err != nil {
		return nil, false, fmt.Errorf("tasks: link job: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return nil, false, fmt.Errorf("tasks: commit: %w", err)
	}
	t, err := s.Get(ctx, nt.Tenant, nt.ID)
	return t, true, err
}

const columns = `seq, tenant, task_id, policy, state, not_before, give_up_after, create_time, update_time, next_run_time,
	wait_reason, idempotency_key, dispatches, outcome, error, attempts, response, request, job_id`

type row struct {
	Task
	seq   int64
	jobID int64
}

type scanner interface{ Scan(dest ...any) error }

func scanRow(sc scanner) (*row, error) {
	var r row
	var notBefore, giveUp, created, updated, next int64
	var attempts, response []byte
	if err := sc.Scan(&r.seq, &r.Tenant, &r.ID, &r.Policy, &r.State, &notBefore, &giveUp, &created, &updated, &next,
		&r.WaitReason, &r.IdempotencyKey, &r.Dispatches, &r.Outcome, &r.Error, &attempts, &response, &r.Request, &r.jobID); err != nil {
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
	r, err := scanRow(s.db.QueryRowContext(ctx, `SELECT `+columns+` FROM retrybroker_task WHERE tenant = ? AND task_id = ?`, tenant, id))
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
	rows, err := s.db.QueryContext(ctx, q, args...)
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

// Cancel implements Store: the row becomes CANCELLED (unless final) and
// its River job is cancelled; a dispatch already running finishes its
// engine run, but its result no longer changes the task.
func (s *RiverStore) Cancel(ctx context.Context, tenant, id string) (*Task, error) {
	r, err := s.getRow(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	if r.State.Final() {
		return &r.Task, nil
	}
	if _, err := s.db.ExecContext(ctx, `UPDATE retrybroker_task SET state = ?, update_time = ?
		WHERE tenant = ? AND task_id = ? AND state < ?`, StateCancelled, nano(s.clock.Now()), tenant, id, StateSucceeded); err != nil {
		return nil, fmt.Errorf("tasks: cancel: %w", err)
	}
	if _, err := s.client.JobCancel(ctx, r.jobID); err != nil && !errors.Is(err, river.ErrNotFound) {
		// The row is what counts: a job that still runs finds it cancelled.
		s.logger.WarnContext(ctx, "tasks: cancel river job", "task_id", id, "error", err)
	}
	return s.Get(ctx, tenant, id)
}

// Retry implements Store: in one transaction the row becomes SCHEDULED
// again (due now, give_up_after cleared when passed) and a new River job
// is inserted for it.
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
	res, err := tx.ExecContext(ctx, `UPDATE retrybroker_task SET state = ?, update_time = ?, next_run_time = ?, give_up_after = ?,
		wait_reason = '', error = '' WHERE seq = ? AND state = ?`, StateScheduled, nano(now), nano(now), giveUp, r.seq, StateFailed)
	if err != nil {
		return nil, fmt.Errorf("tasks: retry: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return nil, ErrNotFailed // changed meanwhile
	}
	job, err := s.client.InsertTx(ctx, tx, dispatchArgs{Tenant: tenant, TaskID: id}, &river.InsertOpts{ScheduledAt: now})
	if err != nil {
		return nil, fmt.Errorf("tasks: schedule: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE retrybroker_task SET job_id = ? WHERE seq = ?`, job.Job.ID, r.seq); err != nil {
		return nil, fmt.Errorf("tasks: link job: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("tasks: commit: %w", err)
	}
	return s.Get(ctx, tenant, id)
}

// worker dispatches one due task.
type worker struct {
	river.WorkerDefaults[dispatchArgs]
	s *RiverStore
}

// Work runs the task's engine call once and records what it decided. It
// returns river.JobSnooze for a wait (River counts no attempt), nil for a
// final state, and an error only when the database failed (River retries).
func (w *worker) Work(ctx context.Context, job *river.Job[dispatchArgs]) error {
	s := w.s
	r, err := s.getRow(ctx, job.Args.Tenant, job.Args.TaskID)
	if errors.Is(err, ErrNotFound) || (err == nil && r.State.Final()) {
		return nil // deleted or already final (cancelled): nothing to run
	}
	if err != nil {
		return err
	}
	now := s.clock.Now()
	if !r.GiveUpAfter.IsZero() && !now.Before(r.GiveUpAfter) {
		return s.finish(ctx, r, verdict{state: StateFailed}, nil, errors.New("give_up_after passed before the task succeeded"))
	}
	if ok, err := s.transition(ctx, r, StateRunning, now); err != nil || !ok {
		return err
	}
	call, err := s.prepare(ctx, r.Tenant, r.Request)
	if err != nil {
		return s.finish(ctx, r, verdict{state: StateFailed}, nil, err)
	}
	if h := call.Policy.IdempotencyHeader; h != "" {
		call.Header = call.Header.Clone()
		call.Header.Set(h, r.IdempotencyKey)
	}
	res, runErr := s.runner.Run(ctx, call)
	if ctx.Err() != nil {
		// The broker is stopping: the task runs again at the next start,
		// with no attempt used up.
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
	return s.finish(ctx, r, v, res, runErr)
}

// transition moves r from its stored state to to; false when the row
// changed meanwhile (cancelled).
func (s *RiverStore) transition(ctx context.Context, r *row, to State, now time.Time) (bool, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE retrybroker_task SET state = ?, update_time = ? WHERE seq = ? AND state = ?`,
		to, nano(now), r.seq, r.State)
	if err != nil {
		return false, fmt.Errorf("tasks: mark %s: %w", to, err)
	}
	n, _ := res.RowsAffected()
	if n == 1 {
		r.State = to
	}
	return n == 1, nil
}

// finish records a dispatch's verdict and tells River what to do next.
func (s *RiverStore) finish(ctx context.Context, r *row, v verdict, res *engine.Result, runErr error) error {
	ok, err := s.record(ctx, r, v, res, runErr)
	if err != nil || !ok {
		return err
	}
	if v.state == StateWaiting {
		return river.JobSnooze(v.wait)
	}
	return nil
}

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
	ures, err := s.db.ExecContext(ctx, q, args...)
	if err != nil {
		return false, fmt.Errorf("tasks: record %s: %w", v.state, err)
	}
	n, _ := ures.RowsAffected()
	return n == 1, nil
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
