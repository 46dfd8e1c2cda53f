package tasks_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/retrybroker/retrybroker/internal/tasks"
	"github.com/retrybroker/retrybroker/internal/tasks/pgtest"
)

// backend is a database the store tests run on.
type backend struct {
	name string
	// place returns a fresh place for a store: a file path, a database URL.
	place func(tb testing.TB) string
	// open is OpenSQLite or OpenPostgres.
	open func(ctx context.Context, place string, r tasks.Runner, p tasks.Prepare, opts ...tasks.Option) (*tasks.RiverStore, error)
}

// pg is the package's one postgres, with a fresh database per test.
var pg pgtest.Shared

var backends = []backend{
	{"sqlite", func(tb testing.TB) string { return filepath.Join(tb.TempDir(), "tasks.db") }, tasks.OpenSQLite},
	{"postgres", func(tb testing.TB) string { return pg.Get(tb).NewDatabase(tb) }, tasks.OpenPostgres},
}

func TestMain(m *testing.M) {
	code := m.Run()
	if err := pg.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

// eachBackend runs test on every backend, as a subtest named after it.
func eachBackend(t *testing.T, test func(t *testing.T, b backend)) {
	t.Helper()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { test(t, b) })
	}
}
