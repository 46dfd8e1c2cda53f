package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/retrybroker/retrybroker/internal/store"
)

// Body budget defaults and edges.
const (
	// DefaultBodyBudget is the broker's default budget of buffered bodies
	// (cmd/broker's --max-buffered-bytes): 256 MiB, half of a 512 MiB
	// container, leaving the rest to the runtime, the garbage collector's
	// slack and everything else the broker holds. NewRunner without
	// WithBodyBudget sets no budget at all.
	DefaultBodyBudget = 256 << 20
	// MinBodyBudget is the smallest budget cmd/broker accepts: the largest
	// request and response bodies one call may buffer (2 × MaxBodyLimit),
	// so that every call a valid policy allows fits.
	MinBodyBudget = 2 * MaxBodyLimit
	// trackedBody is the smallest body kept in the budget after its call
	// ended (until the garbage collector frees it); smaller ones are given
	// back when the call ends.
	trackedBody = 32 << 10
	// reclaimSpacing spaces the collections asked for while calls wait.
	reclaimSpacing = 20 * time.Millisecond
)

// BudgetError reports that a call's bodies could not be given room in the
// broker's body budget: Need bytes were wanted of a budget of Size, and
// nothing was sent. Waited is true when the call waited for room until its
// deadline; false when Need is larger than the whole budget.
type BudgetError struct {
	Need, Size int64
	Waited     bool
}

func (e *BudgetError) Error() string {
	if !e.Waited {
		return fmt.Sprintf("the call's bodies (%d bytes: max_response_body plus the request body) are larger than the broker's buffered-body budget (%d bytes); nothing was sent", e.Need, e.Size)
	}
	return fmt.Sprintf("no room for the call's bodies (%d bytes) in the broker's buffered-body budget (%d bytes) within the call's deadline; nothing was sent", e.Need, e.Size)
}

// bodyBudget bounds the bytes of buffered bodies of all Execute calls of a
// Runner: request bodies and response bodies read whole.
//
// A call reserves its request body plus its max_response_body before its
// first attempt is sent, so that whatever the upstream answers, the body
// has room: a call is refused, or waits, only before anything is sent,
// never after. Between attempts it gives the response's room back and
// takes it again before the next attempt (waiting within its deadline, as
// for any wait before a retry). When the call ends, it gives back what it
// did not use and its request body's room (the caller's buffer, which may
// serve many calls); the response body it returns (when at least
// trackedBody bytes) stays in the budget until the garbage collector has
// freed it (runtime.AddCleanup), so the budget counts the memory that is
// actually held, wherever the body went (a gRPC message being sent, a
// caller that keeps the result). While calls wait for room and such bodies are
// pending, a collection is asked for every reclaimSpacing (reclaim).
//
// ExecuteStream calls reserve nothing: a stream holds at most one
// StreamChunkSize buffer and one hint peek, and their number is bounded by
// stream.max_concurrent.
type bodyBudget struct {
	size       int64
	room       budgetRoom
	pending    atomic.Int64 // bytes held by bodies of ended calls, not yet collected
	waiters    atomic.Int64 // calls waiting for room
	reclaiming atomic.Bool  // the reclaimer runs
}

func newBodyBudget(size int64) *bodyBudget {
	b := &bodyBudget{size: size}
	b.room.free.Store(size)
	return b
}

// reserve waits for n bytes of room until the context ctx returns ends
// (ctx is called only when it must wait). onWait, when not nil,
// is called with +1 when the call must wait and -1 when the wait ends.
func (b *bodyBudget) reserve(ctx func() context.Context, n int64, onWait func(int)) error {
	if n > b.size {
		return &BudgetError{Need: n, Size: b.size}
	}
	if b.room.tryTake(n) {
		return nil
	}
	if onWait != nil {
		onWait(1)
		defer onWait(-1)
	}
	b.waiters.Add(1)
	defer b.waiters.Add(-1)
	b.reclaim()
	return b.room.take(ctx(), n)
}

// reclaim starts the reclaimer unless it runs: while calls wait for room
// and bodies of ended calls are pending, it asks for a garbage collection
// every reclaimSpacing, so that the bodies nothing references any more
// (their gRPC send done, their caller gone) give their room back. (The
// runtime would collect them only when the heap grows, and waiting calls
// allocate nothing.) The spacing is wall-clock time on purpose: it paces
// the runtime's collector, not a call.
func (b *bodyBudget) reclaim() {
	if b.waiters.Load() == 0 || b.pending.Load() == 0 || !b.reclaiming.CompareAndSwap(false, true) {
		return
	}
	go func() {
		for {
			runtime.GC()
			time.Sleep(reclaimSpacing)
			if b.waiters.Load() == 0 || b.pending.Load() == 0 {
				b.reclaiming.Store(false)
				// A wait or a body that arrived since the check starts it again.
				if b.waiters.Load() == 0 || b.pending.Load() == 0 || !b.reclaiming.CompareAndSwap(false, true) {
					return
				}
			}
		}
	}()
}

