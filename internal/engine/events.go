package engine

import (
	"container/heap"
	"container/list"
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrybroker/retrybroker/internal/store"
)

// gateQueues orders the calls of this process at their gates: the
// admission rule's order (docs/shared-state.md, "The admission rule: order
// at a gate").
//
// A gate has a queue while calls of this process wait on it: held by its
// learned quota or half-open breaker, or waiting for a closed gate or an
// open breaker to reopen. The calls wait in arrival order and only the
// head asks the store:
//
//   - A fresh call that finds a queue on its gate joins it behind the calls
//     there instead of asking the store ahead of them. A call that asked
//     the store while there was no queue (or that raced one) and was told
//     to wait takes its place by arrival.
//   - The head asks when its turn comes: at the gate's time (the earliest
//     reopening or poll time the store answered), at a completion on the
//     gate in this process (Complete signals it), or when the call ahead
//     of it was admitted (so at a reopening up to L calls go, in order, one
//     store call each, and the chain stops at the first hold).
//   - A call the store holds again keeps its place; a call that leaves
//     while it holds the turn (its store call failed, pacing refused it)
//     passes the turn on.
//   - A call whose deadline would pass before the gate's time leaves at
//     once (its caller gets the gate's time as retry_after), as does a
//     call whose max_delay the gate's new time exceeds.
//
// The store still enforces the counts (L, the remaining count, the probe);
// the queue gives them an order and keeps the herd away: one store call
// per completion, per reopening and per poll, whatever the number of
// waiting calls. Calls of other replicas are not in this queue; the store
// orders the replicas among themselves.
type gateQueues struct {
	mu     sync.Mutex
	queues map[store.GateKey]*gateQueue
	n      atomic.Int64  // len(queues), read without mu
	seq    atomic.Uint64 // arrival numbers
}

// gateQueue is the queue of one gate; its fields are guarded by
// gateQueues.mu.
type gateQueue struct {
	key     store.GateKey
	waiters list.List // of *waiter, by arrival, head first
	byEnd   waiterHeap
	// wakeAt is when the head asks the store again: the gate's or the
	// breaker's reopening, or the poll after a hold.
	wakeAt time.Time
	// cause is the cause of the last answer ("cooldown", "breaker",
	// "held"): what a fresh call joining the queue waits for.
	cause string
	// turn: the head may ask now (a completion here, the call ahead of
	// it admitted).
	turn bool
	// asking is the call asking the store now, nil for none.
	asking *waiter
}

// waiter is a call's one place to wait: a timer on the runner's clock, a
// wake channel its gate's queue pokes, and its place in that queue. It is
// part of the call's state and starts no goroutine; a call's waits select
// on it, the call's context and the drain (callState.sleep, gateWait).
type waiter struct {
	timer Timer         // made at the first timed wait
	wake  chan struct{} // capacity 1; made at the first queued wait
	// Guarded by gateQueues.mu while queued.
	q        *gateQueue
	seq      uint64    // arrival number
	arrived  time.Time // arrival time, for a shared store's order (store.Order)
	deadline time.Time
	maxDelay time.Duration
	elem     *list.Element
	hidx     int
	// expired: the gate's time passed the call's deadline or max_delay;
	// retryAfter is then the gate's time from expiry.
	expired    bool
	retryAfter time.Duration
}

// woke says why a wait ended.
type woke int8

const (
	wokeTimer   woke = iota // its time came
	wokeTurn                // its turn at the gate: ask the store now
	wokeExpired             // the gate's time is past its deadline or max_delay
	wokeDrain               // the drain began
	wokeDone                // the call's context ended
)

// arrive returns the next arrival number.
func (g *gateQueues) arrive() uint64 { return g.seq.Add(1) }

