package tasks

import (
	"context"
	"sync"
	"time"
)

// batcher group-commits requests of one kind: the first request to find no
// batch running runs one for every request waiting, then for those that
// arrived meanwhile, at most limit at a time, until none is left; the
// others wait for theirs. A lone request so runs at once, and requests
// that arrive while a transaction is in progress (on SQLite's one
// connection, while it waits for its fsync) share the next one. Creates
// (createReq) and dispatches' moves to RUNNING (transitionReq) use it.
type batcher[T any] struct {
	mu      sync.Mutex
	pending []batchItem[T]
	running bool
}

// batchItem is one request waiting for its batch.
type batchItem[T any] struct {
	req  T
	done chan struct{}
}

// do queues req and returns once the batch that holds it has run (run sets
// req's result), or with ctx's error when ctx ends first: the batch may
// still run it. The request that runs the batches runs the others' work
// too, so each batch gets a context of its own, with ctx's values and not
// its cancellation, bounded by timeout.
func (b *batcher[T]) do(ctx context.Context, req T, limit int, timeout time.Duration, run func(context.Context, []T)) error {
	it := batchItem[T]{req: req, done: make(chan struct{})}
	b.mu.Lock()
	b.pending = append(b.pending, it)
	if b.running {
		b.mu.Unlock()
		select {
		case <-it.done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	b.running = true
	reqs := make([]T, 0, min(len(b.pending), limit))
	for len(b.pending) > 0 {
		batch := b.pending[:min(len(b.pending), limit)]
		b.pending = b.pending[len(batch):]
		b.mu.Unlock()
		reqs = reqs[:0]
		for _, q := range batch {
			reqs = append(reqs, q.req)
		}
		bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		run(bctx, reqs)
		cancel()
		for _, q := range batch {
			close(q.done)
		}
		b.mu.Lock()
	}
	b.running = false
	b.mu.Unlock()
	return nil
}
