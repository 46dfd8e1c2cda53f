package engine

import (
	"context"
	"sync"
	"time"
)

// drainer carries the runner's shutdown: a channel closed when the drain
// starts, its deadline, and a context canceled at the deadline.
type drainer struct {
	once     sync.Once
	deadline time.Time       // valid once soft is done
	soft     context.Context // canceled when the drain begins
	begin    context.CancelFunc
	hard     context.Context // canceled at the drain deadline
	cut      context.CancelFunc
}

func (d *drainer) init() {
	d.soft, d.begin = context.WithCancel(context.Background())
	d.hard, d.cut = context.WithCancel(context.Background())
}

func (d *drainer) start(clock Clock, deadline time.Time) {
	d.once.Do(func() {
		d.deadline = deadline
		d.begin()
		// A timer, not a goroutine: the drain deadline is operational,
		// measured as a duration on the runner's clock.
		time.AfterFunc(deadline.Sub(clock.Now()), d.cut)
	})
}

// started reports whether the drain has begun: from then on no call starts
// or goes on with a wait (it ends with OUTCOME_SHUTTING_DOWN).
func (d *drainer) started() bool { return d.soft.Err() != nil }