// bodyHold is the room one call holds in the budget: its request body for
// the whole call, and its max_response_body while an attempt is sent and
// read (not while it waits between attempts).
type bodyHold struct {
	b       *bodyBudget
	held    int64
	sending bool   // held includes the response's room
	read    []byte // the body read for the attempt being concluded (readFinal)
}

// track moves the room of body (its capacity, when at least trackedBody
// bytes and no more than the hold) from the hold to the bodies pending
// collection, and reports whether it did.
func (h *bodyHold) track(body []byte) bool {
	n := int64(cap(body))
	if n < trackedBody || n > h.held {
		return false
	}
	h.held -= n
	h.b.pending.Add(n)
	runtime.AddCleanup(unsafe.SliceData(body[:1]), h.b.collected, n)
	return true
}

// free gives back n bytes of the hold.
func (h *bodyHold) free(n int64) {
	if n > 0 {
		h.held -= n
		h.b.room.give(n)
	}
}

// keep ends the call's hold: it keeps in the budget, until the garbage
// collector frees them, the bodies the call returns (when at least
// trackedBody bytes each; never more than it holds), and gives back the
// rest at once.
func (h *bodyHold) keep(bodies ...[]byte) {
	for _, body := range bodies {
		h.track(body)
	}
	h.free(h.held)
	h.b.reclaim()
}

// collected gives back the room of a body the garbage collector freed.
func (b *bodyBudget) collected(n int64) {
	b.pending.Add(-n)
	b.room.give(n)
}

// reserveBodies reserves, before an attempt is sent, room for the largest
// response body the call may return, and before its first attempt, for
// its request body as well. It does nothing for a stream or without a
// budget. When the call cannot get room it gives the attempt's admission
// back and ends (end true): before the first attempt with a *BudgetError
// (the whole budget is too small, or its deadline passed while it waited);
// before a retry with OutcomeDeadlineTooShort (err nil), as a retry that
// pacing cannot admit; the caller's context error (s.res canceled); or the
// drain (s.res shutting down, err nil).
func (s *callState) reserveBodies(adm store.Admission) (end bool, err error) {
	b := s.r.budget
	if b == nil || !s.d.reservesBodies() || (s.hold != nil && s.hold.sending) {
		return false, nil
	}
	need := s.maxBody
	if s.hold == nil {
		need += int64(len(s.c.Body))
	}
	err = b.reserve(s.callCtx, need, func(d int) { s.r.observer.Waiting("budget", d) })
	if err == nil {
		if s.hold == nil {
			s.holdRoom = bodyHold{b: b}
			s.hold = &s.holdRoom
		}
		s.hold.held += need
		s.hold.sending = true
		return false, nil
	}
	_ = s.complete(adm, store.Observation{}, store.ResultNone, false) // admitted, never sent
	var be *BudgetError
	switch {
	case errors.As(err, &be):
		return true, err
	case s.caller.Err() != nil:
		s.res.Outcome = OutcomeCanceled
		return true, s.caller.Err()
	case s.r.drain.hard.Err() != nil:
		return true, s.endEarly(OutcomeShuttingDown, 0, false)
	case s.n > 1:
		return true, s.endEarly(OutcomeDeadlineTooShort, 0, false)
	}
	return true, &BudgetError{Need: need, Size: b.size, Waited: true}
}

// freeResponseRoom gives back the response's room while the call waits
// for its next attempt, so that calls waiting out a backoff or a gate hold
// only their request bodies.
//
// A body read whole and then dropped for a retry (it broke off) keeps its
// room until it is collected, as a returned body does.
func (s *callState) freeResponseRoom() {
	if h := s.hold; h != nil && h.sending {
		room := s.maxBody
		if n := int64(cap(h.read)); n <= room && h.track(h.read) {
			room -= n
		}
		h.read = nil
		h.free(room)
		h.sending = false
	}
}

// bodyRead records the body readFinal read for the attempt.
func (s *callState) bodyRead(body []byte) {
	if s.hold != nil {
		s.hold.read = body
	}
}

// keepBodies ends the call's hold (see bodyHold.keep) once Run is done.
func (s *callState) keepBodies(res *Result) {
	if s.hold == nil {
		return
	}
	var body []byte
	if res != nil && res.Response != nil {
		body = res.Response.Body
	}
	s.hold.keep(body) // the request body is the caller's: it may outlive many calls
	s.hold = nil
}

