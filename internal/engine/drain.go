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
	// attempts are the Execute attempts in flight whose contexts do not
	// derive from hard (see attemptSet), canceled at the drain deadline.
	attempts attemptSet
}

func (d *drainer) init() {
	d.soft, d.begin = context.WithCancel(context.Background())
	d.hard, d.cut = context.WithCancel(context.Background())
	context.AfterFunc(d.hard, d.attempts.cutAll)
}

// attemptSet is the attempts in flight that the drain deadline cancels:
// an intrusive list of links that the calls hold themselves, under one
// mutex held for a few instructions. It does for an Execute attempt what
// context.AfterFunc(hard, cancel) would, without its allocations (the
// hook, the closure that stops it) or an entry in the children map of
// hard, which every call in the process shares.
type attemptSet struct {
	mu   sync.Mutex
	cut  bool // the deadline passed: an attempt added now is canceled at once
	head *attemptLink
}

// attemptLink is one attempt's place in an attemptSet.
type attemptLink struct {
	set        *attemptSet // nil when the attempt is in no set
	prev, next *attemptLink
	cancel     context.CancelFunc
}

// add puts l in the set, to cancel its attempt at the drain deadline (at
// once when it has passed).
func (a *attemptSet) add(l *attemptLink, cancel context.CancelFunc) {
	a.mu.Lock()
	if a.cut {
		a.mu.Unlock()
		cancel()
		return
	}
	l.set, l.cancel, l.prev, l.next = a, cancel, nil, a.head
	if a.head != nil {
		a.head.prev = l
	}
	a.head = l
	a.mu.Unlock()
}

// remove takes l out of its set, if it is in one.
func (l *attemptLink) remove() {
	a := l.set
	if a == nil {
		return
	}
	a.mu.Lock()
	if l.prev != nil {
		l.prev.next = l.next
	} else if a.head == l {
		a.head = l.next
	}
	if l.next != nil {
		l.next.prev = l.prev
	}
	a.mu.Unlock()
	*l = attemptLink{}
}

// cutAll cancels every attempt in the set and every one added later.
func (a *attemptSet) cutAll() {
	a.mu.Lock()
	a.cut = true
	var cancels []context.CancelFunc
	for l := a.head; l != nil; l = l.next {
		cancels = append(cancels, l.cancel)
	}
	a.mu.Unlock()
	for _, cancel := range cancels { // outside the lock: a cancel runs its context's hooks
		cancel()
	}
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
