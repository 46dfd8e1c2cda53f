package tasks

import (
	"errors"
	"sync"
)

// Watching a task: WatchTask would otherwise read its task from the
// database every 100 ms for as long as the watch is open, so a thousand
// watches would be ten thousand reads a second on SQLite's one connection,
// starving dispatch. Instead every change this process makes to a task
// (a dispatch's transitions and results, Cancel, Retry, a callback's
// progress) wakes the watches of that task, which then read it once; a
// change made by another replica (PostgreSQL) is seen by a slow poll the
// caller adds. The watches one store holds are bounded.

// DefaultMaxWatches bounds the watches open at once on one store.
const DefaultMaxWatches = 10_000

// ErrTooManyWatches reports a watch refused because MaxWatches are open.
var ErrTooManyWatches = errors.New("too many task watches open on this broker")

// watchKey names a task.
type watchKey struct{ tenant, id string }

// watchers keeps, per task, the channels of the watches waiting for its
// next change.
type watchers struct {
	mu    sync.Mutex
	max   int
	open  int
	tasks map[watchKey]map[*Watch]struct{}
}

// Watch is one open watch of a task: C receives (without blocking the
// notifier) after each change; Close ends it.
type Watch struct {
	C   <-chan struct{}
	c   chan struct{}
	key watchKey
	w   *watchers
}

// Watch opens a watch of the tenant's task id, or returns
// ErrTooManyWatches. It does not check that the task exists.
func (s *RiverStore) Watch(tenant, id string) (*Watch, error) {
	w := &s.watches
	w.mu.Lock()
	defer w.mu.Unlock()
	limit := w.max
	if limit == 0 {
		limit = DefaultMaxWatches
	}
	if w.open >= limit {
		return nil, ErrTooManyWatches
	}
	if w.tasks == nil {
		w.tasks = map[watchKey]map[*Watch]struct{}{}
	}
	c := make(chan struct{}, 1)
	wt := &Watch{C: c, c: c, key: watchKey{tenant, id}, w: w}
	set := w.tasks[wt.key]
	if set == nil {
		set = map[*Watch]struct{}{}
		w.tasks[wt.key] = set
	}
	set[wt] = struct{}{}
	w.open++
	return wt, nil
}

// Close ends the watch; it may be called more than once.
func (wt *Watch) Close() {
	w := wt.w
	w.mu.Lock()
	defer w.mu.Unlock()
	set := w.tasks[wt.key]
	if _, ok := set[wt]; !ok {
		return
	}
	delete(set, wt)
	if len(set) == 0 {
		delete(w.tasks, wt.key)
	}
	w.open--
}

// changed wakes the watches of the tenant's task id.
func (s *RiverStore) changed(tenant, id string) {
	w := &s.watches
	w.mu.Lock()
	defer w.mu.Unlock()
	for wt := range w.tasks[watchKey{tenant, id}] {
		select {
		case wt.c <- struct{}{}:
		default: // a wake-up is already pending
		}
	}
}

// WithMaxWatches bounds the watches open at once (default
// DefaultMaxWatches).
func WithMaxWatches(n int) Option { return func(o *options) { o.maxWatches = n } }
