package memstore

import "github.com/retrybroker/retrybroker/internal/store"

// learning is a gate's learned quota (see the store package documentation,
// "Learned quotas" and "The first window"): the current epoch's counts
// and, once an epoch ended, the quota L the next one admits.
type learning struct {
	epoch       int64 // the current epoch's id (> 0)
	prev        int64 // the epoch before it (0 = none): its late results still count
	known       bool  // limit holds L; false in a fresh epoch (nothing known yet)
	limit       int64 // L: calls the epoch admits before probing
	admitted    int64 // calls admitted in the epoch (probes included), less those given back
	notAccepted int64 // results Refused or Failed attributed to the epoch
	accepted    int64 // a fresh epoch's accepted results: its slow start grows with them
	ended       bool  // a refusal ended the epoch; the next Admit starts another
	opened      int64 // µs: the reopening the epoch began at (0 = a fresh epoch)
	reopen      int64 // µs: an ended epoch's reopening (the gate's closed-until time)
	window      int64 // µs: the learned window W, between two reopenings (0 = unknown)
	expires     int64 // µs: forgotten then unless an Admit comes first
}

// startEpoch returns g's learned state for an Admit at now, starting an
// epoch when none runs or when the running one is over:
//   - a fresh one (L unknown) without learned state, or when restart asks
//     for one (a known quota lapsed: its new window is unknown);
//   - a reopen one after an epoch that a refusal ended, whose L is then
//     computed from the ended epoch's counts (its calls have come back by
//     now); the time between this reopening and the one the ended epoch
//     began at is the learned window W;
//   - a new window of the same L when a reopen epoch's window W has passed
//     without a refusal, so that a quiet window carries neither its count
//     nor its probing into the next one.
//
// It refreshes the idle expiry.
func (g *gate) startEpoch(now, idle int64, restart bool) *learning {
	var last int64
	if g.learn != nil {
		last = g.learn.epoch
	}
	l := g.learningAt(now)
	switch {
	case l == nil || restart:
		var w int64
		if l != nil {
			w = l.window
		}
		l = &learning{epoch: nextEpoch(now, last), window: w}
		g.learn = l
	case l.ended:
		w := l.window
		if l.opened > 0 && l.reopen > l.opened {
			w = nextWindow(w, l.reopen-l.opened)
		}
		opened := l.reopen
		if w > 0 && opened > 0 && now >= opened+w { // idle for a window or more
			opened += (now - opened) / w * w
		}
		*l = learning{
			epoch: nextEpoch(now, l.epoch), prev: l.epoch,
			known: true, limit: max(l.admitted-l.notAccepted, 0),
			opened: opened, window: w,
		}
	case l.known && l.window > 0 && l.opened > 0 && now >= l.opened+l.window:
		opened := l.opened + (now-l.opened)/l.window*l.window
		*l = learning{
			epoch: nextEpoch(now, l.epoch), prev: l.epoch,
			known: true, limit: l.limit, opened: opened, window: l.window,
		}
	}
	l.expires = now + idle
	return l
}

// nextWindow returns the learned window after a measurement m (µs, the
// time between two reopenings) given the estimate w (0 = none): the first
// measurement, then the larger of the two, so that a reopening that came
// late (a Retry-After in whole seconds lands up to a second after the
// window's end) never makes the window look shorter than it is, which would
// end an epoch, and admit L again, before the provider's window resets. A
// measurement over twice the estimate is an epoch that spanned quiet
// windows before its refusal: it does not count.
func nextWindow(w, m int64) int64 {
	switch {
	case w == 0:
		return m
	case m > 2*w:
		return w
	}
	return max(w, m)
}

// nextEpoch returns the id of an epoch started at now after the epoch last:
// its start time in µs, or last+1 when the clock did not move past it. Ids
// thus stay distinct even after learned state was forgotten, so a ticket of
// a forgotten epoch never counts in a new one.
func nextEpoch(now, last int64) int64 { return max(now, last+1) }

// wantsProbe reports whether the epoch's next call goes as a probe: L is
// known and used up.
func (l *learning) wantsProbe() bool { return l.known && l.admitted >= l.limit }

// settle records one result attributed to epoch (the ticket's; 0 = none,
// as from Observe or a policy without learning). probe tells that the
// attempt was the learning probe (or scout) of that epoch; closedUntil is
// the gate's closed-until time after the result's observation (µs).
//
//   - A result of the current epoch counts in it: None gives the admission
//     back, Refused and Failed count as not accepted, an accepted probe
//     raises L by one, and in a fresh epoch an accepted result grows its
//     slow start. Lost and Broken say nothing about the quota: the call
//     keeps its share.
//   - A late result of the epoch before (now that a new one started, its
//     counts became L) lowers L by one when it was refused, failed or not
//     sent, as it would have had it come back in time.
//   - Results of older epochs change nothing.
//
// A refusal ends the current epoch, unless it comes from the epoch before
// or an older one (a late answer from an earlier window); the gate's
// closed-until time is then the ended epoch's reopening.
func (l *learning) settle(epoch int64, result store.Result, probe bool, closedUntil int64) {
	switch {
	case epoch == 0:
	case epoch == l.epoch:
		switch result {
		case store.ResultNone:
			l.admitted = max(l.admitted-1, 0)
		case store.ResultRefused, store.ResultFailed:
			l.notAccepted++
		case store.ResultAccepted:
			if probe && l.known {
				l.limit++
			}
			if !l.known {
				l.accepted++
			}
		}
	case epoch == l.prev && !l.ended:
		if result == store.ResultNone || result == store.ResultRefused || result == store.ResultFailed {
			l.limit = max(l.limit-1, 0)
		}
	}
	if result == store.ResultRefused && (epoch == 0 || epoch == l.epoch) {
		l.ended = true
	}
	if l.ended {
		l.reopen = max(l.reopen, closedUntil)
	}
}
