package memstore

import "github.com/retrybroker/retrybroker/internal/store"

// learning is a gate's learned quota (see the store package documentation,
// "Learned quotas"): the current epoch's counts and, once an epoch ended at
// a refusal, the quota L the next one admits.
type learning struct {
	epoch       int64 // the current epoch's id (> 0)
	prev        int64 // the epoch before it (0 = none): its late results still count
	known       bool  // limit holds L; false in a fresh epoch (nothing known yet)
	limit       int64 // L: calls the epoch admits before probing
	admitted    int64 // calls admitted in the epoch (probes included), less those given back
	notAccepted int64 // results Refused or Failed attributed to the epoch
	ended       bool  // a refusal ended the epoch; the next Admit starts another
	expires     int64 // µs: forgotten then unless an Admit comes first
}

// startEpoch returns g's learned state for an Admit at now, starting an
// epoch when none runs: a fresh one (L unknown) without learned state, a
// reopen one after an epoch that a refusal ended, whose L is then computed
// from the ended epoch's counts (its calls have come back by now). It
// refreshes the idle expiry.
func (g *gate) startEpoch(now, idle int64) *learning {
	var last int64
	if g.learn != nil {
		last = g.learn.epoch
	}
	l := g.learningAt(now)
	switch {
	case l == nil:
		l = &learning{epoch: nextEpoch(now, last)}
		g.learn = l
	case l.ended:
		*l = learning{
			epoch: nextEpoch(now, l.epoch), prev: l.epoch,
			known: true, limit: max(l.admitted-l.notAccepted, 0),
		}
	}
	l.expires = now + idle
	return l
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
// attempt was the learning probe of that epoch.
//
//   - A result of the current epoch counts in it: None gives the admission
//     back, Refused and Failed count as not accepted, and an accepted probe
//     raises L by one.
//   - A late result of the epoch before (now that a new one started, its
//     counts became L) lowers L by one unless accepted, as it would have
//     had it come back in time.
//   - Results of older epochs change nothing.
//
// A refusal ends the current epoch, unless it comes from the epoch before
// or an older one (a late answer from an earlier window).
func (l *learning) settle(epoch int64, result store.Result, probe bool) {
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
		}
	case epoch == l.prev && !l.ended:
		if result != store.ResultAccepted {
			l.limit = max(l.limit-1, 0)
		}
	}
	if result == store.ResultRefused && (epoch == 0 || epoch == l.epoch) {
		l.ended = true
	}
}
