package memstore

import (
	"time"

	"github.com/retrybroker/retrybroker/internal/store"
)

// breaker is a gate's failure breaker (see the store package
// documentation, "Failure breaker"): calls and failures in one-second
// buckets, and its open state.
type breaker struct {
	buckets      []brkBucket // oldest first
	openUntil    int64       // µs; 0 = closed, <= now = half-open
	failedProbes int         // k: failed probes since the breaker last closed
	keep         int64       // µs: how long it is kept, half open, after its open time or its probe
	expires      int64       // µs: forgotten then (counts out of the window, open state long past)
}

type brkBucket struct {
	sec      int64 // Unix seconds
	calls    int64
	failures int64
}

// add counts calls and failures in the bucket of now (µs), for a window of
// w seconds.
func (b *breaker) add(now, w, calls, failures int64) {
	sec := floorSec(now)
	b.prune(sec, w)
	b.expires = max(b.expires, (sec+w)*1e6)
	if n := len(b.buckets); n > 0 && b.buckets[n-1].sec == sec {
		b.buckets[n-1].calls += calls
		b.buckets[n-1].failures += failures
		return
	}
	// Request clocks may step back a little: keep the buckets in order.
	i := len(b.buckets)
	for i > 0 && b.buckets[i-1].sec > sec {
		i--
	}
	if i > 0 && b.buckets[i-1].sec == sec {
		b.buckets[i-1].calls += calls
		b.buckets[i-1].failures += failures
		return
	}
	b.buckets = append(b.buckets, brkBucket{})
	copy(b.buckets[i+1:], b.buckets[i:])
	b.buckets[i] = brkBucket{sec: sec, calls: calls, failures: failures}
}

// prune drops buckets out of the window of w seconds ending at sec.
func (b *breaker) prune(sec, w int64) {
	i := 0
	for i < len(b.buckets) && b.buckets[i].sec <= sec-w {
		i++
	}
	if i > 0 {
		b.buckets = append(b.buckets[:0], b.buckets[i:]...)
	}
}

// sums returns the calls and failures counted in the window of w seconds
// ending at now (µs).
func (b *breaker) sums(now, w int64) (calls, failures int64) {
	sec := floorSec(now)
	for _, bk := range b.buckets {
		if bk.sec > sec-w && bk.sec <= sec {
			calls += bk.calls
			failures += bk.failures
		}
	}
	return calls, failures
}

// trips reports whether the counts at now open the breaker c.
func (b *breaker) trips(now int64, c store.BreakerConfig) bool {
	calls, failures := b.sums(now, c.WindowSeconds())
	return calls >= int64(c.MinCalls) && float64(failures) >= c.FailureRatio*float64(calls)
}

// open opens the breaker at now for OpenFor × 2^k (k failed probes), at
// most MaxOpen and never past limit (µs, the gate bound). It is kept, half
// open, for MaxOpen after that (and after its probe's registration ends),
// but never longer than the gate bound allows (limit − now).
func (b *breaker) open(now, limit int64, c store.BreakerConfig) {
	maxOpen := int64(c.MaxOpen / time.Microsecond)
	b.openUntil = min(now+openMicros(int64(c.OpenFor/time.Microsecond), maxOpen, b.failedProbes), limit)
	b.keep = min(maxOpen, limit-now)
	b.expires = max(b.expires, b.openUntil+b.keep)
}

// openMicros returns openFor × 2^k, at most maxOpen (all in µs), without
// overflowing.
func openMicros(openFor, maxOpen int64, k int) int64 {
	d := openFor
	for range k {
		if d > maxOpen/2 {
			return maxOpen
		}
		d *= 2
	}
	return min(d, maxOpen)
}

// probeResult applies the result of the breaker's probe (or, for Observe,
// of a call made while it is half-open) at now: an answer from the
// destination (accepted, or refused with a hint) closes the breaker and
// clears its counts; a failure opens it again for twice as long; None
// changes nothing. It reports whether the breaker closed (g.brk should go).
func (b *breaker) probeResult(result store.Result, now, limit int64, c store.BreakerConfig) (closed bool) {
	switch result {
	case store.ResultAccepted, store.ResultRefused:
		return true
	case store.ResultFailed, store.ResultBroken:
		b.failedProbes++
		b.open(now, limit, c)
	}
	return false
}
