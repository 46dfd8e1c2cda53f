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
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"modernc.org/sqlite" // the pure-Go SQLite driver, the one River's own SQLite tests use

	"github.com/retrybroker/retrybroker/internal/engine"
)

// dispatchArgs is the River job of one task: it names the row, which
// holds everything else.
type dispatchArgs struct {
	Tenant string `json:"tenant"`
	TaskID string `json:"task_id"`
	// Due is when the task was due as the job was inserted (Unix
	// nanoseconds; 0 for older jobs): a run that starts before it is an
	// early dispatch (see worker.Timeout).
	Due int64 `json:"due,omitempty"`
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
	callback_url TEXT NOT NULL DEFAULT '',
	callback_state INTEGER NOT NULL DEFAULT 0,
	callback_attempts INTEGER NOT NULL DEFAULT 0,
	callback_error TEXT NOT NULL DEFAULT '',
	callback_id TEXT NOT NULL DEFAULT '',
	trace_parent TEXT NOT NULL DEFAULT '',
	trace_state TEXT NOT NULL DEFAULT '',
	UNIQUE (tenant, task_id)
)`

// addedColumns are the columns retrybroker_task gained after its first
// version (callbacks, the trace context): a table an older broker made
// (make run keeps its file) gets them at open. Types are INTEGER and TEXT
// with constant defaults, which SQLite's and PostgreSQL's ALTER TABLE
// both take.
var addedColumns = []struct{ name, def string }{
	{"callback_url", "TEXT NOT NULL DEFAULT ''"},
	{"callback_state", "INTEGER NOT NULL DEFAULT 0"},
	{"callback_attempts", "INTEGER NOT NULL DEFAULT 0"},
	{"callback_error", "TEXT NOT NULL DEFAULT ''"},
	{"callback_id", "TEXT NOT NULL DEFAULT ''"},
	{"trace_parent", "TEXT NOT NULL DEFAULT ''"},
	{"trace_state", "TEXT NOT NULL DEFAULT ''"},
}

// addColumns adds the addedColumns db's retrybroker_task lacks (a column
// is there when selecting it succeeds, the one test both databases share).
func addColumns(ctx context.Context, db *sql.DB) error {
	for _, c := range addedColumns {
		rows, err := db.QueryContext(ctx, `SELECT `+c.name+` FROM retrybroker_task WHERE 1 = 0`)
		if err == nil {
			err = rows.Close()
		}
		if err == nil {
			continue
		}
		if _, err := db.ExecContext(ctx, `ALTER TABLE retrybroker_task ADD COLUMN `+c.name+` `+c.def); err != nil {
			return fmt.Errorf("tasks: add column %s: %w", c.name, err)
		}
	}
	return nil
}

// indexes serve the task metrics' periodic reads (Stats): the counts by
// tenant and state (a covering index scan: 15-17 ms for 100,000 tasks in
// SQLite, against 360-400 ms for the table scan, which would hold the one
// connection that long every stats interval), and the oldest due task (an
// index search).
var indexes = []string{
	`CREATE INDEX IF NOT EXISTS retrybroker_task_tenant_state ON retrybroker_task (tenant, state)`,
	`CREATE INDEX IF NOT EXISTS retrybroker_task_due ON retrybroker_task (state, next_run_time)`,
}

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
	creates  batcher[*createReq]
	// moves is the dispatches' moves to RUNNING (transition).
	moves   batcher[*transitionReq]
	watches watchers
	// rescueAfter is WithRescueAfter's d: a dispatch's job timeout.
	rescueAfter time.Duration
	limits
	stopSweep context.CancelFunc
	swept     chan struct{}
	tracer    trace.Tracer
	obs       Observer
	cb        callbacks

	statsEvery time.Duration
	statsStop  chan struct{}
	statsDone  chan struct{}
}

// Option configures OpenSQLite and OpenPostgres.
type Option func(*options)

type options struct {
	clock        engine.Clock
	logger       *slog.Logger
	workers      int
	pollInterval time.Duration
	maxWatches   int
	limits
	tracer      trace.Tracer
	obs         Observer
	cb          callbacks
	statsEvery  time.Duration
	rescueAfter time.Duration
	maxConns    int
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
		pollInterval: 25 * time.Millisecond, rescueAfter: DefaultRescueAfter, maxConns: DefaultMaxConns, limits: defaultLimits,
		tracer: noop.NewTracerProvider().Tracer(""), obs: NopObserver{}, cb: defaultCallbacks(), statsEvery: DefaultStatsInterval,
	}
}

// WithClock sets the clock of the task times (default the system clock).
// River schedules by the database's and the system's clock whatever it is.
func WithClock(c engine.Clock) Option { return func(o *options) { o.clock = c } }

// WithLogger sets the logger of River and of the worker (default discard).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithWorkers sets how many tasks one broker runs at once (default 100).
func WithWorkers(n int) Option { return func(o *options) { o.workers = n } }

// WithPollInterval sets how often River looks for due jobs (default 25 ms;
// River polls on both databases: the database/sql drivers have no
// LISTEN/NOTIFY).
func WithPollInterval(d time.Duration) Option { return func(o *options) { o.pollInterval = d } }

// WithTracer sets the tracer of the task.dispatch span that each dispatch
// runs in (default a no-op tracer); see dispatchSpan.
func WithTracer(t trace.Tracer) Option { return func(o *options) { o.tracer = t } }

// WithObserver sets what is told of dispatches, callbacks and the stored
// tasks (default NopObserver).
func WithObserver(obs Observer) Option { return func(o *options) { o.obs = obs } }

// WithStatsInterval sets how often the counts of stored tasks by tenant
// and state and the age of the oldest due task are read for the
// observer (default DefaultStatsInterval; 0 or less keeps it).
func WithStatsInterval(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.statsEvery = d
		}
	}
}

// DefaultStatsInterval is how often the task counts are read by default.
const DefaultStatsInterval = 15 * time.Second

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
	db := sql.OpenDB(stmtCacheConnector{dsn: dsn, drv: &sqlite.Driver{}}) // see stmtcache.go
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
	if err := addColumns(ctx, db); err != nil {
		return nil, err
	}
	for _, q := range indexes {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return nil, fmt.Errorf("tasks: create index: %w", err)
		}
	}
	runner = boundedRunner{Runner: runner, max: o.rescueAfter / 4}
	s := &RiverStore{
		db: db, postgres: postgres, runner: runner, prepare: prepare, clock: o.clock, logger: o.logger, limits: o.limits, rescueAfter: o.rescueAfter,
		tracer: o.tracer, obs: o.obs, cb: o.cb, statsEvery: o.statsEvery,
	}
	s.watches.max = o.maxWatches
	if err := s.createUsage(ctx); err != nil {
		return nil, err
	}
	riverDone, riverDiscarded := o.riverRetention()
	workers := river.NewWorkers()
	river.AddWorker(workers, &worker{s: s})
	river.AddWorker(workers, &callbackWorker{s: s})
	s.client, err = river.NewClient(driver, &river.Config{
		Logger:            o.logger,
		Workers:           workers,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: o.workers}},
		FetchPollInterval: o.pollInterval,
		FetchCooldown:     min(o.pollInterval, 100*time.Millisecond),
		// Each worker sets its job's timeout (worker.Timeout, a
		// callback's callbackTimeout): River rescues a job still running
		// after both RescueStuckJobsAfter and its timeout, its broker
		// presumed dead. A dispatch's timeout is WithRescueAfter's d, and
		// the dispatch itself ends by d/2 (its engine run by d/4), so a
		// live broker's dispatch is never rescued while it runs. River's
		// rescuer ignores a job whose timeout is negative (none): a task
		// whose broker died mid-dispatch would stay RUNNING. An early
		// dispatch's timeout is 10 s and a callback's 20 s: with
		// RescueStuckJobsAfter at most 30 s, theirs are rescued soon.
		JobTimeout:           -1,
		RescueStuckJobsAfter: min(o.rescueAfter, o.cb.rescueAfter()),
		MaxAttempts:          25,
		// River's job rows live no longer than the tasks they ran.
		CompletedJobRetentionPeriod: riverDone,
		CancelledJobRetentionPeriod: riverDone,
		DiscardedJobRetentionPeriod: riverDiscarded,
	})
	if err != nil {
		return nil, fmt.Errorf("tasks: river client: %w", err)
	}
	return s, nil
}

// Start begins dispatching due tasks, deleting final ones past their
// retention (see Sweep) and reading the task counts for the observer every
// stats interval; it returns at once.
func (s *RiverStore) Start(ctx context.Context) error {
	if err := s.client.Start(ctx); err != nil {
		return err
	}
	if s.stopSweep == nil {
		sctx, cancel := context.WithCancel(ctx)
		s.stopSweep, s.swept = cancel, make(chan struct{})
		go func() { defer close(s.swept); s.sweepLoop(sctx) }()
	}
	if s.statsStop == nil {
		s.statsStop, s.statsDone = make(chan struct{}), make(chan struct{})
		go s.watchStats(context.WithoutCancel(ctx))
	}
	return nil
}

// Close stops dispatching (a running dispatch is given until ctx ends,
// then canceled: its task runs again on the next start), waits for the
// batches of creates and moves that still run, and closes the database.
func (s *RiverStore) Close(ctx context.Context) error {
	if s.stopSweep != nil {
		s.stopSweep()
		<-s.swept
	}
	if s.statsStop != nil {
		close(s.statsStop)
		<-s.statsDone
		s.statsStop = nil
	}
	err := s.client.Stop(ctx)
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		err = s.client.StopAndCancel(context.Background())
	}
	// A batch that runs for requests whose callers have left (the
	// batcher's own goroutine) ends within its timeout.
	s.creates.wait()
	s.moves.wait()
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
