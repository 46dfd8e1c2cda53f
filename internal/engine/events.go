package engine

import (
	"container/list"
	"sync"
	"time"

	"github.com/retrybroker/retrybroker/internal/store"
)

// gateEvents wakes the calls of this process that a learning gate holds
// when another call on the same gate completes here, so a freed probe slot
// is taken at once rather than at the next poll. Calls held by a gate whose
// probe runs on another replica wake at their poll interval instead.
//
// A completion wakes one held call, the one waiting longest, not all of
// them: a completion frees at most one probe slot, and waking every held
// call would have each of them ask the store, only for all but one to be
// held again (with 10,000 held calls, 10,000 store calls per probe). A
// woken call that leaves without asking the store passes the wake on.
type gateEvents struct {
	mu      sync.Mutex
	waiting map[store.GateKey]*list.List // of *heldWaiter, oldest first
}

// heldWaiter is one held call's place in its gate's queue.
type heldWaiter struct {
	ch    chan struct{} // closed when woken
	woken bool
	elem  *list.Element
}

// wait queues a held call on gate and returns it with the number of calls
// now held there; its channel is closed at a signal for gate that reaches
// it. The caller must call leave.
func (e *gateEvents) wait(gate store.GateKey) (*heldWaiter, int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.waiting == nil {
		e.waiting = make(map[store.GateKey]*list.List)
	}
	l := e.waiting[gate]
	if l == nil {
		l = list.New()
		e.waiting[gate] = l
	}
	w := &heldWaiter{ch: make(chan struct{})}
	w.elem = l.PushBack(w)
	return w, l.Len()
}

// leave takes w out of gate's queue. A call that was woken but does not
// go on to ask the store (its wait ended for another reason) passes the
// wake on: asked is whether it will ask the store.
func (e *gateEvents) leave(gate store.GateKey, w *heldWaiter, asked bool) {
	e.mu.Lock()
	woken := w.woken
	if !woken {
		if l := e.waiting[gate]; l != nil {
			l.Remove(w.elem)
			if l.Len() == 0 {
				delete(e.waiting, gate)
			}
		}
	}
	e.mu.Unlock()
	if woken && !asked {
		e.signal(gate)
	}
}

// signal wakes the call held longest on gate. It costs one map lookup when
// none waits.
func (e *gateEvents) signal(gate store.GateKey) {
	e.mu.Lock()
	l := e.waiting[gate]
	var w *heldWaiter
	if l != nil {
		w = l.Remove(l.Front()).(*heldWaiter)
		w.woken = true
		if l.Len() == 0 {
			delete(e.waiting, gate)
		}
	}
	e.mu.Unlock()
	if w != nil {
		close(w.ch)
	}
}

// heldPollFor stretches a held call's poll interval when n calls of this
// process are held on its gate, so that together they ask the store about
// as often as 100 of them would: completions here wake them sooner, one by
// one, and the poll is only for probe slots freed on other replicas.
func heldPollFor(poll time.Duration, n int) time.Duration {
	const together = 100
	if n <= together {
		return poll
	}
	return poll * time.Duration(n) / together
}
