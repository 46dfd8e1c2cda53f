package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/internal/store"
	"github.com/retrybroker/retrybroker/internal/store/redisstore"
	"github.com/retrybroker/retrybroker/internal/store/storetest"
)

// order is an Order of broker for a call that arrived at arrival, with
// queue its broker's queue at the gate (nil for a call in no queue).
func order(broker string, arrival time.Time, queue ...store.Waiting) store.Order {
	return store.Order{Broker: broker, Arrival: arrival, Queue: queue, QueueLen: len(queue)}
}

// replicas are two stores on one real redis-server: two broker replicas.
func replicas(t *testing.T) (a, b *redisstore.Store) {
	t.Helper()
	a, srv := newStore(t)
	b, err := redisstore.New(context.Background(), srv.URL(), redisstore.WithRedisOptions(patient))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return a, b
}

// orderStores are two replicas and a gate whose quota is known: remaining
// calls until a reset a minute on.
func orderStores(t *testing.T, remaining int64) (a, b *redisstore.Store, g store.GateKey, reset time.Time) {
	t.Helper()
	a, b = replicas(t)
	g = store.GateKey{Tenant: "acme", Scope: "github"}
	reset = storetest.T0.Add(time.Minute)
	if _, err := a.Observe(context.Background(), store.ObserveRequest{Gate: g, Obs: store.Observation{HasQuota: true, Remaining: remaining, Reset: reset}, Now: storetest.T0}); err != nil {
		t.Fatal(err)
	}
	return a, b, g, reset
}

func admitOrdered(t *testing.T, s *redisstore.Store, g store.GateKey, o store.Order, now time.Time) store.Admission {
	t.Helper()
	return admitLearning(t, s, g, store.LearningConfig{}, o, now)
}

// admitLearning is admitOrdered with learning configured as learn.
func admitLearning(t *testing.T, s *redisstore.Store, g store.GateKey, learn store.LearningConfig, o store.Order, now time.Time) store.Admission {
	t.Helper()
	adm, err := s.Admit(context.Background(), store.AdmitRequest{Gate: g, Learning: learn, Order: o, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return adm
}

// TestReplicasKeepOneArrivalOrder: replica A holds three calls that
// arrived first; a call that arrives later at replica B is held while
// any of them waits, though the known quota has room for it, and A's go
// one by one as A's head asks. Once A's queue is empty and a call in
// flight is back, B's call goes. Without the order B's call would take a
// slot of one of A's older calls.
func TestReplicasKeepOneArrivalOrder(t *testing.T) {
	a, b, g, reset := orderStores(t, 3)
	t0 := storetest.T0
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	deadline := t0.Add(30 * time.Second)
	queue := []store.Waiting{{Arrival: at(1), Deadline: deadline}, {Arrival: at(2), Deadline: deadline}, {Arrival: at(3), Deadline: deadline}}
	now := at(10).Add(redisstore.HeldPoll) // A's calls have waited longer than a poll

	first := admitOrdered(t, a, g, order("A", at(1), queue...), now)
	if !first.Admitted() || first.Ticket.ID == "" {
		t.Fatalf("A's head (the oldest call): %+v, want admitted and registered", first)
	}
	for i := 1; i < 3; i++ {
		if adm := admitOrdered(t, b, g, order("B", at(5)), now); !adm.Held || adm.HeldFor != redisstore.OrderPoll {
			t.Fatalf("B's call (arrived after A's %d waiting calls, %d free): %+v, want held for OrderPoll", 3-i, 3-i, adm)
		}
		if adm := admitOrdered(t, a, g, order("A", at(1+i), queue[i:]...), now); !adm.Admitted() {
			t.Fatalf("A's call %d: %+v, want admitted", i+1, adm)
		}
	}
	if adm := admitOrdered(t, b, g, order("B", at(5)), now); !adm.GateClosedUntil.Equal(reset) {
		t.Fatalf("B's call with the quota in flight: %+v, want closed until the reset", adm)
	}
	// A's first call comes back unsent: a slot is free, and nothing older waits.
	if _, err := a.Complete(context.Background(), store.CompleteRequest{Gate: g, Ticket: first.Ticket, Now: now}); err != nil {
		t.Fatal(err)
	}
	if adm := admitOrdered(t, b, g, order("B", at(5)), now); !adm.Admitted() {
		t.Fatalf("B's call once A's queue went: %+v, want admitted", adm)
	}
}

// TestReplicaQueueLapses: another replica's waiting calls stop holding a
// call when their deadline passes, and its whole queue stops holding one
// when the replica does not ask again (it died, or its queue emptied
// without a question) for OrderGrace past the time it said it would.
func TestReplicaQueueLapses(t *testing.T) {
	t0 := storetest.T0
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	for _, c := range []struct {
		name     string
		deadline time.Time // of C's second call
		after    time.Time // when B asks again
	}{
		{"deadline", at(500), at(600)},
		{"replica gone", t0.Add(time.Hour), at(110).Add(redisstore.OrderGrace + time.Millisecond)},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, b, g, _ := orderStores(t, 2)
			queue := []store.Waiting{{Arrival: at(1), Deadline: t0.Add(time.Hour)}, {Arrival: at(2), Deadline: c.deadline}}
			if adm := admitOrdered(t, a, g, order("C", at(1), queue...), at(110)); !adm.Admitted() {
				t.Fatalf("C's head: %+v", adm)
			}
			if adm := admitOrdered(t, b, g, order("B", at(5)), at(110)); !adm.Held {
				t.Fatalf("B's call behind C's waiting call, 1 free: %+v, want held", adm)
			}
			if adm := admitOrdered(t, b, g, order("B", at(5)), c.after); !adm.Admitted() {
				t.Fatalf("B's call at %v: %+v, want admitted", c.after.Sub(t0), adm)
			}
		})
	}
}

