package redisstore

import (
	"context"
	"time"

	"github.com/retrybroker/retrybroker/internal/store"
)

var _ store.Inspector = (*Store)(nil)

// InspectGate implements store.Inspector in one read-only script call
// (after this replica's counts of locally admitted attempts on the gate,
// in the same round trip).
func (s *Store) InspectGate(ctx context.Context, g store.GateKey, now time.Time) (store.GateInfo, error) {
	stateKey := s.keys.state(g)
	res, err := s.run(ctx, stateKey, "", admitPending, inspectScript,
		[]string{s.keys.gate(g), s.keys.inflight(g), s.keys.quota(g), stateKey, s.keys.index(g.Tenant)},
		micros(now), s.marginMS, s.maxGates, s.keys.member(g)).Int64Slice()
	if err != nil {
		return store.GateInfo{}, s.wrap("inspect", err)
	}
	if len(res) != 13 {
		return store.GateInfo{}, unexpected("inspect", res)
	}
	return infoOf(res), nil
}
