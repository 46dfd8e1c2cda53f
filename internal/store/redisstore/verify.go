package redisstore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// scripts are the store's scripts, preloaded by Open.
var scripts = []*redis.Script{admitScript, completeScript, stateScript}

// movedProbes is how many more hash tags a non-cluster client reads, after
// the full check, to find out whether it is talking to one node of a
// cluster: each lands on another slot, and a cluster of two or more
// masters answers MOVED to at least one of them (unless every one of 16
// fixed slots belongs to the node at hand).
const movedProbes = 15

// maxTagSearch bounds the search for a hash tag on each cluster master.
const maxTagSearch = 1 << 16

// Verify proves that the store's own operations work on what it is
// connected to: on reserved keys (prefix + "{v:N}:...", one set per
// verification, expiring within seconds), it records a known quota and
// spends a retry (complete script), admits and registers an attempt with
// pacing and a budget (admit script), reads the gate closed by that
// attempt (state script) and completes it (complete script), and checks
// every result. On a cluster it does so on every master, with a hash tag
// of that master's slots; on one server (or Sentinel's master) it then
// reads 15 more hash tags, so that a cluster behind a single-node client
// is found out by its MOVED replies. The error, an *Error, names the cause:
// store.CauseMoved, CauseNoPerm, CauseWrongPass, CauseOOM,
// CauseReadOnly, ... (see Classify), or store.CauseUnexpected for wrong
// results. It is safe to run from several replicas at once.
func (s *Store) Verify(ctx context.Context) error {
	if s.closed.Load() {
		return s.wrap("verify", redis.ErrClosed)
	}
	tags, err := s.verifyTags(ctx)
	if err != nil {
		return s.wrap("verify", err)
	}
	for _, tag := range tags {
		if err := s.verifyOn(ctx, tag); err != nil {
			return err
		}
	}
	if s.topology == Cluster {
		return nil
	}
	now := micros(time.Time{})
	for n := 1; n <= movedProbes; n++ {
		k := s.keys.verify(strconv.Itoa(n), s.idPrefix+"m")
		if _, err := stateScript.Run(ctx, s.client, []string{k.gate, k.inflight, k.quota}, now).Int64(); err != nil {
			return s.wrap("verify", err)
		}
	}
	return nil
}

// verifyTags returns the hash tags to verify on: "0" without a cluster; on
// a cluster, one tag owned by each master.
func (s *Store) verifyTags(ctx context.Context) ([]string, error) {
	cc, ok := s.client.(*redis.ClusterClient)
	if !ok {
		return []string{"0"}, nil
	}
	var mu sync.Mutex
	masters := map[string]bool{}
	if err := cc.ForEachMaster(ctx, func(_ context.Context, c *redis.Client) error {
		mu.Lock()
		defer mu.Unlock()
		masters[c.Options().Addr] = true
		return nil
	}); err != nil {
		return nil, err
	}
	var tags []string
	for n := 0; len(masters) > 0 && n < maxTagSearch; n++ {
		tag := strconv.Itoa(n)
		m, err := cc.MasterForKey(ctx, s.keys.verify(tag, "").gate)
		if err != nil {
			return nil, err
		}
		if addr := m.Options().Addr; masters[addr] {
			delete(masters, addr)
			tags = append(tags, tag)
		}
	}
	return tags, nil
}

// verifyOn runs the four checks of Verify on hash tag tag.
func (s *Store) verifyOn(ctx context.Context, tag string) error {
	id := s.idPrefix + "v" + strconv.FormatUint(s.nextID.Add(1), 36)
	k := s.keys.verify(tag, id)
	now := micros(time.Time{})
	reset := now + int64(2*time.Second/time.Microsecond)
	margin := s.marginMS
	step := func(what string, got, want []int64, err error) error {
		if err != nil {
			return s.wrap("verify", fmt.Errorf("%s: %w", what, err))
		}
		if !slices.Equal(got, want) {
			return unexpected("verify", fmt.Sprintf("from %s on tag %s: %v, want %v", what, tag, got, want))
		}
		return nil
	}
	// A known quota of 1 until reset, and a retry spent (budget of one
	// retry a second): the gate stays open, the retry is allowed.
	got, err := completeScript.Run(ctx, s.client, []string{k.gate, k.inflight, k.budget, k.quota},
		now, "", 0, "1", 1, reset, "1", 1, "0", "1", margin, s.tolUS).Int64Slice()
	if err := step("the complete script (quota, retry)", got, []int64{0, 1}, err); err != nil {
		return err
	}
	// An attempt admitted with pacing and a budget, and registered.
	got, err = admitScript.Run(ctx, s.client, []string{k.gate, k.inflight, k.pace, k.budget, k.quota},
		now, id, s.ticketTTL, 1, 1, 0, 1, margin).Int64Slice()
	if err := step("the admit script", got, []int64{0, 0, 0, 1}, err); err != nil {
		return err
	}
	// Its registration uses the known quota up: the gate is closed.
	v, err := stateScript.Run(ctx, s.client, []string{k.gate, k.inflight, k.quota}, now).Int64()
	if err := step("the state script", []int64{v}, []int64{reset}, err); err != nil {
		return err
	}
	// Completing it gives its share back: open again.
	got, err = completeScript.Run(ctx, s.client, []string{k.gate, k.inflight, k.budget, k.quota},
		now, id, 0, "0", 0, 0, "0", 0, "0", "0", margin, s.tolUS).Int64Slice()
	return step("the complete script (ticket)", got, []int64{0, 1}, err)
}
