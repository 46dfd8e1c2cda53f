package tasks

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
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

type batchKey struct{}

// within fails the test unless cond holds within 10 s; what names it.
func within(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s: not %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// queued waits until n requests wait in b's queue.
func queued[T any](t *testing.T, b *batcher[T], n int) {
	t.Helper()
	within(t, fmt.Sprintf("%d requests queued", n), func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return len(b.pending) == n
	})
}

// returned fails the test unless ch gives a nil error within 10 s.
func returned(t *testing.T, ch <-chan error, msg string) {
	t.Helper()
	select {
	case err := <-ch:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal(msg)
	}
}

// TestBatcherCallerRunsOnlyItsBatch: the request that starts a batch
// returns when its own batch has run, though others queued meanwhile and
// their batch still runs (under steady load the queue never empties, and
// a caller that ran batches until it did was held past its deadline);
// the others' batch runs without it, with the values of its first
// request's context, and every request is run once, in order.
func TestBatcherCallerRunsOnlyItsBatch(t *testing.T) {
	var b batcher[int]
	release := []chan struct{}{make(chan struct{}), make(chan struct{})}
	var mu sync.Mutex
	var batches [][]int
	var values []any
	run := func(ctx context.Context, reqs []int) {
		mu.Lock()
		k := len(batches)
		batches = append(batches, slices.Clone(reqs))
		values = append(values, ctx.Value(batchKey{}))
		mu.Unlock()
		if k < len(release) {
			<-release[k]
		}
	}
	ctxOf := func(i int) context.Context { return context.WithValue(context.Background(), batchKey{}, i) }

	first := make(chan error, 1)
	go func() { first <- b.do(ctxOf(0), 0, 2, time.Minute, run) }()
	within(t, "the first batch running", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(batches) == 1
	})
	others := make(chan error, 3)
	for i := 1; i <= 3; i++ {
		go func() { others <- b.do(ctxOf(i), i, 2, time.Minute, run) }()
		queued(t, &b, i)
	}
	close(release[0]) // the first batch ends; the second blocks in run
	returned(t, first, "the first request is still held by the batches queued after it")
	close(release[1])
	for range 3 {
		returned(t, others, "a queued request never ran")
	}
	b.wait()
	mu.Lock()
	defer mu.Unlock()
	if want := [][]int{{0}, {1, 2}, {3}}; !slices.EqualFunc(batches, want, slices.Equal[[]int]) {
		t.Fatalf("batches %v, want %v", batches, want)
	}
	if want := []any{0, 1, 3}; !slices.Equal(values, want) {
		t.Fatalf("batch contexts carried %v, want %v", values, want)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.running || len(b.pending) != 0 {
		t.Fatalf("after wait: running %v, %d pending", b.running, len(b.pending))
	}
}

// TestBatcherSteadyLoad: 16 callers submit back to back for a while, as a
// CreateTask load does; every call returns within a few batches' time, not
// when the load ends, and the batcher is idle after.
func TestBatcherSteadyLoad(t *testing.T) {
	var b batcher[int]
	const batchTime = 2 * time.Millisecond
	run := func(context.Context, []int) { time.Sleep(batchTime) }
	stop := time.Now().Add(time.Second)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var worst time.Duration
	for c := range 16 {
		wg.Go(func() {
			for time.Now().Before(stop) {
				t0 := time.Now()
				if err := b.do(context.Background(), c, 4, time.Minute, run); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				worst = max(worst, time.Since(t0))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	b.wait()
	// 16 callers, 4 per batch: a call waits for at most the batch running
	// and four more; allow a wide margin for a loaded machine, far below
	// the load's second.
	if worst > 300*time.Millisecond {
		t.Fatalf("slowest call took %v under steady load (a batch takes %v)", worst, batchTime)
	}
}
