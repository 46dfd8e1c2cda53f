package engine

import (
	"context"
	"testing"
)

// The set of attempts in flight cancels what it holds at the drain
// deadline, and what is added after it at once; an attempt that left is
// not canceled; links leave in any order.
func TestAttemptSetCutsWhatItHolds(t *testing.T) {
	var set attemptSet
	ctxs := make([]context.Context, 4)
	links := make([]attemptLink, 4)
	for i := range links {
		ctx, cancel := context.WithCancel(context.Background())
		ctxs[i] = ctx
		set.add(&links[i], cancel)
	}
	links[0].remove() // the tail
	links[2].remove() // the middle
	links[3].remove() // the head
	links[3].remove() // twice: nothing
	set.cutAll()
	for i, want := range []bool{false, true, false, false} {
		if got := ctxs[i].Err() != nil; got != want {
			t.Errorf("attempt %d canceled %v, want %v", i, got, want)
		}
	}
	late, cancel := context.WithCancel(context.Background())
	var l attemptLink
	set.add(&l, cancel)
	if late.Err() == nil {
		t.Error("an attempt added after the deadline was not canceled at once")
	}
	if l.set != nil || set.head != &links[1] || links[1].next != nil || links[1].prev != nil {
		t.Errorf("the set holds %p (want only %p), the late link's set %p", set.head, &links[1], l.set)
	}
}
