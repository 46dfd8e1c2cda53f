package redisstore

import (
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrybroker/retrybroker/internal/store"
)

// Times in the scripts are Unix microseconds held in Lua numbers (doubles),
// exact up to 2^53 µs (year 2255). Integers are written with
// string.format('%d') so that no value is stored in exponent form.

// luaBudget holds the budget helpers shared by both scripts. A budget hash
// holds, per bucket i = second % window: s<i> = the second counted,
// q<i> = first attempts, r<i> = retries; and kx, until when the hash lives
// (Unix µs, as last set), so that its TTL is raised once a window rather
// than on every count.
const luaBudget = `
local function fmt(n) return string.format('%d', n) end

local function num(v) return tonumber(v or '') or 0 end

-- budget_add counts n first attempts (kind 'q') or retries ('r') in the
-- bucket of second sec, unless that bucket already counts a later second
-- (sec then left the window).
local function budget_add(key, now, sec, window, kind, n, margin_ms)
  local stamp = fmt(sec)
  local i = fmt(sec % window)
  local v = redis.call('HMGET', key, 's' .. i, 'kx')
  local cur = tonumber(v[1] or '')
  if cur and cur > sec then return end
  -- The hash lives its window plus the margin after now; when that passes
  -- kx, kx is raised one window more.
  local need = now + window * 1000000 + margin_ms * 1000
  local kx = num(v[2])
  local keep = kx < need
  if keep then kx = need + window * 1000000 end
  if cur ~= sec then
    local q, r = '0', '0'
    if kind == 'q' then q = fmt(n) else r = fmt(n) end
    if keep then
      redis.call('HSET', key, 's' .. i, stamp, 'q' .. i, q, 'r' .. i, r, 'kx', fmt(kx))
    else
      redis.call('HSET', key, 's' .. i, stamp, 'q' .. i, q, 'r' .. i, r)
    end
  else
    redis.call('HINCRBY', key, kind .. i, n)
    if keep then redis.call('HSET', key, 'kx', fmt(kx)) end
  end
  if keep then
    redis.call('PEXPIRE', key, fmt(math.ceil((kx - now) / 1000)))
  end
end

local function budget_bump(key, now, window, kind, margin_ms)
  budget_add(key, now, math.floor(now / 1000000), window, kind, 1, margin_ms)
end

local function budget_sums(key, now, window)
  local sec = math.floor(now / 1000000)
  local h = redis.call('HGETALL', key)
  local t = {}
  for j = 1, #h, 2 do
    t[h[j]] = h[j + 1]
  end
  local q, r = 0, 0
  for i = 0, window - 1 do
    local stamp = tonumber(t['s' .. i])
    if stamp and stamp > sec - window and stamp <= sec then
      q = q + (tonumber(t['q' .. i]) or 0)
      r = r + (tonumber(t['r' .. i]) or 0)
    end
  end
  return q, r
end
`

// luaGate holds the gate helpers shared by the scripts. A quota hash holds
// r = the known remaining count, w = the window's first reset µs (its
// identity) and u = the window's latest reset µs; see
// store.Observation.HasQuota for the rules, and memstore for the same code
// in Go.
const luaGate = `
local function quota_read(key, now)
  local q = redis.call('HMGET', key, 'r', 'w', 'u')
  local u = tonumber(q[3] or '')
  if not u or u <= now then return nil end
  return tonumber(q[1] or '') or 0, tonumber(q[2] or '') or u, u
end

-- quota_apply records one observed quota and returns until when the quota
-- hash now lives (0 when it holds nothing), and whether the gate had no
-- live quota before (it became known).
local function quota_apply(key, now, remaining, reset, tol, margin)
  local r, w, u = quota_read(key, now)
  if r and reset < w - tol then
    return u, false -- a late response from an older window
  end
  if reset <= now then
    redis.call('DEL', key) -- the window already reset
    return 0, false
  end
  local fresh = not r
  if not r or reset > w + tol then
    r, w, u = remaining, reset, reset -- a new window
  else
    r, u = math.min(r, remaining), math.max(u, reset) -- the same window
  end
  redis.call('HSET', key, 'r', fmt(r), 'w', fmt(w), 'u', fmt(u))
  redis.call('PEXPIRE', key, fmt(math.ceil((u - now) / 1000) + margin))
  return u, fresh
end

-- closed_until returns until when the gate is closed at now (0 = open),
-- given its stored closed-until time g: g, or later the known quota's reset
-- while the calls in flight use up the known remaining count. Its second
-- result tells whether the gate has a known quota at now.
local function closed_until(g, fkey, qkey, now)
  if g <= now then g = 0 end
  local r, w, u = quota_read(qkey, now)
  if r and u > g then
    if r - redis.call('ZCOUNT', fkey, '(' .. fmt(now), '+inf') <= 0 then
      g = u
    end
  end
  return g, r ~= nil
end
`

