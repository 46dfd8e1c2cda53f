package engine

import (
	"context"
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/internal/store"
)

// TestHeadAfterAnotherCallsQuestion: a call that arrived earlier can take
// the head of a gate's queue while a later call, the head until then, is
// asking the store (it asked the store directly, was held, and takes its
// place by arrival). The new head cannot ask while the other asks; when
// that question ends, whether the asking call keeps waiting (hold) or
// leaves without waiting (leave with the gate's time), the new head must
// be woken to ask at the gate's time. Before the fix it was not: it and
// every call behind it waited to their deadlines and ended with the gate
// "closed" while the gate was open (seen in a full benchmark run: the 33
// calls of one replica held 11.75 s, to their deadlines, in the rolling
// restart row).
func TestHeadAfterAnotherCallsQuestion(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(g *gateQueues, gate store.GateKey, asking *waiter, until time.Time)
		// stays: the asking call is still in the queue after its question.
		stays bool
	}{
		{"the asking call is held", func(g *gateQueues, gate store.GateKey, asking *waiter, until time.Time) {
			g.hold(gate, asking, step{kind: stepSleep, until: until, cause: causeHeld}, time.Now())
		}, true},
		{"the asking call leaves without waiting", func(g *gateQueues, gate store.GateKey, asking *waiter, until time.Time) {
			g.leave(asking, false, until, causeHeld, time.Now())
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var g gateQueues
			clock := SystemClock{}
			gate := store.GateKey{Tenant: "t", Scope: "api.example.test"}
			now := time.Now()
			later := &waiter{seq: 2, deadline: now.Add(time.Minute), maxDelay: time.Minute}
			g.hold(gate, later, step{kind: stepSleep, until: now.Add(-time.Millisecond), cause: causeHeld}, now)
			if why := g.await(context.Background(), nil, clock, later); why != wokeTurn {
				t.Fatalf("the only call in the queue, past the gate's time: woke %d, want its turn", why)
			}
			// While it asks, an earlier call is held and takes the head.
			earlier := &waiter{seq: 1, deadline: time.Now().Add(3 * time.Second), maxDelay: time.Minute}
			g.hold(gate, earlier, step{kind: stepSleep, until: time.Now().Add(10 * time.Millisecond), cause: causeHeld}, time.Now())
			woken := make(chan woke, 1)
			go func() { woken <- g.await(context.Background(), nil, clock, earlier) }()
			time.Sleep(20 * time.Millisecond) // it waits: another call is asking
			select {
			case why := <-woken:
				t.Fatalf("the head woke (%d) while another call asked the store", why)
			default:
			}
			tc.end(&g, gate, later, time.Now().Add(10*time.Millisecond))
			// Its turn comes at the gate's time (10 ms); a lost wake-up
			// keeps it to its deadline (3 s), where it expires.
			if why := <-woken; why != wokeTurn {
				t.Fatalf("the head woke %d after the other call's question ended, want its turn (%d) at the gate's time", why, wokeTurn)
			}
			g.leave(earlier, true, time.Time{}, "", time.Now())
			if tc.stays {
				g.leave(later, false, time.Time{}, "", time.Now())
			}
			if g.n.Load() != 0 {
				t.Fatalf("%d queues left after every call left", g.n.Load())
			}
		})
	}
}
