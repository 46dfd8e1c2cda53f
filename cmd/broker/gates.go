package main

import (
	"fmt"
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/retrybroker/retrybroker/internal/store/memstore"
	"github.com/retrybroker/retrybroker/internal/store/redisstore"
)

// gateBound is how the stores bound each tenant's gates: at most maxGates
// (--max-gates-per-tenant), and untracked hears of the new gates a store
// did not track.
type gateBound struct {
	maxGates  int
	untracked func(tenant string)
}

// maxGatesLimit is the largest --max-gates-per-tenant: a trim walks the
// tenant's gates, so the bound also bounds that pass.
const maxGatesLimit = 1_000_000

func (b gateBound) check() error {
	if b.maxGates < 1 || b.maxGates > maxGatesLimit {
		return fmt.Errorf("--max-gates-per-tenant %d: want 1 to %d", b.maxGates, maxGatesLimit)
	}
	return nil
}

func (b gateBound) memory() []memstore.Option {
	return []memstore.Option{memstore.WithMaxGatesPerTenant(b.maxGates), memstore.WithUntracked(b.untracked)}
}

func (b gateBound) redis() []redisstore.Option {
	return []redisstore.Option{redisstore.WithMaxGatesPerTenant(b.maxGates), redisstore.WithUntracked(b.untracked)}
}

// untrackedGates hears of the calls whose new gate a store did not track
// because every gate of the tenant, at the gate bound, holds a promise (a
// closed gate, an open breaker): it counts them in
// retrybroker_gates_untracked_total and logs once per tenant.
type untrackedGates struct {
	count  prometheus.Counter
	logger *slog.Logger
	warned sync.Map // tenant -> struct{}: logged once
}

func newUntrackedGates(reg prometheus.Registerer, logger *slog.Logger) *untrackedGates {
	u := &untrackedGates{
		count: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "retrybroker_gates_untracked_total",
			Help: "Calls whose new gate was not tracked: the tenant was at the gate bound with every gate closed or its breaker open.",
		}),
		logger: logger,
	}
	reg.MustRegister(u.count)
	return u
}

// note is the stores' WithUntracked function. It may run with a store's
// lock held: it only counts, and logs the first time for each tenant.
func (u *untrackedGates) note(tenant string) {
	u.count.Inc()
	if _, seen := u.warned.LoadOrStore(tenant, struct{}{}); !seen {
		u.logger.Warn("gate bound reached with every gate closed: new gates of this tenant go untracked until some reopen (counted in retrybroker_gates_untracked_total; logged once per tenant)",
			"tenant", tenant)
	}
}