// readBody reads a final response body of at most limit bytes into one
// buffer, with the bytes already peeked as its prefix: sized from the
// response's Content-Length (length; -1 when unknown) when it is known, so
// the body is read into one allocation of its size, and grown by doubling
// otherwise. truncated reports that the body went past limit (body then
// holds limit bytes); err is the read error, if any (body holds what
// arrived).
func readBody(r io.Reader, peek []byte, length, limit int64) (body []byte, truncated bool, err error) {
	if int64(len(peek)) > limit {
		return peek[:limit], true, nil
	}
	size := limit
	switch {
	case length >= 0 && length < limit:
		size = length
	case length < 0:
		size = min(limit, max(2*int64(len(peek)), 64<<10))
	}
	size = max(size, int64(len(peek))) // at most limit
	var buf []byte
	if int64(cap(peek)) >= size {
		buf = peek[:len(peek):size] // never read past size into the peek's spare room
	} else {
		buf = make([]byte, len(peek), size)
		copy(buf, peek)
	}
	for {
		if len(buf) == cap(buf) {
			// Full: one more byte says whether the body goes on.
			var one [1]byte
			if n, rerr := io.ReadFull(r, one[:]); n == 0 {
				if errors.Is(rerr, io.EOF) {
					rerr = nil
				}
				return buf, false, rerr
			}
			if int64(len(buf)) >= limit {
				return buf, true, nil
			}
			grown := make([]byte, len(buf), min(limit, 2*int64(cap(buf))+1))
			copy(grown, buf)
			buf = append(grown, one[0])
			continue
		}
		n, rerr := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if rerr != nil {
			if errors.Is(rerr, io.EOF) {
				rerr = nil
			}
			return buf, false, rerr
		}
	}
}

// budgetRoom is the free room of a body budget, in bytes: a weighted
// semaphore whose uncontended take and give are one atomic operation each
// (every Execute call takes and gives room, so a mutex here is one lock
// that every call in the process shares), with a first-in, first-out
// queue for the calls that must wait: a waiting call is never passed by
// one that comes later and asks for less (once it is queued; a call that
// finds the queue empty may take room in the same instant).
type budgetRoom struct {
	free    atomic.Int64 // bytes not taken
	waiting atomic.Int64 // len(queue)
	mu      sync.Mutex   // guards queue
	queue   []*roomWaiter
}

// roomWaiter is one call waiting for n bytes; ready is closed once they
// are its.
type roomWaiter struct {
	n     int64
	ready chan struct{}
}

// tryTake takes n bytes if they are free and no call waits.
func (r *budgetRoom) tryTake(n int64) bool {
	return r.waiting.Load() == 0 && r.grab(n)
}

// grab takes n bytes if they are free.
func (r *budgetRoom) grab(n int64) bool {
	for {
		f := r.free.Load()
		if f < n {
			return false
		}
		if r.free.CompareAndSwap(f, f-n) {
			return true
		}
	}
}

// take waits, first in first out, until n bytes are free and takes them,
// or returns ctx's error (having taken nothing).
func (r *budgetRoom) take(ctx context.Context, n int64) error {
	r.mu.Lock()
	// Counted before the room is looked at: a give that comes after the
	// look sees the count and serves the queue (give), so no wake-up is
	// lost between the two.
	r.waiting.Add(1)
	if len(r.queue) == 0 && r.grab(n) {
		r.waiting.Add(-1)
		r.mu.Unlock()
		return nil
	}
	w := &roomWaiter{n: n, ready: make(chan struct{})}
	r.queue = append(r.queue, w)
	r.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	r.mu.Lock()
	if i := slices.Index(r.queue, w); i >= 0 {
		r.queue = slices.Delete(r.queue, i, i+1)
		r.waiting.Add(-1)
		r.serve() // the calls behind it may fit now
		r.mu.Unlock()
		return ctx.Err()
	}
	r.mu.Unlock()
	// Served as the context ended: the room is its, and goes back.
	r.give(n)
	return ctx.Err()
}

// give frees n bytes and serves the calls waiting for them.
func (r *budgetRoom) give(n int64) {
	r.free.Add(n)
	if r.waiting.Load() > 0 {
		r.mu.Lock()
		r.serve()
		r.mu.Unlock()
	}
}

// serve gives room to the waiting calls in order while it lasts; r.mu is
// held.
func (r *budgetRoom) serve() {
	for len(r.queue) > 0 && r.grab(r.queue[0].n) {
		close(r.queue[0].ready)
		r.queue[0] = nil
		r.queue = r.queue[1:]
		r.waiting.Add(-1)
	}
}