// luaState holds the helpers of the gate's state hash: its learned quota,
// its probe slot and its breaker (see doc.go, "Keys", for the fields, and
// memstore for the same rules in Go). Parts that expired read as absent.
//
// A script reads the hash once (state_read), buffers its writes in s.w
// (put) and writes them in one HSET (state_commit), so that an Admit on a
// gate with learning and the breaker on reads and writes the hash once
// each. The hash also caches kx, until when the key lives, and ix, the
// gate's score in the tenant's index, so that neither its TTL nor the
// index is touched on every call.
const luaState = `
-- SLACK is the most a key's TTL (or a gate's index score) is raised
-- beyond its need, so that a gate in steady use raises them now and then,
-- not on every call: by a quarter of its remaining life, at most 5 minutes.
local SLACK = 300000000

-- state_read reads the state hash in one HMGET, with the breaker's bucket
-- of now (bs<i>, bc<i>, bf<i>) when w, the breaker window in seconds, is
-- not 0.
local function state_read(key, now, w)
  local v
  local bi = ''
  if w > 0 then
    bi = fmt(math.floor(now / 1000000) % w)
    v = redis.call('HMGET', key, 'le', 'lp', 'lk', 'lL', 'la', 'ln', 'ld', 'lx', 'pi', 'px', 'pe', 'pl', 'pb',
      'bo', 'bk', 'br', 'bx', 'kx', 'ix', 'lc', 'lo', 'lr', 'lw', 'qs', 'bs' .. bi, 'bc' .. bi, 'bf' .. bi)
  else
    v = redis.call('HMGET', key, 'le', 'lp', 'lk', 'lL', 'la', 'ln', 'ld', 'lx', 'pi', 'px', 'pe', 'pl', 'pb',
      'bo', 'bk', 'br', 'bx', 'kx', 'ix', 'lc', 'lo', 'lr', 'lw', 'qs')
  end
  local s = {
    last = num(v[1]), learn = num(v[8]) > now,
    le = num(v[1]), lp = num(v[2]), lk = v[3] == '1', lL = num(v[4]),
    la = num(v[5]), ln = num(v[6]), ld = v[7] == '1', lx = num(v[8]),
    pi = v[9] or '', px = num(v[10]), pe = num(v[11]), pl = v[12] == '1', pb = v[13] == '1',
    bo = num(v[14]), bk = num(v[15]), br = num(v[16]), bx = num(v[17]),
    kx = num(v[18]), ix = num(v[19]),
    lc = num(v[20]), lo = num(v[21]), lr = num(v[22]), lw = num(v[23]), qs = num(v[24]),
    bi = bi, bs = num(v[25]), bc = num(v[26]), bf = num(v[27]),
    w = {},
  }
  if not s.learn then
    s.le, s.lp, s.lk, s.lL, s.la, s.ln, s.ld, s.lx = 0, 0, false, 0, 0, 0, false, 0
    s.lc, s.lo, s.lr, s.lw = 0, 0, 0, 0
  end
  if s.pi == '' or s.px <= now then
    s.pi, s.px, s.pe, s.pl, s.pb = '', 0, 0, false, false
  end
  if s.bx <= now then
    s.bo, s.bk, s.br, s.bx = 0, 0, 0, 0
  end
  return s
end

local function flag(b) if b then return '1' end return '0' end

-- put buffers one field write of the state hash.
local function put(s, f, v)
  local w = s.w
  w[#w + 1] = f
  w[#w + 1] = v
end

-- state_flush writes the buffered fields in one HSET.
local function state_flush(key, s)
  if #s.w > 0 then
    redis.call('HSET', key, unpack(s.w))
    s.w = {}
  end
end

local function learn_write(s)
  put(s, 'le', fmt(s.le)); put(s, 'lp', fmt(s.lp)); put(s, 'lk', flag(s.lk)); put(s, 'lL', fmt(s.lL))
  put(s, 'la', fmt(s.la)); put(s, 'ln', fmt(s.ln)); put(s, 'ld', flag(s.ld)); put(s, 'lx', fmt(s.lx))
  put(s, 'lc', fmt(s.lc)); put(s, 'lo', fmt(s.lo)); put(s, 'lr', fmt(s.lr)); put(s, 'lw', fmt(s.lw))
end

local function probe_write(s)
  put(s, 'pi', s.pi); put(s, 'px', fmt(s.px)); put(s, 'pe', fmt(s.pe)); put(s, 'pl', flag(s.pl)); put(s, 'pb', flag(s.pb))
end

local function probe_clear(key, s)
  state_flush(key, s)
  redis.call('HDEL', key, 'pi', 'px', 'pe', 'pl', 'pb')
  s.pi, s.px, s.pe, s.pl, s.pb = '', 0, 0, false, false
end

local function brk_write(s)
  put(s, 'bo', fmt(s.bo)); put(s, 'bk', fmt(s.bk)); put(s, 'br', fmt(s.br)); put(s, 'bx', fmt(s.bx))
end

-- brk_clear closes the breaker and clears its counts (every field starting
-- with 'b').
local function brk_clear(key, s)
  state_flush(key, s)
  local del = {}
  for _, f in ipairs(redis.call('HKEYS', key)) do
    if string.sub(f, 1, 1) == 'b' then del[#del + 1] = f end
  end
  for i = 1, #del, 1000 do
    redis.call('HDEL', key, unpack(del, i, math.min(i + 999, #del)))
  end
  s.bo, s.bk, s.br, s.bx, s.bs, s.bc, s.bf = 0, 0, 0, 0, 0, 0, 0
end

-- brk_bump counts calls and failures in the bucket of now (fields bs<i>,
-- the second counted, bc<i> and bf<i>, i = second % w), which state_read
-- read with the same w.
local function brk_bump(s, now, w, calls, fails)
  local sec = math.floor(now / 1000000)
  local i = s.bi
  if s.bs ~= sec then
    s.bs, s.bc, s.bf = sec, calls, fails
    put(s, 'bs' .. i, fmt(sec)); put(s, 'bc' .. i, fmt(calls)); put(s, 'bf' .. i, fmt(fails))
  else
    s.bc, s.bf = s.bc + calls, s.bf + fails
    if calls > 0 then put(s, 'bc' .. i, fmt(s.bc)) end
    if fails > 0 then put(s, 'bf' .. i, fmt(s.bf)) end
  end
  s.bx = math.max(s.bx, (sec + w) * 1000000)
end

local function brk_sums(key, s, now, w)
  state_flush(key, s)
  local sec = math.floor(now / 1000000)
  local f = {}
  for i = 0, w - 1 do
    f[#f + 1] = 'bs' .. i
    f[#f + 1] = 'bc' .. i
    f[#f + 1] = 'bf' .. i
  end
  local v = redis.call('HMGET', key, unpack(f))
  local calls, fails = 0, 0
  for j = 1, #v, 3 do
    local stamp = tonumber(v[j] or '')
    if stamp and stamp > sec - w and stamp <= sec then
      calls = calls + num(v[j + 1])
      fails = fails + num(v[j + 2])
    end
  end
  return calls, fails
end

-- brk_open opens the breaker at now for open_for × 2^k (k = s.bk failed
-- probes), at most max_open and never past limit; it is kept, half open,
-- max_open longer (and as long after its probe), never more than the gate
-- bound allows (limit - now).
local function brk_open(s, now, limit, open_for, max_open)
  local d = open_for
  for _ = 1, s.bk do
    if d > math.floor(max_open / 2) then
      d = max_open
      break
    end
    d = d * 2
  end
  d = math.min(d, max_open)
  s.bo = math.min(now + d, limit)
  s.br = math.min(max_open, limit - now)
  s.bx = math.max(s.bx, s.bo + s.br)
end
-- learn_settle records one result attributed to epoch (0 = none); probe
-- tells that it was the learning probe (or scout) of that epoch; closed is
-- the gate's closed-until time after the result's observation. It returns
-- whether the learned state changed. See memstore's learning.settle.
-- Results: 0 none, 1 accepted, 2 refused, 3 failed, 4 lost, 5 broken.
local function learn_settle(s, epoch, result, probe, closed)
  local changed = false
  if epoch ~= 0 and epoch == s.le then
    if result == 0 then
      s.la = math.max(s.la - 1, 0)
      changed = true
    elseif result == 2 or result == 3 then
      s.ln = s.ln + 1
      changed = true
    elseif result == 1 then
      if probe and s.lk then
        s.lL = s.lL + 1
        changed = true
      end
      if not s.lk then
        s.lc = s.lc + 1
        changed = true
      end
    end
  elseif epoch ~= 0 and epoch == s.lp and not s.ld then
    if result == 0 or result == 2 or result == 3 then
      s.lL = math.max(s.lL - 1, 0)
      changed = true
    end
  end
  if result == 2 and (epoch == 0 or epoch == s.le) and not s.ld then
    s.ld = true
    changed = true
  end
  if s.ld and closed > s.lr then
    s.lr = closed
    changed = true
  end
  return changed
end

-- state_plan works out until when the state hash must live: past its live
-- parts plus the margin (past now plus the margin when nothing is live, so
-- that no write leaves a key without a TTL). When that passes kx it raises
-- kx by a quarter of the remaining life more (at most SLACK) and returns
-- true as its second result: state_commit then sets the TTL. Its first
-- result is until when the parts live with the slack, less the margin
-- (0 = nothing live), for the index.
local function state_plan(s, now, margin)
  local need = 0
  if s.learn then need = math.max(need, s.lx) end
  if s.pi ~= '' then need = math.max(need, s.px) end
  if s.bx > now then need = math.max(need, s.bx) end
  local live = need > now
  if not live then need = now end
  local expire = false
  if s.kx < need + margin * 1000 then
    s.kx = need + margin * 1000 + math.min(math.floor((need - now) / 4), SLACK)
    put(s, 'kx', fmt(s.kx))
    expire = true
  end
  if not live then return 0, expire end
  return s.kx - margin * 1000, expire
end

-- state_commit writes the buffered fields, then the TTL state_plan asked
-- for (PEXPIRE needs the key to exist).
local function state_commit(key, s, now, expire)
  state_flush(key, s)
  if expire then
    redis.call('PEXPIRE', key, fmt(math.ceil((s.kx - now) / 1000)))
  end
end
`

