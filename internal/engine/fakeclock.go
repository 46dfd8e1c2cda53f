package engine

import (
	"context"
	"slices"
	"sync"
	"time"
)

// FakeClock is a Clock for tests, safe for concurrent use, in one of two
// modes.
//
// Made by NewFakeClock, time passes as the code waits: Sleep, and arming a
// timer, advance the clock by the full duration at once and record it
// (Sleeps), and the timer fires at once. A 30 s Retry-After costs no time.
//
// Made by NewManualClock, time passes only by Advance: a timer fires, and a
// Sleep returns, when Advance moves the clock to its time. Timers tells how
// many are armed, so a test can wait until its calls are parked.
type FakeClock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
	manual bool
	armed  []*fakeTimer // manual mode: the armed timers
}

// NewFakeClock returns a FakeClock reading t, whose waits advance it.
func NewFakeClock(t time.Time) *FakeClock { return &FakeClock{now: t} }

// NewManualClock returns a FakeClock reading t that moves only by Advance.
func NewManualClock(t time.Time) *FakeClock { return &FakeClock{now: t, manual: true} }

// Now returns the fake time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Sleep returns ctx.Err() at once when ctx is done. Otherwise it advances
// the clock by d (when positive) and returns nil; on a manual clock it
// waits until Advance reaches now+d, or ctx ends.
func (c *FakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if c.manual {
		if d <= 0 {
			return nil
		}
		t := c.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C():
			return nil
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if d > 0 {
		c.now = c.now.Add(d)
	}
	c.sleeps = append(c.sleeps, d)
	return nil
}

// NewTimer returns a timer on the fake clock (see FakeClock for when it
// fires).
func (c *FakeClock) NewTimer(d time.Duration) Timer {
	t := &fakeTimer{c: c, ch: make(chan time.Time, 1)}
	t.Reset(d)
	return t
}

// Advance moves the clock forward by d, firing the manual timers whose time
// it reaches, earliest first.
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	slices.SortStableFunc(c.armed, func(a, b *fakeTimer) int { return a.when.Compare(b.when) })
	n := 0
	for _, t := range c.armed {
		if t.when.After(c.now) {
			c.armed[n] = t
			n++
			continue
		}
		t.fire(c.now)
	}
	clear(c.armed[n:])
	c.armed = c.armed[:n]
}

// Timers returns how many timers (and Sleeps) of a manual clock are armed.
func (c *FakeClock) Timers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.armed)
}

// Sleeps returns the durations passed to Sleep, and those timers were armed
// for (when positive), in order; a manual clock records none.
func (c *FakeClock) Sleeps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}

// fakeTimer is a FakeClock's Timer; its fields are guarded by c.mu.
type fakeTimer struct {
	c     *FakeClock
	ch    chan time.Time // capacity 1
	when  time.Time
	armed bool
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Reset(d time.Duration) {
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	t.stop()
	if !c.manual {
		if d > 0 {
			c.now = c.now.Add(d)
			c.sleeps = append(c.sleeps, d)
		}
		t.fire(c.now)
		return
	}
	t.when = c.now.Add(d)
	if d <= 0 {
		t.fire(c.now)
		return
	}
	t.armed = true
	c.armed = append(c.armed, t)
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	return t.stop()
}

// stop disarms t and empties its channel; c.mu is held.
func (t *fakeTimer) stop() bool {
	was := t.armed
	if was {
		t.armed = false
		t.c.armed = slices.DeleteFunc(t.c.armed, func(u *fakeTimer) bool { return u == t })
	}
	select {
	case <-t.ch:
	default:
	}
	return was
}

// fire delivers now on t's channel; c.mu is held.
func (t *fakeTimer) fire(now time.Time) {
	t.armed = false
	select {
	case t.ch <- now:
	default:
	}
}
