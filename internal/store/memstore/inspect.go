package memstore

import (
	"context"
	"fmt"
	"time"

	"github.com/retrybroker/retrybroker/internal/store"
)

var _ store.Inspector = (*Store)(nil)

// InspectGate implements store.Inspector.
func (s *Store) InspectGate(_ context.Context, key store.GateKey, now time.Time) (store.GateInfo, error) {
	n := micros(now)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.GateInfo{}, fmt.Errorf("memstore: inspect: %w", store.ErrClosed)
	}
	g := s.lookup(key)
	info := store.GateInfo{Status: store.GateStatus{ClosedUntil: timeOf(g.until(n), n), BreakerOpenUntil: timeOf(g.breakerOpenUntil(n), n)}}
	if g == nil {
		return info, nil
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
	return info, nil
}
