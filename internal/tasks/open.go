package tasks

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
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

// schema is the broker's own table, next to River's in the same database,
// in SQLite's dialect; postgresSchema derives PostgreSQL's from it, so a
// column is added here once, as INTEGER, TEXT or BLOB.
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

// RiverStore is the Store over River and a SQLite file or a PostgreSQL
// database; it also runs the River client whose worker dispatches due
// tasks.
type RiverStore struct {
	db *sql.DB
	// postgres says the database is PostgreSQL: sql rebinds placeholders.
	postgres bool
	client   *river.Client[*sql.Tx]
	runner   Runner
	prepare  Prepare
	clock    engine.Clock
	logger   *slog.Logger
}

// Option configures OpenSQLite and OpenPostgres.
type Option func(*options)

type options struct {
	clock        engine.Clock
	logger       *slog.Logger
	workers      int
	pollInterval time.Duration
	rescueAfter  time.Duration
	maxConns     int
}

// DefaultRescueAfter is WithRescueAfter's default: a dispatch's engine
// run is then bounded by 2.5 minutes, above the default total_timeout (2
// minutes).
const DefaultRescueAfter = 10 * time.Minute

// MinRescueAfter is the least WithRescueAfter accepts.
const MinRescueAfter = 2 * time.Second

// DefaultMaxConns is WithMaxConns' default for PostgreSQL.
const DefaultMaxConns = 20

func defaultOptions() options {
	return options{
		clock: engine.SystemClock{}, logger: slog.New(slog.DiscardHandler), workers: 100,
		pollInterval: 100 * time.Millisecond, rescueAfter: DefaultRescueAfter, maxConns: DefaultMaxConns,
	}
}

// WithClock sets the clock of the task times (default the system clock).
// River schedules by the database's and the system's clock whatever it is.
func WithClock(c engine.Clock) Option { return func(o *options) { o.clock = c } }

// WithLogger sets the logger of River and of the worker (default discard).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithWorkers sets how many tasks one broker runs at once (default 100).
func WithWorkers(n int) Option { return func(o *options) { o.workers = n } }

// WithPollInterval sets how often River looks for due jobs (default 100 ms;
// River polls on both databases: the database/sql drivers have no
// LISTEN/NOTIFY).
func WithPollInterval(d time.Duration) Option { return func(o *options) { o.pollInterval = d } }

// WithRescueAfter sets how long a task's River job may stay running before
// River's rescuer takes it from a broker presumed dead and runs it again
// (default DefaultRescueAfter, at least MinRescueAfter). So that a slow
// dispatch on a live broker is never rescued while it runs, its engine run
// is cut at a quarter of d (as if the policy's total_timeout were at most
// d/4) and River's job timeout cancels the whole dispatch at half of d
// (River rescues no job without a timeout); the rest is the margin for
// recording the result and for clock skew between replicas. A task whose
// broker was killed runs again after d, plus up to 30 s (the rescuer's
// interval) and, when the killed broker was River's leader, the leader's
// lease (about 15 s).
func WithRescueAfter(d time.Duration) Option { return func(o *options) { o.rescueAfter = d } }

// WithMaxConns bounds the PostgreSQL connections of one broker (default
// DefaultMaxConns); OpenSQLite always uses one.
func WithMaxConns(n int) Option { return func(o *options) { o.maxConns = n } }

// OpenSQLite opens (creating when missing) the SQLite file at path, runs
// River's migrations and the broker's, and returns a store whose worker
// dispatches each due task with prepare and runner. Call Start to begin
// dispatching and Close to stop.
func OpenSQLite(ctx context.Context, path string, runner Runner, prepare Prepare, opts ...Option) (*RiverStore, error) {
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	if err := o.validate(); err != nil {
		return nil, err
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
	s, err := newRiverStore(ctx, db, riversqlite.New(db), schema, false, runner, prepare, o)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return s, nil
}

func (o options) validate() error {
	if o.rescueAfter < MinRescueAfter {
		return fmt.Errorf("tasks: rescue-after %s is below the minimum %s", o.rescueAfter, MinRescueAfter)
	}
	if o.maxConns < 1 {
		return fmt.Errorf("tasks: max connections %d must be at least 1", o.maxConns)
	}
	return nil
}

func newRiverStore(ctx context.Context, db *sql.DB, driver riverdriver.Driver[*sql.Tx], ddl string, postgres bool, runner Runner, prepare Prepare, o options) (*RiverStore, error) {
	migrator, err := rivermigrate.New(driver, &rivermigrate.Config{Logger: o.logger})
	if err != nil {
		return nil, fmt.Errorf("tasks: river migrator: %w", err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return nil, fmt.Errorf("tasks: river migrations: %w", err)
	}
	if _, err := db.ExecContext(ctx, ddl); err != nil {
		return nil, fmt.Errorf("tasks: create table: %w", err)
	}
	runner = boundedRunner{Runner: runner, max: o.rescueAfter / 4}
	s := &RiverStore{db: db, postgres: postgres, runner: runner, prepare: prepare, clock: o.clock, logger: o.logger}
	workers := river.NewWorkers()
	river.AddWorker(workers, &worker{s: s})
	s.client, err = river.NewClient(driver, &river.Config{
		Logger:            o.logger,
		Workers:           workers,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: o.workers}},
		FetchPollInterval: o.pollInterval,
		FetchCooldown:     min(o.pollInterval, 100*time.Millisecond),
		// A job still running after RescueStuckJobsAfter is rescued: its
		// broker is presumed dead, since boundedRunner ends the engine run
		// at a quarter of it and JobTimeout the whole dispatch at half.
		// River's rescuer ignores every job when JobTimeout is -1 (none):
		// a task whose broker died mid-dispatch would stay RUNNING.
		JobTimeout:           o.rescueAfter / 2,
		RescueStuckJobsAfter: o.rescueAfter,
		MaxAttempts:          25,
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

// sql returns q in the database's placeholder syntax; queries are written
// with ? placeholders, as SQLite takes them.
func (s *RiverStore) sql(q string) string {
	if s.postgres {
		return rebind(q)
	}
	return q
}

// boundedRunner ends every engine run within max, so that River's job
// timeout (twice max) never cuts a run in the middle and its rescuer (four
// times max) never takes the job of a dispatch that still runs on a live
// broker. The engine reads the deadline as a shorter total_timeout.
type boundedRunner struct {
	Runner
	max time.Duration
}

func (b boundedRunner) Run(ctx context.Context, c *engine.Call) (*engine.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, b.max)
	defer cancel()
	return b.Runner.Run(ctx, c)
}
