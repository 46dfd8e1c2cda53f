package memstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/retrybroker/retrybroker/internal/store"
)

var (
	_ store.Inspector  = (*Store)(nil)
	_ store.GateLister = (*Store)(nil)
)

// InspectGate implements store.Inspector.
func (s *Store) InspectGate(_ context.Context, key store.GateKey, now time.Time) (store.GateInfo, error) {
	n := micros(now)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.GateInfo{}, fmt.Errorf("memstore: inspect: %w", store.ErrClosed)
	}
	return infoOf(s.lookup(key), n), nil
}

// infoOf is what g (nil: none) holds at n µs. s.mu must be held.
func infoOf(g *gate, n int64) store.GateInfo {
	info := store.GateInfo{Status: store.GateStatus{ClosedUntil: timeOf(g.until(n), n), BreakerOpenUntil: timeOf(g.breakerOpenUntil(n), n)}}
	if g == nil {
		return info
	}
	info.InFlight = g.inFlight(n)
	if g.quota.known(n) {
		info.HasQuota, info.Remaining, info.Reset = true, g.quota.remaining, time.UnixMicro(g.quota.reset)
	}
	if l := g.learningAt(n); l != nil {
		info.Learning, info.Epoch, info.Admitted, info.NotAccepted = true, l.epoch, l.admitted, l.notAccepted
		info.Learned, info.LearnedQuota = l.known, l.limit
	}
	info.ProbeInFlight = g.probe.live(n)
	return info
}

// ListGates implements store.GateLister. The order is by scope, then
// credential, byte for byte; a position is the last gate's scope and
// credential, percent-escaped (every byte outside [A-Za-z0-9._~-]) and
// joined by ':' (as the Redis store's index members), and a position that
// does not parse starts at the first gate. The lock is held to copy the
// tenant's gate names and then to read the page's gates, not while
// sorting, so a listing of many gates holds other calls for as little as
// it can.
func (s *Store) ListGates(_ context.Context, req store.ListGatesRequest) (store.GatePage, error) {
	limit := store.ClampListLimit(req.Limit)
	n := micros(req.Now)
	after, hasAfter := parsePosition(req.After)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return store.GatePage{}, fmt.Errorf("memstore: list gates: %w", store.ErrClosed)
	}
	tg := s.tenants[req.Tenant]
	all := make([]gateName, 0, len(tg))
	for name := range tg {
		if !hasAfter || compareNames(name, after) > 0 {
			all = append(all, name)
		}
	}
	s.mu.Unlock()

	// The gates after the position are taken in order, limit at a time:
	// the smallest limit of the rest are selected (linear on average) and
	// sorted, so a page costs far less than sorting every gate.
	var page store.GatePage
	for i := 0; i < len(all); i += limit {
		part := all[i:min(i+limit, len(all))]
		selectSmallest(all[i:], len(part))
		slices.SortFunc(part, compareNames)
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return store.GatePage{}, fmt.Errorf("memstore: list gates: %w", store.ErrClosed)
		}
		tg := s.tenants[req.Tenant]
		for j, name := range part {
			g := tg[name]
			if g == nil {
				continue // dropped since the copy
			}
			info := infoOf(g, n)
			if info == (store.GateInfo{}) || (req.Match != nil && !req.Match(info)) {
				continue
			}
			page.Gates = append(page.Gates, store.ListedGate{
				Key:  store.GateKey{Tenant: req.Tenant, Scope: name.scope, Credential: name.credential},
				Info: info,
			})
			if len(page.Gates) == limit {
				if i+j+1 < len(all) {
					page.Next = position(name)
				}
				s.mu.Unlock()
				return page, nil
			}
		}
		s.mu.Unlock()
	}
	return page, nil
}

// selectSmallest reorders s so that its first k names are its k smallest
// (in any order), by quickselect with a middle pivot: O(len(s)) on average.
func selectSmallest(s []gateName, k int) {
	lo, hi := 0, len(s)-1
	for lo < hi && k > lo && k <= hi {
		p := s[lo+(hi-lo)/2]
		i, j := lo, hi
		for i <= j {
			for compareNames(s[i], p) < 0 {
				i++
			}
			for compareNames(s[j], p) > 0 {
				j--
			}
			if i <= j {
				s[i], s[j] = s[j], s[i]
				i++
				j--
			}
		}
		// s[lo..j] <= p <= s[i..hi], and s[j+1..i-1] == p.
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return
		}
	}
}

func compareNames(a, b gateName) int {
	if c := strings.Compare(a.scope, b.scope); c != 0 {
		return c
	}
	return strings.Compare(a.credential, b.credential)
}

// parsePosition reverses position; ok is false for "" or a string
// position cannot return.
func parsePosition(p string) (gateName, bool) {
	scope, cred, ok := store.ParseGatePosition(p)
	return gateName{scope, cred}, ok
}

// position is name's place in the listing order (store.GatePosition).
func position(name gateName) string { return store.GatePosition(name.scope, name.credential) }
