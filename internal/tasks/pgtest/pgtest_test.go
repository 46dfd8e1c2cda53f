package pgtest_test

import (
	"context"
	"errors"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/retrybroker/retrybroker/internal/tasks/pgtest"
)

// TestServerStartsAndStopsByPid: a server accepts queries on each fresh
// database, only on loopback, and Close stops its process.
func TestServerStartsAndStopsByPid(t *testing.T) {
	s := pgtest.Start(t)
	seen := map[string]bool{}
	for range 2 {
		u := s.NewDatabase(t)
		if seen[u] {
			t.Fatalf("database %s handed out twice", u)
		}
		seen[u] = true
		c, err := pgx.Connect(t.Context(), u)
		if err != nil {
			t.Fatal(err)
		}
		var listen string
		var tables int
		if err := c.QueryRow(t.Context(), "SELECT current_setting('listen_addresses'), (SELECT count(*) FROM pg_tables WHERE schemaname = 'public')").Scan(&listen, &tables); err != nil {
			t.Fatal(err)
		}
		_ = c.Close(context.Background())
		if listen != "127.0.0.1" || tables != 0 {
			t.Fatalf("listen_addresses %q, %d tables in a fresh database", listen, tables)
		}
	}
	pid := s.Pid()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("postgres pid %d still there after Close: %v", pid, err)
	}
}
