package main

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/tasks"
)

// taskFlags are the task storage's secrets, bounds and retention flags.
type taskFlags struct {
	keyFile                    string
	maxPending, maxBytes       int64
	retention, failedRetention time.Duration
	maxResponseBody            int64
}

func addTaskFlags(fs *flag.FlagSet) *taskFlags {
	f := &taskFlags{}
	fs.StringVar(&f.keyFile, "tasks-key-file", "", "file of keys (one \"ID:BASE64\" of 32 bytes a line; the first encrypts, all decrypt) that encrypt sensitive header values of stored tasks (AES-256-GCM); without it a task carrying Authorization, Cookie or another sensitive header is refused")
	fs.Int64Var(&f.maxPending, "tasks-max-pending-per-tenant", tasks.DefaultMaxPendingPerTenant, "tasks of one tenant that are not final (scheduled, waiting, running); CreateTask and RetryTask answer RESOURCE_EXHAUSTED past it")
	fs.Int64Var(&f.maxBytes, "tasks-max-bytes-per-tenant", tasks.DefaultMaxBytesPerTenant, "bytes of the stored requests of one tenant's kept tasks (final ones until retention deletes them); CreateTask answers RESOURCE_EXHAUSTED past it")
	fs.DurationVar(&f.retention, "tasks-retention", tasks.DefaultRetention, "how long a SUCCEEDED or CANCELLED task is kept after its last update, then deleted")
	fs.DurationVar(&f.failedRetention, "tasks-failed-retention", tasks.DefaultFailedRetention, "how long a FAILED task is kept (and may be retried) after its last update, then deleted")
	fs.Int64Var(&f.maxResponseBody, "tasks-max-response-body", tasks.DefaultMaxResponseBody, "bytes of a task's final response body that are stored (at most the policy's max_response_body); a longer body is stored cut, with body_truncated")
	return f
}

// check refuses values out of their ranges, at start.
func (f *taskFlags) check() error {
	switch {
	case f.maxPending < 1:
		return fmt.Errorf("--tasks-max-pending-per-tenant must be at least 1, got %d", f.maxPending)
	case f.maxBytes < 1:
		return fmt.Errorf("--tasks-max-bytes-per-tenant must be at least 1, got %d", f.maxBytes)
	case f.retention <= 0 || f.failedRetention <= 0:
		return errors.New("--tasks-retention and --tasks-failed-retention must be positive")
	case f.maxResponseBody < 1 || f.maxResponseBody > engine.MaxBodyLimit:
		return fmt.Errorf("--tasks-max-response-body must be between 1 and %d bytes, got %d", engine.MaxBodyLimit, f.maxResponseBody)
	}
	return nil
}

// keyring loads --tasks-key-file (nil without one).
func (f *taskFlags) keyring() (*tasks.Keyring, error) {
	if f.keyFile == "" {
		return nil, nil
	}
	k, err := tasks.LoadKeyFile(f.keyFile)
	if err != nil {
		return nil, fmt.Errorf("--tasks-key-file: %w", err)
	}
	return k, nil
}

// storeOptions are the task store's options of the flags.
func (f *taskFlags) storeOptions() []tasks.Option {
	return []tasks.Option{
		tasks.WithMaxPendingPerTenant(f.maxPending), tasks.WithMaxBytesPerTenant(f.maxBytes),
		tasks.WithRetention(f.retention, f.failedRetention), tasks.WithMaxResponseBody(f.maxResponseBody),
	}
}
