package memstore

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

// TestInflightMatchesAScan drives the in-flight set and a plain map (what
// the gate held before) with the same random registrations, completions,
// prunes and queries at times before and after expiries, and checks that
// every answer is the map's.
func TestInflightMatchesAScan(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		var f *inflight
		ref := map[string]int64{}
		now := int64(1_000_000)
		next := 0
		for step := range 3000 {
			now += rng.Int64N(50)
			switch op := rng.IntN(10); {
			case op < 4: // register, expiring out of order within jitter
				if f == nil {
					f = new(inflight)
				}
				id := "m" + strconv.Itoa(next)
				next++
				exp := now + 500 + rng.Int64N(200) - 100
				f.add(id, exp)
				ref[id] = exp
			case op < 7 && len(ref) > 0: // complete one
				for id := range ref {
					f.remove(id)
					delete(ref, id)
					break
				}
			case op == 7: // prune at now
				f.prune(now)
				for id, exp := range ref {
					if exp <= now {
						delete(ref, id)
					}
				}
			default: // the set's bound on every expiry
				for _, exp := range ref {
					if f.latest < exp {
						t.Fatalf("seed %d step %d: latest %d is before a registration's expiry %d", seed, step, f.latest, exp)
					}
				}
			}
			if f.len() != len(ref) {
				t.Fatalf("seed %d step %d: len %d, want %d", seed, step, f.len(), len(ref))
			}
			// Queries at earlier and later times than now see the same
			// registrations a scan does.
			for _, at := range []int64{now - 300, now, now + 250, now + 450, now + 650} {
				n, first := f.live(at)
				wn, wfirst := int64(0), int64(0)
				for _, exp := range ref {
					if exp > at {
						wn++
						if wfirst == 0 || exp < wfirst {
							wfirst = exp
						}
					}
				}
				if n != wn || first != wfirst {
					t.Fatalf("seed %d step %d: live(%d) = %d, %d; a scan says %d, %d", seed, step, at, n, first, wn, wfirst)
				}
			}
		}
	}
}

// TestInflightRemoveUnknown: completing a ticket the set never held (or
// already dropped) changes nothing, on a set and on none.
func TestInflightRemoveUnknown(t *testing.T) {
	var none *inflight
	none.remove("m1")
	none.prune(10)
	if n, first := none.live(0); n != 0 || first != 0 || none.len() != 0 {
		t.Fatalf("nil set: live %d, %d, len %d", n, first, none.len())
	}
	f := new(inflight)
	f.add("m1", 100)
	f.remove("m2")
	f.remove("m1")
	f.remove("m1")
	if f.len() != 0 || f.latest != 0 {
		t.Fatalf("len %d, latest %d after removing the only registration", f.len(), f.latest)
	}
	f.add("m3", 50)
	f.add("m3", 80) // the same ticket again moves it
	if n, first := f.live(60); n != 1 || first != 80 {
		t.Fatalf("live(60) = %d, %d, want 1, 80", n, first)
	}
}
