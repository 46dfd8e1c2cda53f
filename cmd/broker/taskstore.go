package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/retrybroker/retrybroker/internal/tasks"
)

// taskStoreFlags choose and size the task store: --tasks-postgres (with
// its pool) instead of --tasks-sqlite, and the rescue delay of both.
type taskStoreFlags struct {
	// postgres is --tasks-postgres: a connection string that may hold a
	// password, so it is never logged, and errors about it never quote it.
	postgres    string
	maxConns    int
	rescueAfter time.Duration
}

func addTaskStoreFlags(fs *flag.FlagSet) *taskStoreFlags {
	f := &taskStoreFlags{}
	fs.StringVar(&f.postgres, "tasks-postgres", "", "keep deferred calls in this PostgreSQL database (postgres://USER[:PASSWORD]@HOST[:PORT]/DB?sslmode=..., or key=value form), shared by every broker replica given the same URL; exclusive with --tasks-sqlite; never logged. A password is better kept out of the command line: PGPASSWORD or ~/.pgpass (PGPASSFILE) are read too")
	fs.IntVar(&f.maxConns, "tasks-postgres-max-conns", tasks.DefaultMaxConns, "with --tasks-postgres: the most PostgreSQL connections one broker opens (River's fetcher, leader election and maintenance, and the task RPCs and dispatches share them)")
	fs.DurationVar(&f.rescueAfter, "tasks-rescue-after", tasks.DefaultRescueAfter, "how long a task may stay running before River takes it from a broker presumed dead and runs it on another (the engine run of a dispatch is cut at a quarter of it, the dispatch at half, so that a live broker's dispatch is never run twice at once); at least 2s")
	return f
}

// check refuses both stores at once and values out of their ranges, at
// start.
func (f *taskStoreFlags) check(sqlitePath string) error {
	switch {
	case f.postgres != "" && sqlitePath != "":
		return errors.New("--tasks-sqlite and --tasks-postgres are exclusive: give one task store (SQLite for one broker, PostgreSQL for several replicas)")
	case f.maxConns < 1:
		return fmt.Errorf("--tasks-postgres-max-conns must be at least 1, got %d", f.maxConns)
	case f.rescueAfter < tasks.MinRescueAfter:
		return fmt.Errorf("--tasks-rescue-after must be at least %s, got %s", tasks.MinRescueAfter, f.rescueAfter)
	}
	return nil
}

// enabled reports whether a task store is configured.
func (f *taskStoreFlags) enabled(sqlitePath string) bool { return sqlitePath != "" || f.postgres != "" }

// open opens the configured store (--tasks-postgres, else --tasks-sqlite
// PATH) with opts; errors name the flag and never the URL's password.
func (f *taskStoreFlags) open(ctx context.Context, sqlitePath string, runner tasks.Runner, prepare tasks.Prepare, opts ...tasks.Option) (*tasks.RiverStore, error) {
	opts = append(opts, tasks.WithRescueAfter(f.rescueAfter))
	if f.postgres != "" {
		st, err := tasks.OpenPostgres(ctx, f.postgres, runner, prepare, append(opts, tasks.WithMaxConns(f.maxConns))...)
		if err != nil {
			return nil, fmt.Errorf("--tasks-postgres: %w", err)
		}
		return st, nil
	}
	st, err := tasks.OpenSQLite(ctx, sqlitePath, runner, prepare, opts...)
	if err != nil {
		return nil, fmt.Errorf("--tasks-sqlite: %w", err)
	}
	return st, nil
}
