package tasks

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/store/memstore"
)

// openMoves opens a SQLite store that is not started (River dispatches
// nothing) with n scheduled tasks, t0 ... t(n-1).
func openMoves(t *testing.T, n int) *RiverStore {
	t.Helper()
	noPrepare := func(context.Context, string, string, []byte) (*engine.Call, error) {
		return nil, errors.New("not used")
	}
	s, err := OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "tasks.db"), engine.NewRunner(memstore.New()), noPrepare)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Close(ctx)
	})
	for i := range n {
		if _, _, err := s.Create(context.Background(), NewTask{Tenant: "a", ID: fmt.Sprintf("t%d", i), Request: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func mustRow(t *testing.T, s *RiverStore, id string) *row {
	t.Helper()
	r, err := s.getRow(context.Background(), "a", id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestMoveBatch: one batch moves each row whose stored state is the one
// its move expects, and only those: a row cancelled meanwhile and a move
// from a state the row is not in are reported as not moved, and their rows
// keep their state; moves of two (from, to) pairs share the batch.
func TestMoveBatch(t *testing.T) {
	s := openMoves(t, 5)
	ctx := context.Background()
	if _, err := s.Cancel(ctx, "a", "t3"); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	// t4 waits, as a dispatch that met a closed gate leaves it.
	if _, err := s.db.ExecContext(ctx, s.sql(`UPDATE retrybroker_task SET state = ? WHERE seq = ?`), StateWaiting, mustRow(t, s, "t4").seq); err != nil {
		t.Fatal(err)
	}
	batch := []*transitionReq{
		{seq: mustRow(t, s, "t0").seq, from: StateScheduled, to: StateRunning, now: now},
		{seq: mustRow(t, s, "t1").seq, from: StateScheduled, to: StateRunning, now: now.Add(time.Millisecond)},
		{seq: mustRow(t, s, "t2").seq, from: StateWaiting, to: StateRunning, now: now},   // it is scheduled
		{seq: mustRow(t, s, "t3").seq, from: StateScheduled, to: StateRunning, now: now}, // cancelled
		{seq: mustRow(t, s, "t4").seq, from: StateWaiting, to: StateRunning, now: now},
	}
	s.moveBatch(ctx, batch)
	want := []struct {
		moved bool
		state State
	}{{true, StateRunning}, {true, StateRunning}, {false, StateScheduled}, {false, StateCancelled}, {true, StateRunning}}
	for i, q := range batch {
		id := fmt.Sprintf("t%d", i)
		if q.err != nil {
			t.Fatalf("%s: %v", id, q.err)
		}
		if got := mustRow(t, s, id).State; q.moved != want[i].moved || got != want[i].state {
			t.Errorf("%s: moved %v, stored %s; want moved %v, stored %s", id, q.moved, got, want[i].moved, want[i].state)
		}
	}
}

// TestTransitionsConcurrent: dispatches moving their tasks at once (the
// batcher groups them) each learn that their own row moved, and a second
// move from the old state finds none.
func TestTransitionsConcurrent(t *testing.T) {
	const n = 64
	s := openMoves(t, n)
	rows := make([]*row, n)
	for i := range rows {
		rows[i] = mustRow(t, s, fmt.Sprintf("t%d", i))
	}
	var wg sync.WaitGroup
	moved := make([]bool, n)
	errs := make([]error, n)
	for i, r := range rows {
		wg.Go(func() { moved[i], errs[i] = s.transition(context.Background(), r, StateRunning, time.Now()) })
	}
	wg.Wait()
	for i := range rows {
		if errs[i] != nil || !moved[i] || rows[i].State != StateRunning {
			t.Fatalf("t%d: moved %v (%v), state %s", i, moved[i], errs[i], rows[i].State)
		}
		if got := mustRow(t, s, fmt.Sprintf("t%d", i)).State; got != StateRunning {
			t.Fatalf("t%d stored %s", i, got)
		}
	}
	stale := *rows[0]
	stale.State = StateScheduled
	if ok, err := s.transition(context.Background(), &stale, StateRunning, time.Now()); ok || err != nil {
		t.Fatalf("a move from a state the row left: moved %v, %v", ok, err)
	}
}
