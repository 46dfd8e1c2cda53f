package engine

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// far is a deadline no test reaches.
const far = time.Hour

// The set of attempts in flight cancels what it holds at the drain
// deadline (a stream past its head with errStreamShutdown, any other with
// context.Canceled), and what is added after it at once; an attempt that
// left is not canceled; links leave in any order.
func TestAttemptSetCutsWhatItHolds(t *testing.T) {
	var set attemptSet
	ctxs := make([]context.Context, 5)
	links := make([]attemptLink, 5)
	now := time.Now()
	for i := range links {
		ctx, cancel := context.WithCancelCause(context.Background())
		ctxs[i] = ctx
		set.add(&links[i], cancel, now.Add(far+time.Duration(i)*time.Second), now)
	}
	links[0].remove() // the earliest
	links[2].remove() // the middle
	links[3].remove()
	links[3].remove() // twice: nothing
	links[4].headed() // a stream past its head
	set.cutAll()
	for i, want := range []error{nil, context.Canceled, nil, nil, errStreamShutdown} {
		if got := context.Cause(ctxs[i]); !errors.Is(got, want) || (want == nil) != (got == nil) {
			t.Errorf("attempt %d cause %v, want %v", i, got, want)
		}
	}
	late, cancel := context.WithCancelCause(context.Background())
	var l attemptLink
	set.add(&l, cancel, now.Add(far), now)
	if !errors.Is(context.Cause(late), context.Canceled) {
		t.Errorf("an attempt added after the drain deadline: cause %v, want canceled at once", context.Cause(late))
	}
	if l.set != nil || len(set.links) != 2 || set.links[0] != &links[1] && set.links[1] != &links[1] {
		t.Errorf("the set holds %d links, the late link's set %p", len(set.links), l.set)
	}
}

// Each attempt is canceled at its own deadline, with
// context.DeadlineExceeded, whatever order the deadlines came in; one that
// left before its deadline is not canceled; one past its head has no
// deadline; one whose deadline has passed is canceled at once. The set's
// one timer is armed at the earliest deadline.
func TestAttemptSetCancelsEachAtItsDeadline(t *testing.T) {
	var set attemptSet
	start := time.Now()
	offsets := []time.Duration{300, 100, 200, 150, 250} // ms
	ctxs := make([]context.Context, len(offsets))
	links := make([]attemptLink, len(offsets))
	for i, ms := range offsets {
		ctx, cancel := context.WithCancelCause(context.Background())
		ctxs[i] = ctx
		set.add(&links[i], cancel, start.Add(ms*time.Millisecond), start)
	}
	set.mu.Lock()
	armed := set.armed
	set.mu.Unlock()
	if want := monoTime(start.Add(100 * time.Millisecond)); armed != want {
		t.Fatalf("timer armed at %d, want the earliest deadline %d", armed, want)
	}
	links[3].remove() // leaves before its deadline (150 ms)
	links[4].headed() // a stream's head: no deadline any more
	<-ctxs[1].Done()  // 100 ms
	if el := time.Since(start); el < 100*time.Millisecond {
		t.Fatalf("canceled after %v, before its 100 ms deadline", el)
	}
	for i := range ctxs {
		if i != 1 && ctxs[i].Err() != nil && time.Since(start) < 190*time.Millisecond {
			t.Fatalf("attempt %d (deadline %d ms) canceled at %v", i, offsets[i], time.Since(start))
		}
	}
	<-ctxs[0].Done() // 300 ms, after 200 ms
	if el := time.Since(start); el < 300*time.Millisecond {
		t.Fatalf("canceled after %v, before its 300 ms deadline", el)
	}
	for i, want := range []error{context.DeadlineExceeded, context.DeadlineExceeded, context.DeadlineExceeded, nil, nil} {
		if got := context.Cause(ctxs[i]); !errors.Is(got, want) || (want == nil) != (got == nil) {
			t.Errorf("attempt %d (deadline %d ms) cause %v, want %v", i, offsets[i], got, want)
		}
	}
	for i := range links {
		links[i].remove() // after its deadline too: nothing left to do
	}
	if len(set.links) != 0 {
		t.Fatalf("%d links left", len(set.links))
	}

	past, cancel := context.WithCancelCause(context.Background())
	var l attemptLink
	set.add(&l, cancel, start, time.Now())
	if !errors.Is(context.Cause(past), context.DeadlineExceeded) || l.set != nil {
		t.Fatalf("a deadline already passed: cause %v, in the set %v", context.Cause(past), l.set != nil)
	}
}

// Links added, taken out, headed and expired in any order keep the heap
// ordered and every link's index true; under the race detector, from
// several goroutines at once.
func TestAttemptSetUnderChurn(t *testing.T) {
	var set attemptSet
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			links := make([]attemptLink, 64)
			ctxs := make([]context.Context, len(links))
			for range 2000 {
				i := rng.IntN(len(links))
				l := &links[i]
				switch {
				case l.set == nil:
					ctx, cancel := context.WithCancelCause(context.Background())
					ctxs[i] = ctx
					now := time.Now()
					set.add(l, cancel, now.Add(time.Duration(rng.IntN(3000))*time.Microsecond), now)
				case rng.IntN(4) == 0:
					l.headed()
				default:
					l.remove()
				}
			}
			for i := range links {
				links[i].remove()
			}
		})
	}
	check := func() {
		set.mu.Lock()
		defer set.mu.Unlock()
		for i, l := range set.links {
			if l.i != i {
				t.Errorf("link at %d says %d", i, l.i)
			}
			if p := (i - 1) / 2; i > 0 && set.links[p].when > l.when {
				t.Errorf("heap order broken at %d", i)
			}
		}
	}
	for range 20 {
		check()
		time.Sleep(time.Millisecond)
	}
	wg.Wait()
	check()
	if len(set.links) != 0 {
		t.Fatalf("%d links left after every attempt left", len(set.links))
	}
}
