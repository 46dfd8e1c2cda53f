package store_test

import (
	"math"
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/internal/store"
)

func TestBudgetConfig(t *testing.T) {
	for _, tc := range []struct {
		name      string
		b         store.BudgetConfig
		unlimited bool
		window    int64
		allow10   float64 // Allowance(10)
	}{
		{"zero is unlimited", store.BudgetConfig{}, true, 10, math.Inf(1)},
		{"negative is unlimited", store.BudgetConfig{Ratio: -1, FloorPerSecond: -1}, true, 10, math.Inf(1)},
		{"NaN ratio is unlimited", store.BudgetConfig{Ratio: math.NaN()}, true, 10, math.Inf(1)},
		{"default", store.DefaultBudget(), false, 10, 0.2*10 + 10*10},
		{"ratio only", store.BudgetConfig{Ratio: 0.5, Window: 3 * time.Second}, false, 3, 5},
		{"floor only", store.BudgetConfig{FloorPerSecond: 2, Window: 3 * time.Second}, false, 3, 6},
		{"window rounds up", store.BudgetConfig{FloorPerSecond: 1, Window: 2500 * time.Millisecond}, false, 3, 3},
		{"tiny window is one second", store.BudgetConfig{FloorPerSecond: 1, Window: time.Nanosecond}, false, 1, 1},
		{"huge window is capped", store.BudgetConfig{FloorPerSecond: 1, Window: 48 * time.Hour}, false, 3600, 3600},
		{"negative floor counts as 0", store.BudgetConfig{Ratio: 1, FloorPerSecond: -5}, false, 10, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.b.Unlimited(); got != tc.unlimited {
				t.Errorf("Unlimited = %v, want %v", got, tc.unlimited)
			}
			if got := tc.b.WindowSeconds(); got != tc.window {
				t.Errorf("WindowSeconds = %d, want %d", got, tc.window)
			}
			if got := tc.b.Allowance(10); got != tc.allow10 {
				t.Errorf("Allowance(10) = %v, want %v", got, tc.allow10)
			}
		})
	}
}

func TestPaceConfig(t *testing.T) {
	for _, tc := range []struct {
		p        store.PaceConfig
		interval time.Duration
		burst    int
	}{
		{store.PaceConfig{}, 0, 1},
		{store.PaceConfig{Rate: -1, Burst: -3}, 0, 1},
		{store.PaceConfig{Rate: math.NaN()}, 0, 1},
		{store.PaceConfig{Rate: math.Inf(1)}, 0, 1},
		{store.PaceConfig{Rate: 10, Burst: 5}, 100 * time.Millisecond, 5},
		{store.PaceConfig{Rate: 3}, 333334 * time.Microsecond, 1}, // rounded up
		{store.PaceConfig{Rate: 1e9}, time.Microsecond, 1},
		{store.PaceConfig{Rate: 1e-9, Burst: 1 << 30}, store.MaxPaceInterval, store.MaxPaceBurst},
	} {
		if got := tc.p.Interval(); got != tc.interval {
			t.Errorf("%+v.Interval() = %v, want %v", tc.p, got, tc.interval)
		}
		if got := tc.p.BurstOrOne(); got != tc.burst {
			t.Errorf("%+v.BurstOrOne() = %v, want %v", tc.p, got, tc.burst)
		}
		if got := tc.p.Enabled(); got != (tc.interval > 0) {
			t.Errorf("%+v.Enabled() = %v", tc.p, got)
		}
	}
}
