package tasks

import (
	"context"
	"sync"
	"time"
)

// batcher group-commits requests of one kind: the first request to find no
// batch running runs one for every request waiting (itself and those that
// queued while the last batch ran), at most limit at a time; requests that
// arrive while a transaction is in progress (on SQLite's one connection,
// while it waits for its fsync) share the next one. A lone request so runs
// at once, in its caller.
//
// A caller runs only the batch that holds its own request: when requests
// are still waiting after it, a goroutine of the batcher's own runs their
// batches, until none is left. Under steady load the queue never empties,
// and a caller that ran every batch until it did would be held for as long
// as the load lasts (a CreateTask that ran others' creates past its own
// deadline, a dispatch whose send waited for others' moves). Creates
// (createReq) and dispatches' moves to RUNNING (transitionReq) use it.
type batcher[T any] struct {
	mu      sync.Mutex
	pending []batchItem[T]
	running bool
	// idle is signalled (with mu) when running turns false, for wait.
	idle sync.Cond
}

// batchItem is one request waiting for its batch.
type batchItem[T any] struct {
	ctx  context.Context // for its values: the batch's context has them
	req  T
	done chan struct{}
}

// batchRun runs one batch of requests and sets each one's result.
type batchRun[T any] func(context.Context, []T)

// do queues req and returns once the batch that holds it has run (run sets
// req's result), or with ctx's error when ctx ends first: the batch may
// still run it. Each batch gets a context of its own, with the values of
// its first request's context and not its cancellation, bounded by
// timeout, since it runs others' work too.
func (b *batcher[T]) do(ctx context.Context, req T, limit int, timeout time.Duration, run batchRun[T]) error {
	it := batchItem[T]{ctx: ctx, req: req, done: make(chan struct{})}
	b.mu.Lock()
	b.pending = append(b.pending, it)
	if !b.running {
		// The queue was empty (it is whenever no batch runs), so this
		// request is in the first batch.
		b.running = true
		b.runOne(limit, timeout, run)
		if len(b.pending) > 0 {
			go func() {
				b.mu.Lock()
				for len(b.pending) > 0 {
					b.runOne(limit, timeout, run)
				}
				b.stopped()
				b.mu.Unlock()
			}()
		} else {
			b.stopped()
		}
		b.mu.Unlock()
	} else {
		b.mu.Unlock()
	}
	select {
	case <-it.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// runOne runs the next batch of up to limit pending requests. It is called
// with b.mu held, by the one runner (b.running), and returns with it held;
// the lock is released while the batch runs.
func (b *batcher[T]) runOne(limit int, timeout time.Duration, run batchRun[T]) {
	batch := b.pending[:min(len(b.pending), limit)]
	b.pending = b.pending[len(batch):]
	b.mu.Unlock()
	reqs := make([]T, len(batch))
	for i, q := range batch {
		reqs[i] = q.req
	}
	bctx, cancel := context.WithTimeout(context.WithoutCancel(batch[0].ctx), timeout)
	run(bctx, reqs)
	cancel()
	for _, q := range batch {
		close(q.done)
	}
	b.mu.Lock()
}

// stopped records, with b.mu held, that no batch runs any more.
func (b *batcher[T]) stopped() {
	b.running = false
	if b.idle.L != nil {
		b.idle.Broadcast()
	}
}

// wait returns once no batch runs (none queued, none running): the
// store's Close calls it before it closes the database, so that the
// batcher's own goroutine does not outlive the store. Each batch is
// bounded by its timeout.
func (b *batcher[T]) wait() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.idle.L == nil {
		b.idle.L = &b.mu
	}
	for b.running {
		b.idle.Wait()
	}
}