// TestOrderOffAdmitsByCounts: an Admit without an order (a store of one
// process's engine, or an older replica) is admitted by the counts alone,
// whatever other replicas' queues hold: here A's two waiting calls, older
// than a poll, which would hold a call with an order (checked last).
func TestOrderOffAdmitsByCounts(t *testing.T) {
	a, b, g, _ := orderStores(t, 3)
	t0 := storetest.T0
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	deadline := t0.Add(time.Hour)
	now := at(10).Add(redisstore.HeldPoll)
	if adm := admitOrdered(t, a, g, order("A", at(1), store.Waiting{Arrival: at(1), Deadline: deadline}, store.Waiting{Arrival: at(2), Deadline: deadline}, store.Waiting{Arrival: at(3), Deadline: deadline}), now); !adm.Admitted() {
		t.Fatalf("A's head: %+v", adm)
	}
	if adm := admitOrdered(t, b, g, store.Order{}, now); !adm.Admitted() {
		t.Fatalf("a call without an order: %+v, want admitted by the counts", adm)
	}
	if adm := admitOrdered(t, b, g, order("B", at(5)), now); !adm.Held {
		t.Fatalf("the same call with an order: %+v, want held behind A's older calls", adm)
	}
}

// TestFirstWindowKeepsTheOrder: on a gate nothing is known of, the
// oldest waiting call goes as the scout; after its answer (nothing
// announced: slow start, one call in flight), a call arriving later at
// another replica is held while the older call of the first waits, though
// slow start has room for one, and the older call goes.
func TestFirstWindowKeepsTheOrder(t *testing.T) {
	a, b := replicas(t)
	t0 := storetest.T0
	g := store.GateKey{Tenant: "acme", Scope: "retry-after"}
	learn := store.LearningConfig{Enabled: true}
	now := t0.Add(10 * time.Millisecond).Add(redisstore.HeldPoll)
	ask := func(s *redisstore.Store, o store.Order) store.Admission {
		t.Helper()
		return admitLearning(t, s, g, learn, o, now)
	}
	a1 := store.Waiting{Arrival: t0.Add(time.Millisecond), Deadline: t0.Add(time.Hour)}
	a2 := store.Waiting{Arrival: t0.Add(2 * time.Millisecond), Deadline: t0.Add(time.Hour)}
	scout := ask(a, store.Order{Broker: "A", Arrival: a1.Arrival, Queue: []store.Waiting{a1, a2}, QueueLen: 2})
	if !scout.Admitted() || !scout.Probe {
		t.Fatalf("A's oldest call: %+v, want the scout", scout)
	}
	if _, err := a.Complete(context.Background(), store.CompleteRequest{Gate: g, Ticket: scout.Ticket, Result: store.ResultAccepted, Learning: learn, Now: now}); err != nil {
		t.Fatal(err)
	}
	if adm := ask(b, order("B", t0.Add(5*time.Millisecond))); !adm.Held {
		t.Fatalf("B's later call, slow start's one slot free and A's older call waiting: %+v, want held", adm)
	}
	if adm := ask(a, store.Order{Broker: "A", Arrival: a2.Arrival, Queue: []store.Waiting{a2}, QueueLen: 1}); !adm.Admitted() || adm.Probe {
		t.Fatalf("A's second call: %+v, want admitted by slow start", adm)
	}
}

