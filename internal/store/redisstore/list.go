package redisstore

import (
	"context"
	"errors"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/retrybroker/retrybroker/internal/store"
)

var _ store.GateLister = (*Store)(nil)

// listChunk is how many gates one pipeline of a listing reads, and
// listReaders how many of them run at once.
const (
	listChunk   = 256
	listReaders = 4
)

// ListGates implements store.GateLister from the tenant's gate index: its
// members (at most the gate bound, see [WithMaxGatesPerTenant]), read
// 10,000 a ZRANGE and sorted here rather than in Redis, then one
// pipeline of plain reads per 256 gates of the page. Every key involved
// carries the tenant's hash tag, so on a Cluster they all live in one slot
// and each call goes to one node. The order is that of the index members
// (scope and credential, escaped, joined by ':'). Counts of attempts this
// replica admitted locally (see [WithLocalAdmission]) and has not flushed
// yet are not included.
func (s *Store) ListGates(ctx context.Context, req store.ListGatesRequest) (store.GatePage, error) {
	limit := store.ClampListLimit(req.Limit)
	members, err := s.listMembers(ctx, req.Tenant, req.After != "")
	if err != nil {
		return store.GatePage{}, err
	}
	members = members[sort.Search(len(members), func(i int) bool { return members[i] > req.After }):]
	now := micros(req.Now)
	var page store.GatePage
	// Rounds of limit members, each read listChunk gates a pipeline,
	// listReaders at once, then kept in order until the page is full.
	for i := 0; i < len(members); i += limit {
		round := members[i:min(i+limit, len(members))]
		res := make([][]int64, (len(round)+listChunk-1)/listChunk)
		var eg errgroup.Group
		eg.SetLimit(listReaders)
		for c := range res {
			part := round[c*listChunk : min((c+1)*listChunk, len(round))]
			eg.Go(func() error {
				r, err := s.readGates(ctx, req.Tenant, part, now)
				res[c] = r
				return err
			})
		}
		if err := eg.Wait(); err != nil {
			return store.GatePage{}, err
		}
		for j, m := range round {
			r := res[j/listChunk][13*(j%listChunk):]
			info := infoOf(r[:13])
			if info == (store.GateInfo{}) || (req.Match != nil && !req.Match(info)) {
				continue
			}
			g, ok := s.keys.fromMember(req.Tenant, m)
			if !ok {
				return store.GatePage{}, unexpected("list gates", m)
			}
			page.Gates = append(page.Gates, store.ListedGate{Key: g, Info: info})
			if len(page.Gates) == limit {
				if i+j+1 < len(members) {
					page.Next = m
				}
				return page, nil
			}
		}
	}
	return page, nil
}

// Bounds of memberCache.
const (
	// memberCacheTTL is how long a listing's sorted index members serve
	// its next pages.
	memberCacheTTL = 2 * time.Second
	// memberCacheTenants is how many tenants' members are kept at once.
	memberCacheTenants = 4
	// memberCacheMax is the most members kept for one tenant; a larger
	// index is read again for every page.
	memberCacheMax = 100_000
)

// memberCache keeps, for a few tenants and a short while, the sorted
// members of their gate index that a listing's first page read, so that
// the next pages need not read and sort the whole index again. A page
// that starts a listing (no After) always reads the index, so every gate
// held when the listing starts is in what its pages read; a gate created
// since may be missed, as the contract allows, and one dropped since reads
// as holding nothing and is skipped.
type memberCache struct {
	mu      sync.Mutex
	entries []memberEntry
}

type memberEntry struct {
	tenant  string
	members []string
	at      time.Time
}

func (c *memberCache) get(tenant string, now time.Time) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.entries {
		if e.tenant == tenant && now.Sub(e.at) < memberCacheTTL {
			return e.members
		}
	}
	return nil
}

