package redisstore

import "github.com/retrybroker/retrybroker/internal/store"

// The scripts' answers, decoded into typed values. Each decoder checks the
// answer's length and every flag and kind, and an answer it does not
// understand is an error (CauseUnexpected: the server does not behave as
// the scripts expect), never a guess.

// admitReply is admitScript's answer.
type admitReply struct {
	kind       admitKind
	until      int64 // µs: the gate's or the breaker's end
	wait       int64 // µs: the pacing wait, or how long a held call waits
	registered bool  // the attempt holds a ticket (a known quota, or the probe)
	probe      bool
	epoch      int64
	plain      bool // the gate is plain (local admission may admit on it)
	untracked  bool // the tenant's gate index is full
}

// decodeAdmit decodes admitScript's answer res.
func decodeAdmit(res []int64) (admitReply, error) {
	if len(res) != 7 && len(res) != 8 {
		return admitReply{}, unexpected("admit", res)
	}
	r := admitReply{kind: admitKind(res[0]), until: res[1], wait: res[2], epoch: res[5]}
	var ok bool
	if r.registered, ok = flag01(res[3]); !ok {
		return admitReply{}, unexpected("admit", res)
	}
	if r.probe, ok = flag01(res[4]); !ok {
		return admitReply{}, unexpected("admit", res)
	}
	if r.plain, ok = flag01(res[6]); !ok {
		return admitReply{}, unexpected("admit", res)
	}
	if len(res) == 8 {
		if r.untracked, ok = flag01(res[7]); !ok {
			return admitReply{}, unexpected("admit", res)
		}
	}
	if r.kind < 0 || r.kind >= admitKinds || r.wait < 0 {
		return admitReply{}, unexpected("admit", res)
	}
	return r, nil
}

// completeReply is completeScript's answer.
type completeReply struct {
	closedUntil  int64 // µs; 0: open
	allowed      bool  // a retry may be spent
	breakerUntil int64 // µs; 0: not open
	change       store.BreakerChange
	untracked    bool // the tenant's gate index is full
}

// decodeComplete decodes completeScript's answer res (op names the
// operation: complete or observe).
func decodeComplete(op string, res []int64) (completeReply, error) {
	if len(res) != 5 || res[3] < 0 || res[3] > int64(store.BreakerClosed) {
		return completeReply{}, unexpected(op, res)
	}
	r := completeReply{closedUntil: res[0], breakerUntil: res[2], change: store.BreakerChange(res[3])}
	var ok1, ok2 bool
	r.allowed, ok1 = flag01(res[1])
	r.untracked, ok2 = flag01(res[4])
	if !ok1 || !ok2 {
		return completeReply{}, unexpected(op, res)
	}
	return r, nil
}

// flag01 reads a script's flag: 1 or 0.
func flag01(v int64) (set, ok bool) {
	return v == 1, v == 0 || v == 1
}
