package memstore

// budget holds one tenant's retry-budget counts in one-second buckets,
// oldest first.
type budget struct {
	buckets []bucket
	// keepUntil is the µs of request time after which every bucket has
	// left its window.
	keepUntil int64
}

type bucket struct {
	sec      int64 // Unix seconds
	requests int64
	retries  int64
}

func floorSec(us int64) int64 {
	s := us / 1e6
	if us < 0 && us%1e6 != 0 {
		s--
	}
	return s
}

// prune drops buckets that left the window of window seconds ending at nowSec.
func (b *budget) prune(nowSec, window int64) {
	i := 0
	for i < len(b.buckets) && b.buckets[i].sec <= nowSec-window {
		i++
	}
	if i > 0 {
		b.buckets = append(b.buckets[:0], b.buckets[i:]...)
	}
}

// add counts requests and retries in the bucket of now (µs).
func (b *budget) add(now, window, requests, retries int64) {
	sec := floorSec(now)
	b.prune(sec, window)
	b.keepUntil = max(b.keepUntil, (sec+window)*1e6)
	for i := len(b.buckets) - 1; i >= 0; i-- {
		switch {
		case b.buckets[i].sec == sec:
			b.buckets[i].requests += requests
			b.buckets[i].retries += retries
			return
		case b.buckets[i].sec < sec:
			b.buckets = append(b.buckets, bucket{})
			copy(b.buckets[i+2:], b.buckets[i+1:])
			b.buckets[i+1] = bucket{sec: sec, requests: requests, retries: retries}
			return
		}
	}
	b.buckets = append([]bucket{{sec: sec, requests: requests, retries: retries}}, b.buckets...)
}

// sums returns the requests and retries counted in the window of window
// seconds ending at now (µs): buckets of seconds in (nowSec-window, nowSec].
func (b *budget) sums(now, window int64) (requests, retries int64) {
	sec := floorSec(now)
	b.prune(sec, window)
	for _, bk := range b.buckets {
		if bk.sec <= sec {
			requests += bk.requests
			retries += bk.retries
		}
	}
	return requests, retries
}

// expired reports whether every bucket left its window by now (µs).
func (b *budget) expired(now int64) bool {
	return now >= b.keepUntil
}
