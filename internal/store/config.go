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

// LearningConfig configures learned quotas: for a gate whose provider
// announces no remaining count, the store learns how many calls a window
// admits from the refusals it sees (see the package documentation,
// "Learned quotas"). The zero value disables learning.
type LearningConfig struct {
	// Enabled turns learning on for gates without an announced quota.
	Enabled bool
	// IdleExpiry is how long learned state (the learned quota and its
	// epoch) outlives the last call on its gate. Zero or negative means
	// [DefaultLearningIdleExpiry]; at most [MaxLearningIdleExpiry].
	IdleExpiry time.Duration
	// FirstWindowOff turns off the first-window rule (a scout, then slow
	// start; see the package documentation, "The first window"): a gate
	// the store knows nothing about then admits every call at once.
	FirstWindowOff bool
	// ScoutHold bounds how long the scout of a gate holds the others: a
	// scout without an answer by then frees its slot, and the next call
	// goes as a scout. Zero or negative means [DefaultScoutHold]; at most
	// [MaxScoutHold].
	ScoutHold time.Duration
}

// First-window defaults and bounds.
const (
	// DefaultScoutHold is how long a scout holds its gate's other calls
	// unless LearningConfig.ScoutHold says otherwise.
	DefaultScoutHold = 2 * time.Second
	// MaxScoutHold bounds LearningConfig.ScoutHold.
	MaxScoutHold = time.Minute
	// SlowStartShare is the slow start's growth: after the scout, a gate
	// that announces nothing admits at most 1 + accepted/SlowStartShare
	// calls in flight, so the refusal that ends the first window finds at
	// most about 1/SlowStartShare of the quota in flight.
	SlowStartShare = 5
	// SlowStartMax is where slow start ends: once it would admit that many
	// calls in flight (after about SlowStartShare × SlowStartMax accepted
	// calls without a refusal), the gate admits calls without counting them,
	// as a gate with the first-window rule off does, until a refusal.
	SlowStartMax = 256
)

// FirstWindow reports whether the first-window rule applies.
func (c LearningConfig) FirstWindow() bool { return c.Enabled && !c.FirstWindowOff }

// Hold returns ScoutHold with its default and bound applied.
func (c LearningConfig) Hold() time.Duration {
	if c.ScoutHold <= 0 {
		return DefaultScoutHold
	}
	return min(c.ScoutHold, MaxScoutHold)
}

// SlowStartLimit returns how many calls may be in flight in slow start
// after accepted calls were accepted (0 = slow start has ended: no limit).
func SlowStartLimit(accepted int64) int64 {
	n := 1 + max(accepted, 0)/SlowStartShare
	if n >= SlowStartMax {
		return 0
	}
	return n
}

// Learning defaults and bounds.
const (
	// DefaultLearningIdleExpiry is the idle time after which a gate's
	// learned quota is forgotten.
	DefaultLearningIdleExpiry = time.Hour
	// MaxLearningIdleExpiry bounds LearningConfig.IdleExpiry.
	MaxLearningIdleExpiry = 7 * 24 * time.Hour
)

// DefaultLearning returns the standard policy's learning: on, forgotten
// after an hour without calls.
func DefaultLearning() LearningConfig {
	return LearningConfig{Enabled: true, IdleExpiry: DefaultLearningIdleExpiry}
}

// Expiry returns IdleExpiry with its default and bound applied.
func (c LearningConfig) Expiry() time.Duration {
	if c.IdleExpiry <= 0 {
		return DefaultLearningIdleExpiry
	}
	return min(c.IdleExpiry, MaxLearningIdleExpiry)
}

// BreakerConfig configures a gate's failure breaker: failures that carry no
// hint (5xx without one, retryable transport errors) are counted over a
// sliding Window; when at least MinCalls calls were made in it and the
// failures reach FailureRatio of them, the breaker opens for OpenFor,
// doubling after each failed probe up to MaxOpen. While it is open, no call
// is sent; then a single probe goes, and its success closes the breaker.
// The zero value disables the breaker.
type BreakerConfig struct {
	// Enabled turns the breaker on.
	Enabled bool
	// MinCalls is the least number of calls in the window before the
	// breaker may open. Zero or negative means [DefaultBreakerMinCalls].
	MinCalls int
	// FailureRatio is the share of failed calls, in (0, 1], that opens the
	// breaker. Zero, negative or NaN means [DefaultBreakerFailureRatio].
	FailureRatio float64
	// Window is the sliding window over which calls and failures count, in
	// whole seconds (rounded up). Zero or negative means
	// [DefaultBreakerWindow]; at most [MaxBreakerWindow].
	Window time.Duration
	// OpenFor is how long the breaker stays open the first time. Zero or
	// negative means [DefaultBreakerOpenFor].
	OpenFor time.Duration
	// MaxOpen bounds the doubling open time. Zero or negative means
	// [DefaultBreakerMaxOpen]; below OpenFor counts as OpenFor.
	MaxOpen time.Duration
}

// Breaker defaults and bounds: conservative, so that only a destination
// that clearly fails trips it.
const (
	DefaultBreakerMinCalls     = 20
	DefaultBreakerFailureRatio = 0.5
	DefaultBreakerWindow       = 30 * time.Second
	DefaultBreakerOpenFor      = 5 * time.Second
	DefaultBreakerMaxOpen      = 2 * time.Minute
	// MaxBreakerWindow bounds BreakerConfig.Window.
	MaxBreakerWindow = 10 * time.Minute
)

// DefaultBreaker returns the standard policy's breaker: on, with the
// default thresholds.
func DefaultBreaker() BreakerConfig {
	return BreakerConfig{
		Enabled: true, MinCalls: DefaultBreakerMinCalls, FailureRatio: DefaultBreakerFailureRatio,
		Window: DefaultBreakerWindow, OpenFor: DefaultBreakerOpenFor, MaxOpen: DefaultBreakerMaxOpen,
	}
}

// Normalized returns c with every default and bound applied (Enabled is
// kept as is).
func (c BreakerConfig) Normalized() BreakerConfig {
	if c.MinCalls <= 0 {
		c.MinCalls = DefaultBreakerMinCalls
	}
	if !(c.FailureRatio > 0) {
		c.FailureRatio = DefaultBreakerFailureRatio
	}
	c.FailureRatio = min(c.FailureRatio, 1)
	if c.Window <= 0 {
		c.Window = DefaultBreakerWindow
	}
	c.Window = min(c.Window, MaxBreakerWindow)
	if c.OpenFor <= 0 {
		c.OpenFor = DefaultBreakerOpenFor
	}
	if c.MaxOpen <= 0 {
		c.MaxOpen = DefaultBreakerMaxOpen
	}
	c.MaxOpen = max(c.MaxOpen, c.OpenFor)
	return c
}

// WindowSeconds returns the normalized window in whole seconds (at least 1).
func (c BreakerConfig) WindowSeconds() int64 {
	w := c.Normalized().Window
	return max(int64((w+time.Second-1)/time.Second), 1)
}
