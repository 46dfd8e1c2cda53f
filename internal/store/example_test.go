package store_test

import (
	"context"
	"fmt"
	"time"

	"github.com/retrybroker/retrybroker/internal/store"
	"github.com/retrybroker/retrybroker/internal/store/memstore"
)

// A broker wires the shared store behind a Fallback and follows its state
// in health checks and metrics. Here the primary is a second memory store;
// a real broker passes redisstore.New(ctx, url).
func ExampleNewFallback() {
	primary := memstore.New() // redisstore.New(ctx, "redis://redis:6379/0")
	st := store.NewFallback(primary, memstore.New(), store.WithPrimaryTimeout(250*time.Millisecond))
	defer st.Close()
	st.OnStateChange(func(degraded bool) {
		// health.SetServingStatus(...); degradedGauge.Set(...)
		fmt.Println("degraded:", degraded)
	})

	ctx := context.Background()
	now := time.Unix(1_750_000_000, 0)
	gate := store.GateKey{Tenant: "acme", Scope: "github"}
	adm, _ := st.Admit(ctx, store.AdmitRequest{Gate: gate, FirstAttempt: true, Budget: store.DefaultBudget(), Now: now})
	fmt.Println("admitted:", adm.Admitted())

	// The response said: 0 calls left until the reset in a minute.
	res, _ := st.Complete(ctx, store.CompleteRequest{
		Gate: gate, Ticket: adm.Ticket, Now: now,
		Obs: store.Observation{HasQuota: true, Remaining: 0, Reset: now.Add(time.Minute)},
	})
	fmt.Println("gate closed for:", res.GateClosedUntil.Sub(now))
	fmt.Println("degraded now:", st.Degraded())
	// Output:
	// admitted: true
	// gate closed for: 1m0s
	// degraded now: false
}