// luaIndex holds the helpers of the tenant's gate index: a sorted set whose
// members name the tenant's gates (the part of their key names after the
// kind) and whose scores say when each gate frees, in µs. Key names are
// rebuilt from a member inside the scripts, so those keys are not declared
// in KEYS; they share the index's hash tag, hence its slot, so this holds
// on Redis Cluster too.
const luaIndex = `
-- index_state.untracked is 1 once index_touch refused a new gate in this
-- script (the tenant is full of promises): the script's answer says so.
local index_state = {untracked = 0}

-- index_promises returns, for the gates members[1..] (names after the
-- kind), until when each holds a promise to a provider at now, in µs (0 =
-- none): its closed-until time (a hint, or a quota reported exhausted) or
-- its open breaker. The rest of a gate's state is soft (see memstore's
-- promiseUntil). The g keys are read with one MGET; only the gates they do
-- not close have their breaker read.
local function index_promises(base, members, now)
  local names = {}
  for k, m in ipairs(members) do names[k] = base .. 'g:' .. m end
  local gs = redis.call('MGET', unpack(names))
  local out = {}
  for k, m in ipairs(members) do
    local p = tonumber(gs[k] or '') or 0
    if p <= now then
      p = 0
      local b = redis.call('HMGET', base .. 's:' .. m, 'bo', 'bx')
      local bo, bx = tonumber(b[1] or '') or 0, tonumber(b[2] or '') or 0
      if bo > now and bx > now then p = bo end
    end
    out[k] = p
  end
  return out
end

-- index_trim makes room in a full index and reports whether there is room:
-- it forgets the gates whose score passed (their keys expired by then),
-- then evicts, lowest-scored (soonest to free) first, the gates that hold
-- no promise, deleting their keys, until the index is 1/16 of the bound
-- below it. It never evicts a gate that holds a promise. When the gates
-- without one are fewer than that, it evicts them all and writes the
-- tenant's full key: until when enough promises end to make the whole
-- batch (promises end only as time passes), new gates are refused at the
-- cost of one GET. Members are read 500 at a time, in score order, until
-- the batch is found.
local function index_trim(idx, now, max_gates, margin)
  local base = string.sub(idx, 1, -2)
  local full = base .. 'full'
  local until_ = tonumber(redis.call('GET', full) or '')
  if until_ then
    if now < until_ then return false end
    redis.call('DEL', full)
  end
  redis.call('ZREMRANGEBYSCORE', idx, '-inf', fmt(now))
  local n = redis.call('ZCARD', idx)
  local drop = n - (max_gates - math.max(math.floor(max_gates / 16), 1))
  if drop <= 0 then return true end
  local victims, promised = {}, {}
  local from = 0
  while from < n and #victims < drop do
    local members = redis.call('ZRANGE', idx, from, from + 499)
    if #members == 0 then break end
    local ps = index_promises(base, members, now)
    for k, m in ipairs(members) do
      if #victims >= drop then break end
      if ps[k] > 0 then
        promised[#promised + 1] = ps[k]
      else
        victims[#victims + 1] = m
      end
    end
    from = from + #members
  end
  for _, m in ipairs(victims) do
    redis.call('DEL', base .. 'g:' .. m, base .. 'f:' .. m, base .. 'q:' .. m, base .. 's:' .. m)
  end
  for i = 1, #victims, 1000 do
    redis.call('ZREM', idx, unpack(victims, i, math.min(i + 999, #victims)))
  end
  local short = drop - #victims
  if short > 0 and #promised >= short then
    -- Every member was read: #promised = n - #victims >= short.
    table.sort(promised)
    local t = promised[short]
    redis.call('SET', full, fmt(t), 'PX', fmt(math.ceil((t - now) / 1000) + margin))
  end
  return redis.call('ZCARD', idx) < max_gates
end

-- index_touch records that the gate member holds state until free (µs,
-- margin included) and reports whether the gate is tracked. It writes the
-- index only when free is past the gate's score, and makes room first
-- when the gate is new to a full index; when no room can be made, it
-- deletes what the script wrote of the gate (its g, f, q and s keys),
-- sets index_state.untracked and returns false: the caller then writes
-- no more of it. s, when given, is the gate's state about to be
-- committed: its ix (the score last seen) spares the ZSCORE while free
-- stays below it, and is updated with what the index holds.
local function index_touch(idx, member, free, now, max_gates, margin, s)
  if s and s.ix >= free then return true end
  local cur = tonumber(redis.call('ZSCORE', idx, member) or '')
  if cur and cur >= free then
    if s then
      s.ix = cur
      put(s, 'ix', fmt(cur))
    end
    return true
  end
  if (not cur or cur <= now) and redis.call('ZCARD', idx) >= max_gates then
    if not index_trim(idx, now, max_gates, margin) then
      local base = string.sub(idx, 1, -2)
      redis.call('ZREM', idx, member)
      redis.call('DEL', base .. 'g:' .. member, base .. 'f:' .. member, base .. 'q:' .. member, base .. 's:' .. member)
      index_state.untracked = 1
      return false
    end
  end
  local score = free + math.min(math.floor((free - now) / 4), SLACK)
  redis.call('ZADD', idx, fmt(score), member)
  local keep = math.ceil((score - now) / 1000) + margin
  if redis.call('PTTL', idx) < keep then
    redis.call('PEXPIRE', idx, fmt(keep))
  end
  if s then
    s.ix = score
    put(s, 'ix', fmt(score))
  end
  return true
end
`

