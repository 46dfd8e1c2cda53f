package redisstore

import (
	"context"
	"slices"
	"sort"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/retrybroker/retrybroker/internal/store"
)

var _ store.GateLister = (*Store)(nil)

// listChunk is how many gates one inspectManyScript call reads.
const listChunk = 256

// ListGates implements store.GateLister from the tenant's gate index: its
// members (at most the gate bound, see [WithMaxGatesPerTenant]), read
// 10,000 a ZRANGE and sorted here rather than in Redis, then one
// read-only script call per 256 gates of the page. Every key involved
// carries the tenant's hash tag, so on a Cluster they all live in one slot
// and each call goes to one node. The order is that of the index members
// (scope and credential, escaped, joined by ':'). Counts of attempts this
// replica admitted locally (see [WithLocalAdmission]) and has not flushed
// yet are not included.
func (s *Store) ListGates(ctx context.Context, req store.ListGatesRequest) (store.GatePage, error) {
	limit := store.ClampListLimit(req.Limit)
	members, err := s.indexMembers(ctx, req.Tenant)
	if err != nil {
		return store.GatePage{}, err
	}
	members = members[sort.Search(len(members), func(i int) bool { return members[i] > req.After }):]
	now := micros(req.Now)
	var page store.GatePage
	for i := 0; i < len(members); i += listChunk {
		part := members[i:min(i+listChunk, len(members))]
		keys := make([]string, 0, 4*len(part))
		gates := make([]store.GateKey, len(part))
		for j, m := range part {
			g, ok := s.keys.fromMember(req.Tenant, m)
			if !ok {
				return store.GatePage{}, unexpected("list gates", m)
			}
			gates[j] = g
			keys = append(keys, s.keys.gate(g), s.keys.inflight(g), s.keys.quota(g), s.keys.state(g))
		}
		res, err := inspectManyScript.Run(ctx, s.client, keys, now).Int64Slice()
		if err != nil {
			return store.GatePage{}, s.wrap("list gates", err)
		}
		if len(res) != 13*len(part) {
			return store.GatePage{}, unexpected("list gates", len(res))
		}
		for j := range part {
			info := infoOf(res[13*j : 13*j+13])
			if info == (store.GateInfo{}) || (req.Match != nil && !req.Match(info)) {
				continue
			}
			page.Gates = append(page.Gates, store.ListedGate{Key: gates[j], Info: info})
			if len(page.Gates) == limit {
				if i+j+1 < len(members) {
					page.Next = part[j]
				}
				return page, nil
			}
		}
	}
	return page, nil
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
	scope, cred, ok := strings.Cut(m, ":")
	if !ok {
		return store.GateKey{}, false
	}
	sc, ok1 := unescape(scope)
	cr, ok2 := unescape(cred)
	if !ok1 || !ok2 {
		return store.GateKey{}, false
	}
	return store.GateKey{Tenant: tenant, Scope: sc, Credential: cr}, true
}

// unescape reverses escape: ok is false for a string escape cannot
// return.
func unescape(s string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '%' {
			if !keep(c) {
				return "", false
			}
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(s) {
			return "", false
		}
		hi, lo := unhex(s[i+1]), unhex(s[i+2])
		if hi < 0 || lo < 0 {
			return "", false
		}
		b.WriteByte(byte(hi<<4 | lo))
		i += 2
	}
	return b.String(), true
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// inspectManyScript reads gates' state for the admin view's listing: per
// gate what inspectScript returns, by the same rules (luaGate's
// closed_until and quota_read, luaState's state_read, for the fields
// GateInfo shows), with four reads and no tables per gate, since a page
// reads up to 1000 gates in a few calls; it writes nothing and leaves out
// local admissions. The store suite's ListGatesShowsState holds it to
// inspectScript.
//
// KEYS: per gate, 1 gate, 2 in-flight set, 3 quota, 4 state.
// ARGV: 1 now µs.
// Returns, per gate, inspectScript's 13 values.
var inspectManyScript = redis.NewScript(`
local now = tonumber(ARGV[1])
local out, n = {}, 0
local function num(v) return tonumber(v or '') or 0 end
local function push(v) n = n + 1; out[n] = v end
for i = 1, #KEYS, 4 do
  local g = num(redis.call('GET', KEYS[i]))
  if g <= now then g = 0 end
  local flight = redis.call('ZCOUNT', KEYS[i + 1], '(' .. string.format('%d', now), '+inf')
  local q = redis.call('HMGET', KEYS[i + 2], 'r', 'u')
  local r, u = 0, num(q[2])
  local known = u > now
  if known then
    r = num(q[1])
    if u > g and r - flight <= 0 then g = u end
  else
    u = 0
  end
  local v = redis.call('HMGET', KEYS[i + 3], 'le', 'lk', 'lL', 'la', 'ln', 'lx', 'pi', 'px', 'bo', 'bx')
  local learn = num(v[6]) > now
  local bo = 0
  if num(v[10]) > now and num(v[9]) > now then bo = num(v[9]) end
  push(g); push(bo); push(flight)
  if known then push(1) else push(0) end
  push(r); push(u)
  if learn then
    push(1); push(num(v[1])); push(num(v[4])); push(num(v[5]))
    if v[2] == '1' then push(1) else push(0) end
    push(num(v[3]))
  else
    push(0); push(0); push(0); push(0); push(0); push(0)
  end
  if (v[7] or '') ~= '' and num(v[8]) > now then push(1) else push(0) end
end
return out
`)
