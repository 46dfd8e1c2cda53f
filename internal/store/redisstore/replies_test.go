package redisstore

import (
	"strings"
	"testing"

	"github.com/retrybroker/retrybroker/internal/store"
)

// TestDecodeAdmit reads admitScript's answers of every kind, and refuses
// what the script never sends: a kind it does not name (before, an
// unknown kind was read as a pacing denial), a flag other than 0 or 1, a
// negative wait, a short answer.
func TestDecodeAdmit(t *testing.T) {
	for _, tc := range []struct {
		res  []int64
		want admitReply
	}{
		{[]int64{0, 0, 1500, 1, 0, 7, 1, 0}, admitReply{kind: admitAdmitted, wait: 1500, registered: true, epoch: 7, plain: true}},
		{[]int64{0, 0, 0, 0, 1, 3, 0, 1}, admitReply{kind: admitAdmitted, probe: true, epoch: 3, untracked: true}},
		{[]int64{1, 9000, 0, 0, 0, 0, 0}, admitReply{kind: admitGateClosed, until: 9000}},
		{[]int64{2, 0, 250, 0, 0, 0, 0}, admitReply{kind: admitPaceDenied, wait: 250}},
		{[]int64{3, 8000, 0, 0, 0, 0, 0}, admitReply{kind: admitBreakerOpen, until: 8000}},
		{[]int64{4, 0, 100000, 0, 0, 0, 0}, admitReply{kind: admitHeld, wait: 100000}},
	} {
		got, err := decodeAdmit(tc.res)
		if err != nil || got != tc.want {
			t.Errorf("decodeAdmit(%v) = %+v, %v; want %+v", tc.res, got, err, tc.want)
		}
	}
	for _, bad := range [][]int64{
		{5, 0, 0, 0, 0, 0, 0},  // a kind the script does not name
		{-1, 0, 0, 0, 0, 0, 0}, // nor this
		{0, 0, 0, 2, 0, 0, 0},  // registered 2
		{0, 0, 0, 0, 2, 0, 0},  // probe 2
		{0, 0, 0, 0, 0, 0, 2},  // plain 2
		{0, 0, 0, 0, 0, 0, 0, 2},
		{2, 0, -5, 0, 0, 0, 0}, // a negative wait
		{0, 0, 0, 0, 0, 0},     // short
		{0, 0, 0, 0, 0, 0, 0, 0, 0},
		nil,
	} {
		_, err := decodeAdmit(bad)
		if store.CauseOf(err) != store.CauseUnexpected || !strings.Contains(err.Error(), "admit") {
			t.Errorf("decodeAdmit(%v): err %v, want an unexpected answer of admit", bad, err)
		}
	}
}

// TestDecodeComplete reads completeScript's answers and refuses a breaker
// change it does not know, a flag other than 0 or 1 and a short answer.
func TestDecodeComplete(t *testing.T) {
	got, err := decodeComplete("observe", []int64{5000, 1, 7000, int64(store.BreakerOpened), 1})
	want := completeReply{closedUntil: 5000, allowed: true, breakerUntil: 7000, change: store.BreakerOpened, untracked: true}
	if err != nil || got != want {
		t.Errorf("decodeComplete = %+v, %v; want %+v", got, err, want)
	}
	for _, bad := range [][]int64{
		{0, 1, 0, int64(store.BreakerClosed) + 1, 0},
		{0, 1, 0, -1, 0},
		{0, 2, 0, 0, 0},
		{0, 1, 0, 0, 2},
		{0, 1, 0, 0},
	} {
		_, err := decodeComplete("complete", bad)
		if store.CauseOf(err) != store.CauseUnexpected || !strings.Contains(err.Error(), "complete") {
			t.Errorf("decodeComplete(%v): err %v, want an unexpected answer of complete", bad, err)
		}
	}
}

// TestLuaKindsNameEveryKind: the Lua names of admitScript's kinds are made
// from admitKind, one each, and the script uses no kind by number.
func TestLuaKindsNameEveryKind(t *testing.T) {
	names, values, ok := strings.Cut(strings.TrimSpace(strings.TrimPrefix(luaKinds, "\nlocal ")), " = ")
	if !ok || len(strings.Split(names, ", ")) != int(admitKinds) || len(strings.Split(values, ", ")) != int(admitKinds) {
		t.Fatalf("luaKinds = %q: want %d names and values", luaKinds, admitKinds)
	}
	for _, lit := range []string{"ret({0,", "ret({1,", "ret({2,", "ret({3,", "ret({4,", "res[1] == 0", "res[1] == 1", "res[1] == 3", "res[1] == 4"} {
		if strings.Contains(luaAdmit, lit) {
			t.Errorf("admit.lua uses a kind by number: %q", lit)
		}
	}
}