func (c *memberCache) put(tenant string, members []string, now time.Time) {
	if len(members) > memberCacheMax {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	kept := c.entries[:0]
	for _, e := range c.entries {
		if e.tenant != tenant && now.Sub(e.at) < memberCacheTTL {
			kept = append(kept, e)
		}
	}
	if len(kept) == memberCacheTenants {
		kept = kept[1:] // the oldest
	}
	c.entries = append(kept, memberEntry{tenant, members, now})
}

// listMembers returns tenant's sorted index members: for a page that
// continues a listing, those a recent page read, when kept.
func (s *Store) listMembers(ctx context.Context, tenant string, continues bool) ([]string, error) {
	now := time.Now()
	if continues {
		if m := s.listed.get(tenant, now); m != nil {
			return m, nil
		}
	}
	m, err := s.indexMembers(ctx, tenant)
	if err != nil {
		return nil, err
	}
	s.listed.put(tenant, m, now)
	return m, nil
}

// indexChunk is how many index members one ZRANGE reads, so that no read
// holds Redis for long with a large gate bound.
const indexChunk = 10_000

// indexMembers returns the members of tenant's gate index, sorted and
// without duplicates, read indexChunk at a time by rank. With more members
// than one chunk, a gate whose score moves between two reads may be read
// twice (kept once) or, rarely, missed by this page.
func (s *Store) indexMembers(ctx context.Context, tenant string) ([]string, error) {
	var members []string
	for start := int64(0); ; start += indexChunk {
		part, err := s.client.ZRange(ctx, s.keys.index(tenant), start, start+indexChunk-1).Result()
		if err != nil {
			return nil, s.wrap("list gates", err)
		}
		members = append(members, part...)
		if len(part) < indexChunk {
			break
		}
	}
	slices.Sort(members)
	return slices.Compact(members), nil
}

// infoOf decodes one gate's 13 values of inspectScript's reply.
func infoOf(res []int64) store.GateInfo {
	info := store.GateInfo{
		Status:   store.GateStatus{ClosedUntil: timeOf(res[0]), BreakerOpenUntil: timeOf(res[1])},
		InFlight: res[2], HasQuota: res[3] == 1, Remaining: res[4],
		Learning: res[6] == 1, Epoch: res[7], Admitted: res[8], NotAccepted: res[9],
		Learned: res[10] == 1, LearnedQuota: res[11], ProbeInFlight: res[12] == 1,
	}
	if info.HasQuota {
		info.Reset = timeOf(res[5])
	}
	return info
}

// fromMember is the gate of tenant whose index member is m (see member).
func (k keys) fromMember(tenant, m string) (store.GateKey, bool) {
	scope, cred, ok := store.ParseGatePosition(m)
	return store.GateKey{Tenant: tenant, Scope: scope, Credential: cred}, ok
}

// readGates reads gates' state for the admin view's listing: what
// inspectScript returns for each (13 values a gate), by the same rules
// (luaGate's closed_until and quota_read, luaState's state_read, for the
// fields GateInfo shows), as plain commands in one pipeline (GET, ZCOUNT
// and HMGET, which the broker's documented ACL allows), so that Redis runs
// no script per gate: on a Cluster every key carries the tenant's hash
// tag, so the pipeline goes to one node. The commands of one gate are not
// one atomic read: a gate that changes at that instant may show a mix of
// its states before and after. It writes nothing and leaves out local
// admissions. The store suite's ListGatesShowsState holds it to
// inspectScript.
func (s *Store) readGates(ctx context.Context, tenant string, members []string, now int64) ([]int64, error) {
	base := s.keys.tenant(tenant)
	closed := make([]*redis.StringCmd, len(members))
	flights := make([]*redis.IntCmd, len(members))
	quotas := make([]*redis.SliceCmd, len(members))
	states := make([]*redis.SliceCmd, len(members))
	after := "(" + strconv.FormatInt(now, 10)
	_, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, m := range members {
			closed[i] = p.Get(ctx, base+"g:"+m)
			flights[i] = p.ZCount(ctx, base+"f:"+m, after, "+inf")
			quotas[i] = p.HMGet(ctx, base+"q:"+m, "r", "u")
			states[i] = p.HMGet(ctx, base+"s:"+m, "le", "lk", "lL", "la", "ln", "lx", "pi", "px", "bo", "bx")
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) { // Nil: a gate key not there (open)
		return nil, s.wrap("list gates", err)
	}
	for i := range members { // the pipeline reports its first error only
		for _, c := range []redis.Cmder{closed[i], flights[i], quotas[i], states[i]} {
			if err := c.Err(); err != nil && !errors.Is(err, redis.Nil) {
				return nil, s.wrap("list gates", err)
			}
		}
	}
	out := make([]int64, 0, 13*len(members))
	for i := range members {
		q, v := quotas[i].Val(), states[i].Val()
		if len(q) != 2 || len(v) != 10 {
			return nil, unexpected("list gates", len(v))
		}
		out = appendGate(out, replyNum(closed[i].Val()), flights[i].Val(), q, v, now)
	}
	return out, nil
}

// appendGate appends one gate's 13 values (see inspectScript) to out, from
// its closed-until time g, its calls in flight, its quota hash's r and u,
// and its state hash's fields as readGates reads them.
func appendGate(out []int64, g, flight int64, q, v []any, now int64) []int64 {
	if g <= now {
		g = 0
	}
	r, u := int64(0), replyNum(q[1])
	known := u > now
	if known {
		r = replyNum(q[0])
		if u > g && r-flight <= 0 {
			g = u
		}
	} else {
		u = 0
	}
	bo := int64(0)
	if replyNum(v[9]) > now && replyNum(v[8]) > now {
		bo = replyNum(v[8])
	}
	out = append(out, g, bo, flight, bit(known), r, u)
	if replyNum(v[5]) > now { // learning, until lx
		out = append(out, 1, replyNum(v[0]), replyNum(v[3]), replyNum(v[4]), bit(v[1] == "1"), replyNum(v[2]))
	} else {
		out = append(out, 0, 0, 0, 0, 0, 0)
	}
	pi, _ := v[6].(string)
	return append(out, bit(pi != "" && replyNum(v[7]) > now))
}

// replyNum reads a numeric field of a reply as the scripts' num does (a
// missing or unreadable value is 0; a fraction is cut, as a script's
// number is in its reply).
func replyNum(v any) int64 {
	str, ok := v.(string)
	if !ok || str == "" {
		return 0
	}
	if n, err := strconv.ParseInt(str, 10, 64); err == nil {
		return n
	}
	f, err := strconv.ParseFloat(str, 64)
	if err != nil || f != f {
		return 0
	}
	return int64(f)
}

func bit(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
