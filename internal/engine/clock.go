package engine

import (
	"context"
	"time"
)

// Clock tells the time and makes timers. The engine never reads the global
// clock: tests inject a fake.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// Sleep waits for d or until ctx is done, whichever comes first. It
	// returns ctx.Err() when ctx ended the wait, nil otherwise. A d <= 0
	// returns at once (still reporting a done ctx).
	Sleep(ctx context.Context, d time.Duration) error
	// NewTimer returns a timer that delivers the time on its channel once d
	// has passed (at once for d <= 0).
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer made by a Clock. Like a *time.Timer since Go
// 1.23, Reset and Stop leave no stale value on the channel. A Timer is used
// by one goroutine at a time.
type Timer interface {
	// C is the channel the time is delivered on.
	C() <-chan time.Time
	// Reset stops the timer and arms it again to fire after d.
	Reset(d time.Duration)
	// Stop stops the timer; it reports whether the timer was armed.
	Stop() bool
}

// SystemClock is the real clock.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// Sleep waits on a timer and ctx.Done().
func (SystemClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// NewTimer returns a *time.Timer's wrapper.
func (SystemClock) NewTimer(d time.Duration) Timer { return systemTimer{time.NewTimer(d)} }

type systemTimer struct{ t *time.Timer }

func (t systemTimer) C() <-chan time.Time   { return t.t.C }
func (t systemTimer) Reset(d time.Duration) { t.t.Reset(d) }
func (t systemTimer) Stop() bool            { return t.t.Stop() }
