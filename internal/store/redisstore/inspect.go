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
	info := store.GateInfo{
		Status:   store.GateStatus{ClosedUntil: timeOf(res[0]), BreakerOpenUntil: timeOf(res[1])},
		InFlight: res[2], HasQuota: res[3] == 1, Remaining: res[4],
		Learning: res[6] == 1, Epoch: res[7], Admitted: res[8], NotAccepted: res[9],
		Learned: res[10] == 1, LearnedQuota: res[11], ProbeInFlight: res[12] == 1,
	}
	if info.HasQuota {
		info.Reset = timeOf(res[5])
	}
	return info, nil
}