// luaPending applies the counts of attempts a replica admitted locally
// (see localAdmission), as admitScript would have counted them. The
// counts come as payloads in ARGV: the flush scripts take one, and
// admitScript, completeScript and inspectScript take them after their own
// arguments, so that a replica's operation on a gate sees, atomically and
// in order, every attempt it admitted before.
//
// A gate payload is: epoch (0 = none), attempts admitted in it, learning
// idle expiry µs (0 = learning off), breaker window s (0 = breaker off),
// the latest attempt's time µs, k, then k pairs of a Unix second and the
// calls admitted in it. The attempts count in the epoch only while it is
// the gate's current one; the learned state's idle expiry runs from the
// latest attempt; calls of seconds that left the breaker's window are
// dropped.
//
// A budget payload is: window s, the latest attempt's time µs, k, then k
// pairs of a Unix second and the first attempts admitted in it; seconds
// that left the window are dropped.
const luaPending = `
local function pending_gate(skey, ikey, member, margin, max_gates, i)
  local epoch, n = tonumber(ARGV[i]), tonumber(ARGV[i + 1])
  local expiry, w = tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3])
  local now, k = tonumber(ARGV[i + 4]), tonumber(ARGV[i + 5])
  local s = state_read(skey, now, w)
  local dirty = false
  if expiry > 0 and s.learn then
    if epoch ~= 0 and epoch == s.le and n > 0 then
      s.la = s.la + n
      put(s, 'la', fmt(s.la))
    end
    if now + expiry > s.lx then
      s.lx = now + expiry
      put(s, 'lx', fmt(s.lx))
    end
    dirty = true
  end
  if w > 0 then
    local cur = math.floor(now / 1000000)
    local bx = s.bx
    for j = i + 6, i + 5 + 2 * k, 2 do
      local sec, calls = tonumber(ARGV[j]), tonumber(ARGV[j + 1])
      if sec > cur - w and sec <= cur then
        local b = fmt(sec % w)
        local v = redis.call('HMGET', skey, 'bs' .. b, 'bc' .. b)
        local stamp = num(v[1])
        if stamp == sec then
          put(s, 'bc' .. b, fmt(num(v[2]) + calls))
        elseif stamp < sec then
          put(s, 'bs' .. b, fmt(sec)); put(s, 'bc' .. b, fmt(calls)); put(s, 'bf' .. b, '0')
        end
        s.bx = math.max(s.bx, (sec + w) * 1000000)
        dirty = true
      end
    end
    if s.bx ~= bx then brk_write(s) end
  end
  if dirty then
    local f, expire = state_plan(s, now, margin)
    if f > 0 then
      if not index_touch(ikey, member, f + margin * 1000 + 1000, now, max_gates, margin, s) then return i + 6 + 2 * k end
    end
    state_commit(skey, s, now, expire)
  end
  return i + 6 + 2 * k
end

local function pending_budget(bkey, margin, i)
  local window, now, k = tonumber(ARGV[i]), tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])
  local cur = math.floor(now / 1000000)
  for j = i + 3, i + 2 + 2 * k, 2 do
    local sec, n = tonumber(ARGV[j]), tonumber(ARGV[j + 1])
    if sec > cur - window and sec <= cur and n > 0 then
      budget_add(bkey, now, sec, window, 'q', n, margin)
    end
  end
  return i + 3 + 2 * k
end
`

const luaHelpers = luaBudget + luaGate + luaState + luaIndex + luaPending

// luaOrder holds the constants of one arrival order across replicas
// (OrderGrace, OrderPoll).
var luaOrder = "\nlocal ORDER_GRACE, ORDER_POLL = " + strconv.FormatInt(int64(OrderGrace/time.Microsecond), 10) + ", " +
	strconv.FormatInt(int64(OrderPoll/time.Microsecond), 10) + "\n"

