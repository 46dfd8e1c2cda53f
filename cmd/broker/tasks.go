package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/server"
	"github.com/retrybroker/retrybroker/internal/tasks"
	"github.com/retrybroker/retrybroker/internal/tenant"
)

// taskTenants finds a tenant by id for dispatching a stored task: the
// configuration's tenant as it is now, or the dev tenant.
func taskTenants(ids identities) func(string) (*tenant.Tenant, bool) {
	return func(id string) (*tenant.Tenant, bool) {
		if ids.holder != nil {
			return ids.holder.Directory().Tenant(id)
		}
		if ids.dev != nil && ids.dev.ID == id {
			return ids.dev, true
		}
		return nil, false
	}
}

// taskFlags are the task storage flags besides --tasks-sqlite.
type taskFlags struct {
	// postgres is --tasks-postgres: a connection string that may hold a
	// password, so it is never logged, and errors about it never quote it.
	postgres    string
	maxConns    int
	rescueAfter time.Duration
}

func addTaskFlags(fs *flag.FlagSet, f *taskFlags) {
	fs.StringVar(&f.postgres, "tasks-postgres", "", "keep deferred calls in this PostgreSQL database (postgres://USER[:PASSWORD]@HOST[:PORT]/DB?sslmode=..., or key=value form), shared by every broker replica given the same URL; exclusive with --tasks-sqlite; never logged. A password is better kept out of the command line: PGPASSWORD or ~/.pgpass (PGPASSFILE) are read too")
	fs.IntVar(&f.maxConns, "tasks-postgres-max-conns", tasks.DefaultMaxConns, "with --tasks-postgres: the most PostgreSQL connections one broker opens (River's fetcher, leader election and maintenance, and the task RPCs and dispatches share them)")
	fs.DurationVar(&f.rescueAfter, "tasks-rescue-after", tasks.DefaultRescueAfter, "how long a task may stay running before River takes it from a broker presumed dead and runs it on another (the engine run of a dispatch is cut at a quarter of it, the dispatch at half, so that a live broker's dispatch is never run twice at once); at least 2s")
}

func (f taskFlags) validate(sqlitePath string) error {
	if f.postgres != "" && sqlitePath != "" {
		return errors.New("--tasks-sqlite and --tasks-postgres are exclusive: give one task store (SQLite for one broker, PostgreSQL for several replicas)")
	}
	if f.maxConns < 1 {
		return fmt.Errorf("--tasks-postgres-max-conns must be at least 1, got %d", f.maxConns)
	}
	if f.rescueAfter < tasks.MinRescueAfter {
		return fmt.Errorf("--tasks-rescue-after must be at least %s, got %s", tasks.MinRescueAfter, f.rescueAfter)
	}
	return nil
}

// openTasks opens --tasks-sqlite PATH or --tasks-postgres URL (nothing
// when both are empty) and starts dispatching its due tasks through
// runner, with calls built by svc; the returned stop closes it within
// timeout (a dispatch still running then is cut, and its task runs again
// at the next start).
func openTasks(ctx context.Context, path string, f taskFlags, runner *engine.Runner, svc *server.Service, ts *server.Tasks, logger *slog.Logger) (stop func(timeout time.Duration), err error) {
	if path == "" && f.postgres == "" {
		return func(time.Duration) {}, nil
	}
	opts := []tasks.Option{
		tasks.WithLogger(slog.New(warnAndAbove{logger.Handler()}).With("component", "tasks")),
		tasks.WithRescueAfter(f.rescueAfter),
	}
	flagName := "--tasks-sqlite"
	var st *tasks.RiverStore
	if f.postgres != "" {
		flagName = "--tasks-postgres"
		st, err = tasks.OpenPostgres(ctx, f.postgres, runner, svc.PrepareTask, append(opts, tasks.WithMaxConns(f.maxConns))...)
	} else {
		st, err = tasks.OpenSQLite(ctx, path, runner, svc.PrepareTask, opts...)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flagName, err)
	}
	ts.Store = st
	if err := st.Start(context.WithoutCancel(ctx)); err != nil {
		_ = st.Close(ctx)
		return nil, fmt.Errorf("%s: start: %w", flagName, err)
	}
	var once sync.Once
	return func(timeout time.Duration) {
		once.Do(func() { closeTasks(st, timeout, logger) })
	}, nil
}

func closeTasks(st *tasks.RiverStore, timeout time.Duration, logger *slog.Logger) {
	{
		sctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if err := st.Close(sctx); err != nil {
			logger.Warn("tasks: close", "error", err)
		}
	}
}

// warnAndAbove passes on only warnings and errors: River logs every
// migration and start at info.
type warnAndAbove struct{ slog.Handler }

func (h warnAndAbove) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && h.Handler.Enabled(ctx, l)
}

func (h warnAndAbove) WithAttrs(a []slog.Attr) slog.Handler {
	return warnAndAbove{h.Handler.WithAttrs(a)}
}

func (h warnAndAbove) WithGroup(name string) slog.Handler {
	return warnAndAbove{h.Handler.WithGroup(name)}
}
