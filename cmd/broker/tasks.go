package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/metrics"
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

// openTasks opens --tasks-sqlite PATH or --tasks-postgres URL (sf;
// nothing when neither is given) with the bounds and retention of tf,
// loads tf's key file into ts (a bad one is an error; one without task
// storage too), and starts dispatching its due tasks through runner, with
// calls built by svc; the returned stop closes it within timeout (a
// dispatch still running then is cut, and its task runs again at the next
// start).
func openTasks(ctx context.Context, path string, tf *taskFlags, sf *taskStoreFlags, runner *engine.Runner, svc *server.Service, ts *server.Tasks, logger *slog.Logger, opts ...tasks.Option) (stop func(timeout time.Duration), err error) {
	if !sf.enabled(path) {
		if tf.keyFile != "" {
			return nil, errors.New("--tasks-key-file needs task storage (--tasks-sqlite or --tasks-postgres)")
		}
		return func(time.Duration) {}, nil
	}
	if ts.Keys, err = tf.keyring(); err != nil {
		return nil, err
	}
	st, err := sf.open(ctx, path, runner, svc.PrepareTask,
		append(append(tf.storeOptions(), tasks.WithLogger(slog.New(warnAndAbove{logger.Handler()}).With("component", "tasks"))), opts...)...)
	if err != nil {
		return nil, err
	}
	ts.Store = st
	if err := st.Start(context.WithoutCancel(ctx)); err != nil {
		_ = st.Close(ctx)
		return nil, fmt.Errorf("tasks: start: %w", err)
	}
	if path != "" {
		logger.Info("tasks: on", "sqlite", path)
	} else {
		logger.Info("tasks: on", "store", "postgres") // never the URL: it may hold a password
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

// taskOptions are the task store's tracer, metrics and, with
// --tasks-callback-secret-file, its callbacks (ts.Callbacks is set then).
func taskOptions(o *options, ts *server.Tasks, tracer trace.Tracer, mets *metrics.Metrics, logger *slog.Logger) ([]tasks.Option, error) {
	opts := []tasks.Option{tasks.WithTracer(tracer), tasks.WithObserver(mets)}
	if o.tasksCallbackSecret == "" {
		return opts, nil
	}
	if o.tasksSQLite == "" {
		return nil, errors.New("--tasks-callback-secret-file needs task storage (--tasks-sqlite or --tasks-postgres)")
	}
	sec, err := tasks.NewCallbackSecret(o.tasksCallbackSecret, nil, func(msg string, args ...any) { logger.Warn(msg, args...) })
	if err != nil {
		return nil, fmt.Errorf("--tasks-callback-secret-file: %w", err)
	}
	ts.Callbacks = true
	return append(opts, tasks.WithCallbacks(tasks.Callbacks{Secret: sec, Body: server.TaskJSON})), nil
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
