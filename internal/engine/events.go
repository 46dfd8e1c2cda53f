package engine

import (
	"sync"

	"github.com/retrybroker/retrybroker/internal/store"
)

// gateEvents wakes the calls of this process that a learning gate holds
// when another call on the same gate completes here, so a freed probe slot
// is taken at once rather than at the next poll. Calls held by a gate whose
// probe runs on another replica wake at their poll interval instead.
type gateEvents struct {
	mu      sync.Mutex
	waiting map[store.GateKey]chan struct{}
}

// wait returns a channel closed at the next signal for gate.
func (e *gateEvents) wait(gate store.GateKey) <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.waiting == nil {
		e.waiting = make(map[store.GateKey]chan struct{})
	}
	ch, ok := e.waiting[gate]
	if !ok {
		ch = make(chan struct{})
		e.waiting[gate] = ch
	}
	return ch
}

// signal wakes every call waiting on gate. It costs one map lookup when
// none waits.
func (e *gateEvents) signal(gate store.GateKey) {
	e.mu.Lock()
	ch, ok := e.waiting[gate]
	if ok {
		delete(e.waiting, gate)
	}
	e.mu.Unlock()
	if ok {
		close(ch)
	}
}
