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
	begun    chan struct{}
	deadline time.Time // valid once begun is closed
	hard     context.Context
	cut      context.CancelFunc
}

func (d *drainer) init() {
	d.begun = make(chan struct{})
	d.hard, d.cut = context.WithCancel(context.Background())
}

func (d *drainer) start(clock Clock, deadline time.Time) {
	d.once.Do(func() {
		d.deadline = deadline
		close(d.begun)
		go func() {
			_ = clock.Sleep(context.Background(), deadline.Sub(clock.Now()))
			d.cut()
		}()
	})
}

func (d *drainer) started() bool {
	select {
	case <-d.begun:
		return true
	default:
		return false
	}
}

// fits reports whether a wait ending at end may go on: no drain, or the
// drain's deadline is after end.
func (d *drainer) fits(end time.Time) bool {
	return !d.started() || end.Before(d.deadline)
}
