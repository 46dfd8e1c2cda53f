package store

import (
	"errors"
	"math"
	"time"
)

// ErrUnavailable is wrapped by errors that mean the shared state could not
// be reached in time (Redis down, slow or refusing). The gRPC layer maps it
// to codes.Unavailable.
var ErrUnavailable = errors.New("shared state unavailable")

// ErrClosed is returned by operations on a closed Store.
var ErrClosed = errors.New("store closed")

// DefaultTicketTTL is how long an in-flight registration lives when it is
// never completed (a broker crashed mid-call). Longer calls stop counting as
// in flight after this long.
const DefaultTicketTTL = 2 * time.Minute

// QuotaWindowTolerance is how far apart two reported quota resets may be and
// still name the same provider window: providers round their reset times
// (whole seconds, relative seconds counted from a slightly different
// instant), so resets within this tolerance of the first one seen for a
// window belong to that window. See [Observation.HasQuota].
const QuotaWindowTolerance = time.Second

// DefaultBudgetWindow is the window of a BudgetConfig whose Window is zero.
const DefaultBudgetWindow = 10 * time.Second

// MaxBudgetWindow bounds BudgetConfig.Window (the Redis store keeps one
// bucket per second of the window).
const MaxBudgetWindow = time.Hour

// DefaultBudget returns the standard policy's retry budget: retries up to
// 20% of requests plus 10 retries per second, over a 10 s sliding window.
func DefaultBudget() BudgetConfig {
	return BudgetConfig{Ratio: 0.2, FloorPerSecond: 10, Window: DefaultBudgetWindow}
}

// Unlimited reports whether the budget allows every retry (Ratio and
// FloorPerSecond both zero or negative). Unlimited budgets count nothing.
func (b BudgetConfig) Unlimited() bool {
	return !(b.Ratio > 0) && !(b.FloorPerSecond > 0)
}

// WindowSeconds returns the window as a whole number of one-second buckets:
// Window rounded up, [DefaultBudgetWindow] when Window is zero or negative,
// at least 1 and at most [MaxBudgetWindow] in seconds.
func (b BudgetConfig) WindowSeconds() int64 {
	w := b.Window
	if w <= 0 {
		w = DefaultBudgetWindow
	}
	w = min(w, MaxBudgetWindow)
	n := int64((w + time.Second - 1) / time.Second)
	return max(n, 1)
}

// Allowance returns how many retries the window allows given requests first
// attempts in it: Ratio × requests + FloorPerSecond × WindowSeconds. A retry
// is allowed while retries+1 <= Allowance. Unlimited budgets return +Inf.
func (b BudgetConfig) Allowance(requests int64) float64 {
	if b.Unlimited() {
		return math.Inf(1)
	}
	return b.RatioOrZero()*float64(requests) + b.FloorTotal()
}

// RatioOrZero returns Ratio, or 0 when it is negative or NaN.
func (b BudgetConfig) RatioOrZero() float64 {
	if b.Ratio > 0 {
		return b.Ratio
	}
	return 0
}

// FloorTotal returns FloorPerSecond × WindowSeconds, the number of retries
// the window allows with no requests; 0 when FloorPerSecond is negative.
func (b BudgetConfig) FloorTotal() float64 {
	if b.FloorPerSecond > 0 {
		return b.FloorPerSecond * float64(b.WindowSeconds())
	}
	return 0
}

// Enabled reports whether pacing applies: Rate is positive and finite.
func (p PaceConfig) Enabled() bool {
	return p.Rate > 0 && !math.IsInf(p.Rate, 1)
}

// MaxPaceInterval bounds the GCRA emission interval: a Rate below one
// request per hour paces as one request per hour.
const MaxPaceInterval = time.Hour

// MaxPaceBurst bounds PaceConfig.Burst.
const MaxPaceBurst = 1_000_000

// Interval returns the GCRA emission interval, 1/Rate, rounded up to a
// whole microsecond (at least 1 µs, at most [MaxPaceInterval]); 0 when
// pacing is disabled.
func (p PaceConfig) Interval() time.Duration {
	if !p.Enabled() {
		return 0
	}
	us := math.Ceil(1e6 / p.Rate)
	if us > float64(MaxPaceInterval/time.Microsecond) {
		return MaxPaceInterval
	}
	return time.Duration(max(int64(us), 1)) * time.Microsecond
}

// BurstOrOne returns Burst clamped to [1, MaxPaceBurst].
func (p PaceConfig) BurstOrOne() int {
	return min(max(p.Burst, 1), MaxPaceBurst)
}
