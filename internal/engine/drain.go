package engine

import (
	"container/heap"
	"context"
	"math"
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
	// attempts are the attempts in flight (attemptSet): each canceled at
	// its deadline, and all at the drain deadline.
	attempts attemptSet
}

func (d *drainer) init() {
	d.soft, d.begin = context.WithCancel(context.Background())
	d.hard, d.cut = context.WithCancel(context.Background())
	context.AfterFunc(d.hard, d.attempts.cutAll)
}

// attemptSet is the attempts in flight (Execute's and the streams'): it
// cancels each at its own deadline, with context.DeadlineExceeded as the
// cause, and all of them at the drain deadline. One timer serves the whole
// set, armed at its earliest deadline, instead of a runtime timer per
// attempt (context.WithTimeout): an attempt then costs no timer to make,
// add to the runtime's heap, check and stop, and no wake-up of the network
// poller to reschedule it (two allocations fewer per Execute call, six per
// stream; issue 22). The links are held by the attempts
// themselves, in a heap ordered by deadline under one mutex held for a few
// instructions; with one attempt timeout per tenant the deadlines come in
// order, and the timer, armed at the earliest, fires once per attempt
// timeout rather than once per attempt (when it fires for an attempt that
// has ended, it rearms at the earliest left).
type attemptSet struct {
	mu    sync.Mutex
	cut   bool // the drain deadline passed: an attempt added now is canceled at once
	links linkHeap
	timer *time.Timer // calls expire at armed
	armed int64       // when timer fires (see monoTime); 0 when it does not
}

// attemptLink is one attempt's place in an attemptSet.
type attemptLink struct {
	set    *attemptSet // nil when the attempt is in no set; only its owner writes it
	i      int         // index in set.links; -1 when it left them (expired)
	when   int64       // the deadline (monoTime); noDeadline for none
	cancel context.CancelCauseFunc
}

// noDeadline is the when of a stream's attempt past its head (headed),
// which only the drain deadline ends.
const noDeadline = math.MaxInt64

// monoEpoch is the origin of monoTime.
var monoEpoch = time.Now()

// monoTime is t on the set's clock: nanoseconds since monoEpoch, by the
// monotonic clock when t carries a reading of it.
func monoTime(t time.Time) int64 { return int64(t.Sub(monoEpoch)) }

// add puts l in the set, to cancel its attempt at deadline (with
// context.DeadlineExceeded) and at the drain deadline (with
// context.Canceled); now is the current time. An attempt whose deadline
// or the drain's has passed is canceled at once.
func (a *attemptSet) add(l *attemptLink, cancel context.CancelCauseFunc, deadline, now time.Time) {
	when, t := monoTime(deadline), monoTime(now)
	a.mu.Lock()
	if a.cut || when <= t {
		cause := context.DeadlineExceeded
		if a.cut {
			cause = context.Canceled
		}
		a.mu.Unlock()
		cancel(cause)
		return
	}
	l.set, l.when, l.cancel = a, when, cancel
	heap.Push(&a.links, l)
	if a.armed == 0 || when < a.armed {
		a.arm(when, t)
	}
	a.mu.Unlock()
}

// arm sets the timer to fire at when (now is the current time); a.mu is
// held.
func (a *attemptSet) arm(when, now int64) {
	a.armed = when
	d := time.Duration(when - now)
	if a.timer == nil {
		a.timer = time.AfterFunc(d, a.expire)
		return
	}
	a.timer.Reset(d)
}

// expire cancels the attempts whose deadline has passed, and rearms the
// timer at the earliest deadline left.
func (a *attemptSet) expire() {
	now := monoTime(time.Now())
	var due []context.CancelCauseFunc
	a.mu.Lock()
	a.armed = 0
	for len(a.links) > 0 && a.links[0].when <= now {
		due = append(due, heap.Pop(&a.links).(*attemptLink).cancel)
	}
	if len(a.links) > 0 && a.links[0].when != noDeadline {
		a.arm(a.links[0].when, now)
	}
	a.mu.Unlock()
	for _, cancel := range due { // outside the lock: a cancel runs its context's hooks
		cancel(context.DeadlineExceeded)
	}
}

// remove takes l out of its set, if it is in one.
func (l *attemptLink) remove() {
	a := l.set
	if a == nil {
		return
	}
	a.mu.Lock()
	if l.i >= 0 {
		heap.Remove(&a.links, l.i)
	}
	a.mu.Unlock()
	*l = attemptLink{}
}

// headed is a stream's head: from then on l's attempt has no deadline
// (the attempt timeouts bound a stream up to its head), and the drain
// deadline cancels it with errStreamShutdown (the body is cut, not the
// attempt).
func (l *attemptLink) headed() {
	a := l.set
	if a == nil {
		return
	}
	a.mu.Lock()
	if l.i >= 0 && l.when != noDeadline {
		l.when = noDeadline
		heap.Fix(&a.links, l.i)
	}
	a.mu.Unlock()
}

// cutAll cancels every attempt in the set and every one added later: with
// context.Canceled, and a stream's past its head (noDeadline) with
// errStreamShutdown.
func (a *attemptSet) cutAll() {
	type cut struct {
		cancel context.CancelCauseFunc
		cause  error
	}
	a.mu.Lock()
	a.cut = true
	cuts := make([]cut, 0, len(a.links))
	for _, l := range a.links {
		c := cut{l.cancel, context.Canceled}
		if l.when == noDeadline {
			c.cause = errStreamShutdown
		}
		cuts = append(cuts, c)
	}
	a.mu.Unlock()
	for _, c := range cuts { // outside the lock: a cancel runs its context's hooks
		c.cancel(c.cause)
	}
}

// linkHeap orders an attemptSet's links by deadline (container/heap),
// keeping each link's index.
type linkHeap []*attemptLink

func (h linkHeap) Len() int           { return len(h) }
func (h linkHeap) Less(i, j int) bool { return h[i].when < h[j].when }
func (h linkHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].i, h[j].i = i, j
}

func (h *linkHeap) Push(x any) {
	l := x.(*attemptLink)
	l.i = len(*h)
	*h = append(*h, l)
}

func (h *linkHeap) Pop() any {
	old := *h
	n := len(old) - 1
	l := old[n]
	old[n] = nil
	l.i = -1
	*h = old[:n]
	return l
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