// TestLearnedQuotaKeepsTheOrder: with a learned quota of 2 after a
// refusal, at the reopening replica A's waiting calls (older) go first: a
// call arriving later at replica B, asking between them, is held though
// the learned quota has room for one, and again when the learning probe is
// due, which is A's next call.
func TestLearnedQuotaKeepsTheOrder(t *testing.T) {
	a, b := replicas(t)
	ctx := context.Background()
	t0 := storetest.T0
	g := store.GateKey{Tenant: "acme", Scope: "retry-after"}
	learn := store.LearningConfig{Enabled: true, FirstWindowOff: true}
	ask := func(s *redisstore.Store, o store.Order, now time.Time) store.Admission {
		t.Helper()
		return admitLearning(t, s, g, learn, o, now)
	}
	// A fresh epoch: three calls go, the first is refused with a hint of
	// 2 s: L = 2 from the reopening.
	var first store.Ticket
	for i := range 3 {
		adm := ask(a, store.Order{}, t0.Add(time.Duration(i)*time.Millisecond))
		if !adm.Admitted() {
			t.Fatalf("fresh epoch, call %d: %+v", i+1, adm)
		}
		if i == 0 {
			first = adm.Ticket
		}
	}
	reopen := t0.Add(2 * time.Second)
	if _, err := a.Complete(ctx, store.CompleteRequest{Gate: g, Ticket: first, Result: store.ResultRefused, Learning: learn, Obs: store.Observation{CloseUntil: reopen}, Now: t0.Add(5 * time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	w := func(ms int) store.Waiting {
		return store.Waiting{Arrival: t0.Add(time.Second + time.Duration(ms)*time.Millisecond), Deadline: t0.Add(time.Hour)}
	}
	queue := []store.Waiting{w(0), w(1), w(2)}
	head := func(i int) store.Order {
		return store.Order{Broker: "A", Arrival: queue[i].Arrival, Queue: queue[i:], QueueLen: len(queue) - i}
	}
	c1 := ask(a, head(0), reopen)
	if !c1.Admitted() || c1.Probe || c1.Ticket.ID == "" {
		t.Fatalf("A's head at the reopening: %+v, want admitted within L", c1)
	}
	if adm := ask(b, order("B", reopen), reopen); !adm.Held {
		t.Fatalf("B's call at the reopening, one of L left and A's older calls waiting: %+v, want held", adm)
	}
	c2 := ask(a, head(1), reopen)
	if !c2.Admitted() || c2.Probe {
		t.Fatalf("A's second call: %+v, want admitted within L", c2)
	}
	// L's calls are back: the next call is the learning probe, and it is
	// A's third (older than B's), though B asks first.
	for _, c := range []store.Admission{c1, c2} {
		if _, err := a.Complete(ctx, store.CompleteRequest{Gate: g, Ticket: c.Ticket, Result: store.ResultAccepted, Learning: learn, Now: reopen}); err != nil {
			t.Fatal(err)
		}
	}
	if adm := ask(b, order("B", reopen), reopen); !adm.Held {
		t.Fatalf("B's call when the probe is due and A's older call waits: %+v, want held", adm)
	}
	if adm := ask(a, head(2), reopen); !adm.Admitted() || !adm.Probe {
		t.Fatalf("A's third call: %+v, want the probe", adm)
	}
}

// TestYoungWaitersDoNotHold: calls another replica holds that arrived
// within the last held poll do not hold a later call (their replica's
// next question, at most a poll away, serves them; holding for them would
// make every slot freed at one replica wait for another's poll); once
// they have waited longer, they do.
func TestYoungWaitersDoNotHold(t *testing.T) {
	a, b, g, _ := orderStores(t, 3)
	t0 := storetest.T0
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	deadline := t0.Add(time.Hour)
	queue := []store.Waiting{{Arrival: at(1), Deadline: deadline}, {Arrival: at(2), Deadline: deadline}, {Arrival: at(3), Deadline: deadline}}
	if adm := admitOrdered(t, a, g, order("A", at(1), queue...), at(10)); !adm.Admitted() {
		t.Fatalf("A's head: %+v", adm)
	}
	if adm := admitOrdered(t, b, g, order("B", at(5)), at(10)); !adm.Admitted() {
		t.Fatalf("B's call, A's two waiting calls 8 ms old: %+v, want admitted", adm)
	}
	if adm := admitOrdered(t, b, g, order("B", at(6)), at(3).Add(redisstore.HeldPoll+time.Millisecond)); !adm.Held {
		t.Fatalf("B's next call, A's two waiting calls older than a poll: %+v, want held", adm)
	}
}