// luaFirstWindow holds the first-window constants (store.SlowStartShare,
// store.SlowStartMax), from Go so that both stores use the same.
var luaFirstWindow = "\nlocal SLOW_SHARE, SLOW_MAX = " + strconv.Itoa(store.SlowStartShare) + ", " +
	strconv.Itoa(store.SlowStartMax) + "\n"

// admitScript checks the gate, the breaker, the learned quota and pacing,
// and registers an admitted attempt: in the in-flight set when the gate has
// a known quota (without one, it writes no in-flight key), in the probe
// slot when it goes as the probe. It counts the attempt for the learned
// quota and the breaker.
//
// KEYS: 1 gate, 2 in-flight set, 3 pacing TAT, 4 budget, 5 quota, 6 state,
// 7 index, 8 the replicas' queues (store.Order).
// ARGV: 1 now µs, 2 ticket id, 3 ticket TTL µs, 4 pacing interval µs (0 =
// no pacing), 5 burst, 6 max pacing wait µs, 7 budget window s (0 = do not
// count), 8 key margin ms, 9 learning ('1' or '0'), 10 learning idle
// expiry µs, 11 breaker ('1' or '0'), 12 breaker window s, 13 held poll
// µs, 14 gates per tenant, 15 index member, 16 first window ('1' or '0'),
// 17 scout hold µs, 18 replica (empty: no order), 19 arrival µs, 20 the
// replica's queue (see ret below), then optionally a gate payload of this
// replica's local admissions (see luaPending).
// Returns {kind, until µs, wait µs, registered (1 or 0), probe (1 or 0),
// epoch, plain (1 or 0)}: kind 0 admitted (wait = pacing wait; plain 1
// when the gate is plain, see localAdmission), 1 gate closed, 2 pace
// denied (wait = the wait), 3 breaker open, 4 held (wait = HeldFor).
var admitScript = redis.NewScript(luaHelpers + luaFirstWindow + luaOrder + `
if #ARGV > 20 then
  pending_gate(KEYS[6], KEYS[7], ARGV[15], tonumber(ARGV[8]), tonumber(ARGV[14]), 21)
end
local now = tonumber(ARGV[1])
local id = ARGV[2]
local ttl = tonumber(ARGV[3])
local margin = tonumber(ARGV[8])
local learn_on = ARGV[9] == '1'
local brk_on = ARGV[11] == '1'
local brk_w = tonumber(ARGV[12])
local max_gates = tonumber(ARGV[14])
local first = ARGV[16] == '1'

-- One arrival order across replicas (store.Order): ARGV[18] the replica
-- ('' = no order), ARGV[19] the attempt's arrival µs, ARGV[20] the
-- replica's queue at the gate, 'n,a1,d1,a2,d2,...' (n calls waiting, the
-- first ones listed oldest first, each its arrival and deadline µs, 0 for
-- none), '' when the attempt waits in no queue. KEYS[8] holds one entry
-- per replica with a queue: 'expiry,n,a1,d1,...'.
local ord_b = ARGV[18]
local ord_on = ord_b ~= ''
local ord_n = nil
-- ord_older counts the calls of entry v (another replica's queue) that
-- arrived before a, have waited longer than the held poll (ARGV[13]) and
-- still wait at now; -1 when the entry expired. Calls that arrived within
-- the last poll are not counted: their own replica's next question, at
-- most a poll away, serves them, and holding a call for them would make
-- every slot freed at one replica wait for another's poll. Unlisted calls
-- are taken as older (they can only hold a call).
local function ord_older(v, a)
  local f = {}
  for x in string.gmatch(v, '[^,]+') do f[#f + 1] = tonumber(x) end
  if (f[1] or 0) <= now then return -1 end
  local before = math.min(a, now - tonumber(ARGV[13]))
  local n, listed = 0, 0
  for j = 3, #f - 1, 2 do
    listed = listed + 1
    if f[j] >= before then return n end -- the rest arrived later
    if f[j + 1] == 0 or f[j + 1] > now then n = n + 1 end
  end
  return n + math.max((f[2] or 0) - listed, 0)
end
-- ord_ahead is the number of calls other replicas hold waiting on the
-- gate that arrived before this attempt (0 without an order).
local function ord_ahead()
  if not ord_on then return 0 end
  if ord_n then return ord_n end
  local a, n = tonumber(ARGV[19]), 0
  local all = redis.call('HGETALL', KEYS[8])
  for j = 1, #all, 2 do
    if all[j] ~= ord_b then
      local k = ord_older(all[j + 1], a)
      if k < 0 then redis.call('HDEL', KEYS[8], all[j]) else n = n + k end
    end
  end
  ord_n = n
  return n
end
-- ret records the replica's queue (ARGV[20]) as its entry, less the
-- asking call when it was admitted (it is the queue's head), living until
-- the head's next question (the answer's reopening or poll, or now: an
-- admitted head's successor asks at once) plus ORDER_GRACE; then it
-- returns res.
local function ret(res)
  if ord_on and ARGV[20] ~= '' then
    local f = {}
    for x in string.gmatch(ARGV[20], '[^,]+') do f[#f + 1] = x end
    local n, from = tonumber(f[1]), 2
    if res[1] == 0 and f[2] == ARGV[19] then
      n, from = n - 1, 4
    end
    if n <= 0 then
      redis.call('HDEL', KEYS[8], ord_b)
    else
      local nxt = now
      if res[1] == 1 or res[1] == 3 then
        nxt = math.max(res[2], now)
      elseif res[1] == 4 then
        nxt = now + res[3]
      end
      local exp = nxt + ORDER_GRACE
      local v = fmt(exp) .. ',' .. fmt(n)
      for j = from, #f do v = v .. ',' .. f[j] end
      redis.call('HSET', KEYS[8], ord_b, v)
      local ttl = math.ceil((exp - now) / 1000) + tonumber(ARGV[8])
      if redis.call('PTTL', KEYS[8]) < ttl then
        redis.call('PEXPIRE', KEYS[8], fmt(ttl))
      end
    end
  end
  return res
end
local g, known = closed_until(tonumber(redis.call('GET', KEYS[1]) or '0'), KEYS[2], KEYS[5], now)
if g > 0 then
  return ret({1, g, 0, 0, 0, 0, 0})
end

local s
local for_b, for_l, dirty = false, false, false
if learn_on or brk_on then
  local w = 0
  if brk_on then w = brk_w end
  s = state_read(KEYS[6], now, w)
end
if brk_on and s.bo > 0 then
  if s.bo > now then
    return ret({3, s.bo, 0, 0, 0, 0, 0})
  end
  for_b = true -- half open
end
local learn = learn_on and not known -- an announced quota takes precedence
local epoch_started = false -- the learned state is written whole, else only lx and la
local scout = false
if learn then
  -- A known quota whose window reset is a window nothing is known of: it
  -- starts with a scout, as a fresh gate does.
  local lapsed = first and s.qs > 0
  if lapsed then
    s.qs = 0
    put(s, 'qs', '0')
  end
  if not s.learn or lapsed then
    local w = 0
    if s.learn then w = s.lw end
    s.le, s.lp, s.lk, s.lL, s.la, s.ln, s.ld = math.max(now, s.last + 1), 0, false, 0, 0, 0, false
    s.lc, s.lo, s.lr, s.lw = 0, 0, 0, w
    epoch_started = true
  elseif s.ld then
    local w = s.lw
    if s.lo > 0 and s.lr > s.lo then
      -- The learned window: see memstore's nextWindow.
      local m = s.lr - s.lo
      if w == 0 then
        w = m
      elseif m <= 2 * w then
        w = math.max(w, m)
      end
    end
    local opened = s.lr
    if w > 0 and opened > 0 and now >= opened + w then
      opened = opened + math.floor((now - opened) / w) * w -- idle for a window or more
    end
    s.lp, s.le = s.le, math.max(now, s.le + 1)
    s.lk, s.lL, s.la, s.ln, s.ld = true, math.max(s.la - s.ln, 0), 0, 0, false
    s.lc, s.lo, s.lr, s.lw = 0, opened, 0, w
    epoch_started = true
  elseif s.lk and s.lw > 0 and s.lo > 0 and now >= s.lo + s.lw then
    -- A quiet window: a new epoch of the same L.
    local opened = s.lo + math.floor((now - s.lo) / s.lw) * s.lw
    s.lp, s.le = s.le, math.max(now, s.le + 1)
    s.la, s.ln, s.lc, s.lo, s.lr = 0, 0, 0, opened, 0
    epoch_started = true
  end
  s.learn, s.lx = true, now + tonumber(ARGV[10])
  for_l = s.lk and s.la >= s.lL
  if first and not s.lk and s.lc == 0 then
    for_l, scout = true, true
  end
  dirty = true
end
local probe = for_b or for_l

-- finish writes the state hash (in one HSET) and the index; free is until
-- when the attempt's other writes live.
local function finish(free)
  local expire = false
  if dirty then
    if epoch_started then
      learn_write(s)
    elseif learn then
      put(s, 'la', fmt(s.la))
      put(s, 'lx', fmt(s.lx))
    end
    local f
    f, expire = state_plan(s, now, margin)
    free = math.max(free, f)
  end
  if free > 0 then
    local st
    if dirty then st = s end
    if not index_touch(KEYS[7], ARGV[15], free + margin * 1000 + 1000, now, max_gates, margin, st) then dirty = false end
  end
  if dirty then
    state_commit(KEYS[6], s, now, expire)
  end
end

if probe and s.pi ~= '' then
  finish(0)
  return ret({4, 0, math.min(tonumber(ARGV[13]), s.px - now), 0, 0, 0, 0})
end
-- A learning probe goes only once the epoch's learned calls are back: an
-- accepted probe must show room beyond them, not win a race against the
-- slowest of them to the provider.
if for_l and not for_b then
  local first = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. fmt(now), '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  if #first > 0 then
    finish(0)
    return ret({4, 0, math.min(tonumber(ARGV[13]), tonumber(first[2]) - now), 0, 0, 0, 0})
  end
end
-- The probe (a scout, a learning probe, a half-open breaker's) is the
-- oldest waiting call of all replicas.
if probe and ord_ahead() >= 1 then
  finish(0)
  return ret({4, 0, ORDER_POLL, 0, 0, 0, 0})
end
-- In an epoch with a learned quota, the learned calls are registered in
-- flight (their Complete says they are back).
local learned = learn and s.lk and not probe
-- The calls other replicas hold that arrived before this one go first:
-- it goes only if the learned quota has room for them and for it.
if learned and ord_ahead() >= s.lL - s.la then
  finish(0)
  return ret({4, 0, ORDER_POLL, 0, 0, 0, 0})
end
if known and not probe and ord_ahead() > 0 then
  local r = quota_read(KEYS[5], now)
  if r and ord_ahead() >= r - redis.call('ZCOUNT', KEYS[2], '(' .. fmt(now), '+inf') then
    finish(0)
    return ret({4, 0, ORDER_POLL, 0, 0, 0, 0})
  end
end
if learn and first and not s.lk and not probe then
  -- Slow start: after the scout, a few calls per round trip, growing with
  -- those accepted, until a refusal gives L.
  local lim = 1 + math.floor(s.lc / SLOW_SHARE)
  if lim < SLOW_MAX then
    local inflight = redis.call('ZCOUNT', KEYS[2], '(' .. fmt(now), '+inf')
    if inflight >= lim then
      finish(0)
      return ret({4, 0, tonumber(ARGV[13]), 0, 0, 0, 0})
    end
    if ord_ahead() >= lim - inflight then
      finish(0)
      return ret({4, 0, ORDER_POLL, 0, 0, 0, 0})
    end
    learned = true
  end
end
local wait = 0
local interval = tonumber(ARGV[4])
if interval > 0 then
  local tat = tonumber(redis.call('GET', KEYS[3]) or '0')
  if tat < now then tat = now end
  local newtat = tat + interval
  wait = newtat - tonumber(ARGV[5]) * interval - now
  if wait < 0 then wait = 0 end
  if wait > tonumber(ARGV[6]) then
    finish(0)
    return ret({2, 0, wait, 0, 0, 0, 0})
  end
  redis.call('SET', KEYS[3], fmt(newtat), 'PX', fmt(math.max(1, math.ceil((newtat - now) / 1000))))
end
local window = tonumber(ARGV[7])
if window > 0 then
  budget_bump(KEYS[4], now, window, 'q', margin)
end
local free, registered, epoch = 0, 0, 0
if known or learned then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', fmt(now))
  redis.call('ZADD', KEYS[2], fmt(now + ttl), id)
  local keep = math.ceil(ttl / 1000) + margin
  if redis.call('PTTL', KEYS[2]) < keep then
    redis.call('PEXPIRE', KEYS[2], fmt(keep))
  end
  registered, free = 1, now + ttl
end
if learn then
  s.la = s.la + 1
  epoch = s.le
end
if probe then
  local px = now + ttl
  if scout then
    px = math.min(px, now + tonumber(ARGV[17])) -- a scout holds the others for a bounded time only
  end
  s.pi, s.px, s.pe, s.pl, s.pb = id, px, epoch, for_l, for_b
  probe_write(s)
  registered, dirty = 1, true
end
if brk_on then
  local bx = s.bx -- 0: no live breaker (its stale fields are overwritten)
  brk_bump(s, now, brk_w, 1, 0)
  if for_b then
    -- A half-open breaker outlives its probe as it outlives its open time.
    s.bx = math.max(s.bx, s.px + s.br)
  end
  if bx == 0 or s.bx ~= bx then
    brk_write(s)
  end
  dirty = true
end
finish(free)
local p = 0
if probe then p = 1 end
-- plain: the next attempts on this gate would be admitted the same way
-- while nothing but their counts changes (see localAdmission): no known
-- quota, no pacing, nothing registered, a closed breaker, and learning
-- (when on) in an epoch that learned nothing yet and was not ended.
local plain = 0
if not known and interval == 0 and registered == 0 and (not brk_on or s.bo == 0) and
    (not learn_on or (s.learn and not s.lk and not s.ld)) then
  plain = 1
end
return ret({0, 0, wait, registered, p, epoch, plain, index_state.untracked})
`)