// order is w's place in its gate's arrival order across the replicas that
// share the store (store.Order), broker naming this process's queues: its
// arrival and, when it waits in the gate's queue, the queue, oldest first
// (calls that are leaving left out). Only w's call changes w.q, so it is
// read without the lock.
func (g *gateQueues) order(w *waiter, broker string) store.Order {
	o := store.Order{Broker: broker, Arrival: w.arrived}
	if broker == "" || w.q == nil {
		return o
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	q := w.q
	if q == nil {
		return o
	}
	o.QueueLen = q.waiters.Len()
	o.Queue = make([]store.Waiting, 0, min(o.QueueLen, store.MaxOrderQueue))
	for e := q.waiters.Front(); e != nil && len(o.Queue) < store.MaxOrderQueue; e = e.Next() {
		x := e.Value.(*waiter)
		if x.expired {
			o.QueueLen--
			continue
		}
		o.Queue = append(o.Queue, store.Waiting{Arrival: x.arrived, Deadline: x.deadline})
	}
	return o
}

// join queues a fresh call w behind the calls of this process waiting on
// gate, when there are any (ok), and returns what the queue knows as an
// admission for admissionStep: the gate's time (a closed gate, an open
// breaker) or a hold until the head's next poll. It costs one atomic load
// when no gate has a queue.
func (g *gateQueues) join(gate store.GateKey, w *waiter, now time.Time) (adm store.Admission, ok bool) {
	if g.n.Load() == 0 {
		return adm, false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	q := g.queues[gate]
	if q == nil {
		return adm, false
	}
	q.insert(w)
	switch q.cause {
	case causeCooldown:
		adm.GateClosedUntil = q.wakeAt
	case causeBreaker:
		adm.BreakerOpenUntil = q.wakeAt
	default:
		adm.Held, adm.HeldFor = true, max(q.wakeAt.Sub(now), 0)
	}
	return adm, true
}

// hold records that the store told w (asking, or a call that asked
// directly) to wait at gate until st.until for st.cause. w takes its place
// in the queue by arrival when it has none, and keeps it otherwise. The
// gate's time becomes st.until when w was the one asking (the freshest
// answer), or the earlier of the two otherwise; calls whose deadline (or,
// on a new reopening time, max_delay) it passes leave.
func (g *gateQueues) hold(gate store.GateKey, w *waiter, st step, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	q := w.q
	if q == nil {
		q = g.queues[gate]
		if q == nil {
			if g.queues == nil {
				g.queues = make(map[store.GateKey]*gateQueue)
			}
			q = &gateQueue{key: gate, wakeAt: st.until, cause: st.cause}
			g.queues[gate] = q
			g.n.Add(1)
		}
		q.insert(w)
	}
	switch {
	case q.asking == w:
		q.record(st.until, st.cause, now)
		q.asking = nil
		// A completion while it asked: ask again. And a call that arrived
		// before w may have taken the head while w asked (it asked the
		// store itself and was held): it waits for w's question to end,
		// and must look again now, or it and the calls behind it sleep
		// to their deadlines while the gate opens.
		if q.turn || q.waiters.Front() != w.elem {
			q.pokeHead()
		}
	case st.until.Before(q.wakeAt):
		q.record(st.until, st.cause, now)
		q.pokeHead() // to arm for the earlier time
	}
}

// leave takes w out of its queue, if it is in one. pass gives the turn on
// when w held it (it asked, and was admitted, or is not going to wait
// there). until and cause, when until is set, are the answer of the store
// to w's question: a hold that w does not wait out (its deadline or
// max_delay is too short); the gate's time becomes until.
func (g *gateQueues) leave(w *waiter, pass bool, until time.Time, cause string, now time.Time) {
	if w.q == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	q := w.q
	if q == nil {
		return
	}
	wasHead, wasAsking := q.waiters.Front() == w.elem, q.asking == w
	if wasAsking {
		if pass {
			q.turn = true
		} else if !until.IsZero() {
			q.record(until, cause, now)
		}
		q.asking = nil
	}
	q.waiters.Remove(w.elem)
	heap.Remove(&q.byEnd, w.hidx)
	w.q, w.elem, w.expired = nil, nil, false
	if q.waiters.Len() == 0 {
		delete(g.queues, q.key)
		g.n.Add(-1)
		return
	}
	// The head looks again when it changed, when it has the turn, or when
	// w's question ended: a head that is not w waited for it (see hold).
	if wasHead || wasAsking || q.turn {
		q.pokeHead()
	}
}

// signal tells the head of gate's queue that a call on the gate completed
// here (a slot may be free): it asks the store at once, or again after its
// current question. It costs one atomic load when no gate has a queue.
func (g *gateQueues) signal(gate store.GateKey) {
	if g.n.Load() == 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if q := g.queues[gate]; q != nil {
		q.turn = true
		q.pokeHead()
	}
}

// await waits in w's queue until w's turn comes, its deadline passes the
// gate's time, the context ends or the drain begins. The head arms its
// timer for the gate's time; every waiter arms it for its own deadline
// (the call's tellBy) too, so that a call whose turn does not come in time
// (calls ahead of it asking one by one, on a slow store) leaves while its
// caller can still be told, with the gate's time as retry_after.
func (g *gateQueues) await(ctx context.Context, drain <-chan struct{}, clock Clock, w *waiter) woke {
	for {
		g.mu.Lock()
		q := w.q
		if w.expired || q == nil {
			g.mu.Unlock()
			w.stopTimer()
			return wokeExpired
		}
		now := clock.Now()
		if !w.deadline.IsZero() && !now.Before(w.deadline) {
			// Its turn did not come in time: it leaves (passing on a
			// turn it was given) with the gate's time as retry_after.
			w.expired, w.retryAfter = true, max(q.wakeAt.Sub(now), 0)
			g.mu.Unlock()
			w.stopTimer()
			return wokeExpired
		}
		head := q.waiters.Front() == w.elem && q.asking == nil
		if head && (q.turn || !now.Before(q.wakeAt)) {
			q.turn, q.asking = false, w
			g.mu.Unlock()
			w.stopTimer()
			return wokeTurn
		}
		var tc <-chan time.Time
		switch {
		case head && !w.deadline.IsZero():
			tc = w.arm(clock, min(q.wakeAt.Sub(now), w.deadline.Sub(now)))
		case head:
			tc = w.arm(clock, q.wakeAt.Sub(now))
		case !w.deadline.IsZero():
			tc = w.arm(clock, w.deadline.Sub(now))
		default:
			w.stopTimer()
		}
		g.mu.Unlock()
		select {
		case <-tc:
		case <-w.wake:
		case <-ctx.Done():
			w.stopTimer()
			return wokeDone
		case <-drain:
			w.stopTimer()
			return wokeDrain
		}
	}
}

// gateTime returns how long until the gate's time of w's queue (0 when
// due or not queued).
func (g *gateQueues) gateTime(w *waiter, now time.Time) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	if w.q == nil {
		return w.retryAfter
	}
	return max(w.q.wakeAt.Sub(now), 0)
}

// insert puts w into q by arrival: behind every call that arrived before
// it (usually at the back).
func (q *gateQueue) insert(w *waiter) {
	w.q, w.expired = q, false
	if w.wake == nil {
		w.wake = make(chan struct{}, 1)
	}
	e := q.waiters.Back()
	for e != nil && e.Value.(*waiter).seq > w.seq {
		e = e.Prev()
	}
	if e == nil {
		w.elem = q.waiters.PushFront(w)
	} else {
		w.elem = q.waiters.InsertAfter(w, e)
	}
	heap.Push(&q.byEnd, w)
}

// record sets the gate's time to until for cause and sends away the calls
// that cannot wait for it: those whose deadline is not after it and, when
// the gate (or breaker) said until, those whose max_delay it exceeds.
// Their place is taken out at their leave.
func (q *gateQueue) record(until time.Time, cause string, now time.Time) {
	later := until.After(q.wakeAt)
	q.wakeAt, q.cause = until, cause
	retryAfter := max(until.Sub(now), 0)
	// The heap's children never end before their parent: walk down from
	// the root while deadlines are not after until.
	var stack [32]int
	todo := append(stack[:0], 0)
	for len(todo) > 0 {
		i := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if i >= len(q.byEnd) || q.byEnd[i].deadline.After(until) {
			continue
		}
		if w := q.byEnd[i]; !w.expired && w != q.asking {
			w.expire(retryAfter)
		}
		todo = append(todo, 2*i+1, 2*i+2)
	}
	if later && cause != causeHeld {
		for e := q.waiters.Front(); e != nil; e = e.Next() {
			if w := e.Value.(*waiter); !w.expired && w != q.asking && until.Sub(now) > w.maxDelay {
				w.expire(retryAfter)
			}
		}
	}
}

// pokeHead wakes the head of q to look at the queue again.
func (q *gateQueue) pokeHead() {
	if e := q.waiters.Front(); e != nil {
		e.Value.(*waiter).poke()
	}
}

// expire marks w as unable to wait for its gate and wakes it.
func (w *waiter) expire(retryAfter time.Duration) {
	w.expired, w.retryAfter = true, retryAfter
	w.poke()
}

func (w *waiter) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// arm arms w's timer to fire after d and returns its channel.
func (w *waiter) arm(clock Clock, d time.Duration) <-chan time.Time {
	if w.timer == nil {
		w.timer = clock.NewTimer(d)
	} else {
		w.timer.Reset(d)
	}
	return w.timer.C()
}

func (w *waiter) stopTimer() {
	if w.timer != nil {
		w.timer.Stop()
	}
}

// waiterHeap orders the waiters of a queue by deadline.
type waiterHeap []*waiter

func (h waiterHeap) Len() int           { return len(h) }
func (h waiterHeap) Less(i, j int) bool { return h[i].deadline.Before(h[j].deadline) }
func (h waiterHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].hidx, h[j].hidx = i, j
}
func (h *waiterHeap) Push(x any) { w := x.(*waiter); w.hidx = len(*h); *h = append(*h, w) }
func (h *waiterHeap) Pop() any {
	old := *h
	w := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return w
}
