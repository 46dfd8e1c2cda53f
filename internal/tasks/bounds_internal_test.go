package tasks

import (
	"errors"
	"path/filepath"
	"testing"
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