// completeScript ends an attempt (or, with an empty ticket id, records a
// bare observation and spends from the budget: it then never writes the
// in-flight set), closes the gate as the observation asks, records its
// quota, spends a retry from the budget, and feeds the result to the probe
// slot, the learned quota and the breaker. Observe runs it too (observed
// '1': no attempt was admitted).
//
// KEYS: 1 gate, 2 in-flight set, 3 budget, 4 quota, 5 state, 6 index.
// ARGV: 1 now µs, 2 ticket id (empty = none), 3 close until µs (0 = none),
// 4 has quota ('1' or '0'), 5 remaining, 6 reset µs, 7 spend retry ('1' or
// '0'), 8 budget window s (0 = unlimited), 9 ratio, 10 floor total,
// 11 key margin ms, 12 quota window tolerance µs, 13 epoch (0 = none),
// 14 result (0 none, 1 accepted, 2 refused, 3 failed), 15 observed ('1' or
// '0'), 16 breaker ('1' or '0'), 17 breaker window s, 18 breaker min
// calls, 19 breaker failure ratio, 20 breaker open for µs, 21 breaker max
// open µs, 22 gate bound µs (now + max gate), 23 gates per tenant,
// 24 index member, 25 learning idle expiry µs, 26 the channel on which to
// publish the state key's name when the gate stops being plain (empty =
// none; see localAdmission); then optionally this replica's local
// admissions (see luaPending): "1" and a gate payload, or "0"; then "1"
// and a budget payload, or "0".
// Returns {closed until µs (0 = open), retry allowed (1 or 0), breaker
// open until µs (0 = not open), breaker change (0 none, 1 opened, 2
// reopened, 3 closed: store.BreakerChange)}.
var completeScript = redis.NewScript(luaHelpers + `
if #ARGV > 26 then
  local i = 28
  if ARGV[27] == '1' then
    i = pending_gate(KEYS[5], KEYS[6], ARGV[24], tonumber(ARGV[11]), tonumber(ARGV[23]), 28)
  end
  if ARGV[i] == '1' then
    pending_budget(KEYS[3], tonumber(ARGV[11]), i + 1)
  end
end
local now = tonumber(ARGV[1])
local ticket = ARGV[2]
local margin = tonumber(ARGV[11])
local result = tonumber(ARGV[14])
local observed = ARGV[15] == '1'
local limit = tonumber(ARGV[22])
local free = 0
if ticket ~= '' then
  redis.call('ZREM', KEYS[2], ticket)
end
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
local target = cur
local until_ = tonumber(ARGV[3])
if until_ > now and until_ > target then
  target = until_
end
if ARGV[4] == '1' then
  local reset = tonumber(ARGV[6])
  if reset > now and reset > target and tonumber(ARGV[5]) <= 0 then
    target = reset
  end
end
if target > cur then
  redis.call('SET', KEYS[1], fmt(target), 'PX', fmt(math.ceil((target - now) / 1000) + margin))
  free = target
end
-- notify: the gate stops being plain (see admitScript) for replicas that
-- admit it locally: it closed, its quota became known, its learning epoch
-- ended, or its breaker changed.
local notify = target > cur and target > now
local quota_reset = 0 -- the reset of a known quota, for its lapse (state field qs)
if ARGV[4] == '1' then
  local u, fresh = quota_apply(KEYS[4], now, tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[12]), margin)
  free = math.max(free, u)
  notify = notify or fresh
  quota_reset = u
end
local allowed = 1
local window = tonumber(ARGV[8])
if ARGV[7] == '1' and window > 0 then
  local q, r = budget_sums(KEYS[3], now, window)
  if r + 1 <= tonumber(ARGV[9]) * q + tonumber(ARGV[10]) then
    budget_bump(KEYS[3], now, window, 'r', margin)
  else
    allowed = 0
  end
end

local brk_w = 0
if ARGV[16] == '1' then brk_w = tonumber(ARGV[17]) end
local s = state_read(KEYS[5], now, brk_w)
local was_ended = s.ld
local dirty = false
local pr_l, pr_b = false, false -- the attempt was the probe (for learning, for the breaker)
local epoch = tonumber(ARGV[13])
if ticket ~= '' and s.pi == ticket then
  pr_l, pr_b = s.pl and s.pe == epoch, s.pb
  probe_clear(KEYS[5], s)
  dirty = true
end
if s.learn and quota_reset > s.qs then
  s.qs = quota_reset
  put(s, 'qs', fmt(s.qs))
  dirty = true
end
if s.learn then
  local changed = learn_settle(s, epoch, result, pr_l, target)
  if s.ld and target + tonumber(ARGV[25]) > s.lx then
    -- The idle time of an ended epoch runs from the reopening: a long
    -- close does not forget what the next epoch needs.
    s.lx, changed = target + tonumber(ARGV[25]), true
  end
  if changed then
    learn_write(s)
    dirty = true
  end
end
local open_for, max_open = tonumber(ARGV[20]), tonumber(ARGV[21])
local change = 0 -- 1 opened, 2 reopened, 3 closed
if s.bo > 0 then
  if pr_b or (observed and s.bo <= now) then
    if result == 1 or result == 2 then
      brk_clear(KEYS[5], s)
      dirty, change = true, 3
    elseif result == 3 or result == 5 then
      s.bk = s.bk + 1
      brk_open(s, now, limit, open_for, max_open)
      brk_write(s)
      dirty, change = true, 2
    end
  end
elseif ARGV[16] == '1' then
  local calls, fails = 0, 0
  if observed and result ~= 0 and result ~= 4 then calls = 1 end
  if result == 3 or result == 5 then fails = 1 end
  if calls + fails > 0 then
    local w = brk_w
    brk_bump(s, now, w, calls, fails)
    if fails > 0 then
      local c, f = brk_sums(KEYS[5], s, now, w)
      if c >= tonumber(ARGV[18]) and f >= tonumber(ARGV[19]) * c then
        brk_open(s, now, limit, open_for, max_open)
        change = 1
      end
    end
    brk_write(s)
    dirty = true
  end
end
local expire = false
if dirty then
  local f
  f, expire = state_plan(s, now, margin)
  free = math.max(free, f)
end
if free > 0 then
  local st
  if dirty then st = s end
  if not index_touch(KEYS[6], ARGV[24], free + margin * 1000 + 1000, now, tonumber(ARGV[23]), margin, st) then dirty = false end
end
if dirty then
  state_commit(KEYS[5], s, now, expire)
end

local g = closed_until(target, KEYS[2], KEYS[4], now)
local bo = 0
if s.bo > now then bo = s.bo end
if ARGV[26] ~= '' and (notify or change ~= 0 or (s.ld and not was_ended)) then
  redis.call('PUBLISH', ARGV[26], KEYS[5])
end
return {g, allowed, bo, change, index_state.untracked}
`)

