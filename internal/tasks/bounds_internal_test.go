package tasks

import (
	"errors"
	"path/filepath"
	"testing"
	"time"
)

// TestAdmitCreatedUndoesOnlyTheRefusedTask: in one transaction that
// inserts several tasks (as a batch of creates does), a task past the
// bound is deleted again and refused, and the others commit, counted.
func TestAdmitCreatedUndoesOnlyTheRefusedTask(t *testing.T) {
	s, err := OpenSQLite(t.Context(), filepath.Join(t.TempDir(), "tasks.db"), nil, nil, WithMaxPendingPerTenant(2))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(t.Context()) })
	tx, err := s.db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	var refused []string
	for _, id := range []string{"a", "b", "c"} {
		if _, err := tx.ExecContext(t.Context(), s.sql(`INSERT INTO retrybroker_task
			(tenant, task_id, policy, state, not_before, give_up_after, create_time, update_time, next_run_time,
			 wait_reason, idempotency_key, dispatches, outcome, error, attempts, response, request, job_id)
			VALUES ('t', ?, '', 1, 0, 0, 0, 0, 0, '', 'k', 0, 0, '', '[]', NULL, ?, 0)`), id, []byte("12345")); err != nil {
			t.Fatal(err)
		}
		err := s.admitCreated(t.Context(), tx, "t", id, 5)
		var be *BoundError
		switch {
		case errors.As(err, &be):
			refused = append(refused, id)
		case err != nil:
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if len(refused) != 1 || refused[0] != "c" {
		t.Fatalf("refused %v, want [c]", refused)
	}
	if _, err := s.Get(t.Context(), "t", "c"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the refused task was kept: %v", err)
	}
	for _, id := range []string{"a", "b"} {
		if _, err := s.Get(t.Context(), "t", id); err != nil {
			t.Fatalf("task %s: %v", id, err)
		}
	}
	if p, b, err := s.Usage(t.Context(), "t"); err != nil || p != 2 || b != 10 {
		t.Fatalf("usage %d pending, %d bytes (%v); want 2 and 10", p, b, err)
	}
}

// TestUsageBackfilledForOlderDatabases: tasks stored before the counters
// existed (a database make run kept) are counted when the store opens;
// a tenant already counted is not counted twice.
func TestUsageBackfilledForOlderDatabases(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	s, err := OpenSQLite(t.Context(), path, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour)
	for _, id := range []string{"a", "b", "c"} {
		if _, _, err := s.Create(t.Context(), NewTask{Tenant: "old", ID: id, NotBefore: later, Request: []byte("1234")}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Cancel(t.Context(), "old", "c"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Create(t.Context(), NewTask{Tenant: "new", ID: "x", NotBefore: later, Request: []byte("12")}); err != nil {
		t.Fatal(err)
	}
	// As a database of the earlier code: no counters for tenant "old".
	if _, err := s.db.ExecContext(t.Context(), `DELETE FROM retrybroker_tenant_usage WHERE tenant = 'old'`); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	s, err = OpenSQLite(t.Context(), path, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(t.Context()) })
	for _, c := range []struct {
		tenant        string
		pending, size int64
	}{{"old", 2, 12}, {"new", 1, 2}} {
		if p, b, err := s.Usage(t.Context(), c.tenant); err != nil || p != c.pending || b != c.size {
			t.Errorf("tenant %s: %d pending, %d bytes (%v); want %d and %d", c.tenant, p, b, err, c.pending, c.size)
		}
	}
}