// flushGateScript records on a gate what attempts admitted locally did
// (see luaPending).
//
// KEYS: 1 state, 2 index.
// ARGV: 1 key margin ms, 2 gates per tenant, 3 index member, then a gate
// payload (see luaPending).
// Returns 1.
var flushGateScript = redis.NewScript(luaHelpers + `
pending_gate(KEYS[1], KEYS[2], ARGV[3], tonumber(ARGV[1]), tonumber(ARGV[2]), 4)
return 1
`)

// flushBudgetScript counts in a tenant's budget the first attempts
// admitted locally (see luaPending).
//
// KEYS: 1 budget.
// ARGV: 1 key margin ms, then a budget payload (see luaPending).
// Returns 1.
var flushBudgetScript = redis.NewScript(luaHelpers + `
pending_budget(KEYS[1], tonumber(ARGV[1]), 2)
return 1
`)

// stateScript reads the gate's state, as admitScript checks it.
//
// KEYS: 1 gate, 2 in-flight set, 3 quota, 4 state.
// ARGV: 1 now µs.
// Returns {closed until µs (0 = open), breaker open until µs (0 = not
// open)}.
var stateScript = redis.NewScript(luaHelpers + `
local now = tonumber(ARGV[1])
local g = closed_until(tonumber(redis.call('GET', KEYS[1]) or '0'), KEYS[2], KEYS[3], now)
local bo = num(redis.call('HGET', KEYS[4], 'bo'))
if bo <= now or num(redis.call('HGET', KEYS[4], 'bx')) <= now then bo = 0 end
return {g, bo}
`)

// inspectScript reads one gate's state for the admin view; it writes
// nothing but this replica's local admissions, when given.
//
// KEYS: 1 gate, 2 in-flight set, 3 quota, 4 state, 5 index.
// ARGV: 1 now µs, 2 key margin ms, 3 gates per tenant, 4 index member,
// then optionally a gate payload (see luaPending).
// Returns {closed until µs, breaker open until µs, in flight, quota known
// (1 or 0), remaining, reset µs, learning (1 or 0), epoch, admitted, not
// accepted, learned (1 or 0), L, probe in flight (1 or 0)}.
var inspectScript = redis.NewScript(luaHelpers + `
if #ARGV > 4 then
  pending_gate(KEYS[4], KEYS[5], ARGV[4], tonumber(ARGV[2]), tonumber(ARGV[3]), 5)
end
local now = tonumber(ARGV[1])
local g, known = closed_until(tonumber(redis.call('GET', KEYS[1]) or '0'), KEYS[2], KEYS[3], now)
local s = state_read(KEYS[4], now, 0)
local bo = 0
if s.bo > now then bo = s.bo end
local r, w, u = quota_read(KEYS[3], now)
local flight = redis.call('ZCOUNT', KEYS[2], '(' .. fmt(now), '+inf')
local function b(x) if x then return 1 end return 0 end
return {g, bo, flight, b(r ~= nil), r or 0, u or 0, b(s.learn), s.le, s.la, s.ln, b(s.lk), s.lL, b(s.pi ~= '')}
`)
