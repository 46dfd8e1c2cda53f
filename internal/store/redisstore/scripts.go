package redisstore

import "github.com/redis/go-redis/v9"

// Times in the scripts are Unix microseconds held in Lua numbers (doubles),
// exact up to 2^53 µs (year 2255). Integers are written with
// string.format('%d') so that no value is stored in exponent form.

// luaBudget holds the budget helpers shared by both scripts. A budget hash
// holds, per bucket i = second % window: s<i> = the second counted,
// q<i> = first attempts, r<i> = retries.
const luaBudget = `
local function fmt(n) return string.format('%d', n) end

local function num(v) return tonumber(v or '') or 0 end

local function budget_bump(key, now, window, kind, margin_ms)
  local sec = math.floor(now / 1000000)
  local i = fmt(sec % window)
  local stamp = redis.call('HGET', key, 's' .. i)
  if stamp ~= fmt(sec) then
    redis.call('HSET', key, 's' .. i, fmt(sec), 'q' .. i, '0', 'r' .. i, '0')
  end
  redis.call('HINCRBY', key, kind .. i, 1)
  redis.call('PEXPIRE', key, fmt(window * 1000 + margin_ms))
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
-- hash now lives (0 when it holds nothing).
local function quota_apply(key, now, remaining, reset, tol, margin)
  local r, w, u = quota_read(key, now)
  if r and reset < w - tol then
    return u -- a late response from an older window
  end
  if reset <= now then
    redis.call('DEL', key) -- the window already reset
    return 0
  end
  if not r or reset > w + tol then
    r, w, u = remaining, reset, reset -- a new window
  else
    r, u = math.min(r, remaining), math.max(u, reset) -- the same window
  end
  redis.call('HSET', key, 'r', fmt(r), 'w', fmt(w), 'u', fmt(u))
  redis.call('PEXPIRE', key, fmt(math.ceil((u - now) / 1000) + margin))
  return u
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
const luaState = `
local SF = {'le', 'lp', 'lk', 'lL', 'la', 'ln', 'ld', 'lx', 'pi', 'px', 'pe', 'pl', 'pb', 'bo', 'bk', 'br', 'bx'}

local function state_read(key, now)
  local v = redis.call('HMGET', key, unpack(SF))
  local h = {}
  for i, f in ipairs(SF) do h[f] = v[i] end
  local s = {
    last = num(h.le), learn = num(h.lx) > now,
    le = num(h.le), lp = num(h.lp), lk = h.lk == '1', lL = num(h.lL),
    la = num(h.la), ln = num(h.ln), ld = h.ld == '1', lx = num(h.lx),
    pi = h.pi or '', px = num(h.px), pe = num(h.pe), pl = h.pl == '1', pb = h.pb == '1',
    bo = num(h.bo), bk = num(h.bk), br = num(h.br), bx = num(h.bx),
  }
  if not s.learn then
    s.le, s.lp, s.lk, s.lL, s.la, s.ln, s.ld, s.lx = 0, 0, false, 0, 0, 0, false, 0
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

local function learn_write(key, s)
  redis.call('HSET', key, 'le', fmt(s.le), 'lp', fmt(s.lp), 'lk', flag(s.lk), 'lL', fmt(s.lL),
    'la', fmt(s.la), 'ln', fmt(s.ln), 'ld', flag(s.ld), 'lx', fmt(s.lx))
end

local function probe_write(key, s)
  redis.call('HSET', key, 'pi', s.pi, 'px', fmt(s.px), 'pe', fmt(s.pe), 'pl', flag(s.pl), 'pb', flag(s.pb))
end

local function probe_clear(key, s)
  redis.call('HDEL', key, 'pi', 'px', 'pe', 'pl', 'pb')
  s.pi, s.px, s.pe, s.pl, s.pb = '', 0, 0, false, false
end

local function brk_write(key, s)
  redis.call('HSET', key, 'bo', fmt(s.bo), 'bk', fmt(s.bk), 'br', fmt(s.br), 'bx', fmt(s.bx))
end

-- brk_clear closes the breaker and clears its counts (every field starting
-- with 'b').
local function brk_clear(key, s)
  local del = {}
  for _, f in ipairs(redis.call('HKEYS', key)) do
    if string.sub(f, 1, 1) == 'b' then del[#del + 1] = f end
  end
  for i = 1, #del, 1000 do
    redis.call('HDEL', key, unpack(del, i, math.min(i + 999, #del)))
  end
  s.bo, s.bk, s.br, s.bx = 0, 0, 0, 0
end

-- brk_bump counts calls and failures in the bucket of now (fields bs<i>,
-- the second counted, bc<i> and bf<i>, i = second % w).
local function brk_bump(key, s, now, w, calls, fails)
  local sec = math.floor(now / 1000000)
  local i = fmt(sec % w)
  if redis.call('HGET', key, 'bs' .. i) ~= fmt(sec) then
    redis.call('HSET', key, 'bs' .. i, fmt(sec), 'bc' .. i, fmt(calls), 'bf' .. i, fmt(fails))
  else
    if calls > 0 then redis.call('HINCRBY', key, 'bc' .. i, calls) end
    if fails > 0 then redis.call('HINCRBY', key, 'bf' .. i, fails) end
  end
  s.bx = math.max(s.bx, (sec + w) * 1000000)
end

local function brk_sums(key, now, w)
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
-- tells that it was the learning probe of that epoch. It returns whether
-- the learned state changed. See memstore's learning.settle.
local function learn_settle(s, epoch, result, probe)
  local changed = false
  if epoch ~= 0 and epoch == s.le then
    if result == 0 then
      s.la = math.max(s.la - 1, 0)
      changed = true
    elseif result == 2 or result == 3 then
      s.ln = s.ln + 1
      changed = true
    elseif result == 1 and probe and s.lk then
      s.lL = s.lL + 1
      changed = true
    end
  elseif epoch ~= 0 and epoch == s.lp and not s.ld then
    if result ~= 1 then
      s.lL = math.max(s.lL - 1, 0)
      changed = true
    end
  end
  if result == 2 and (epoch == 0 or epoch == s.le) and not s.ld then
    s.ld = true
    changed = true
  end
  return changed
end

-- state_keep gives the state hash a TTL covering its live parts (plus the
-- margin) and returns until when it lives (0 = nothing live).
local function state_keep(key, s, now, margin)
  local need = 0
  if s.learn then need = math.max(need, s.lx) end
  if s.pi ~= '' then need = math.max(need, s.px) end
  if s.bx > now then need = math.max(need, s.bx) end
  if need <= now then return 0 end
  local keep = math.ceil((need - now) / 1000) + margin
  if redis.call('PTTL', key) < keep then
    redis.call('PEXPIRE', key, fmt(keep))
  end
  return need
end
`

// luaIndex holds the helpers of the tenant's gate index: a sorted set whose
// members name the tenant's gates (the part of their key names after the
// kind) and whose scores say when each gate frees, in µs. Key names are
// rebuilt from a member inside the scripts, so those keys are not declared
// in KEYS; they share the index's hash tag, hence its slot, so this holds
// on Redis Cluster too.
const luaIndex = `
-- SLACK is the most a gate's score is raised beyond its need, so that a
-- gate in steady use is written to the index now and then, not on every
-- call: by a quarter of its remaining life, at most 5 minutes.
local SLACK = 300000000

-- index_trim makes room in a full index: it forgets the gates whose score
-- passed (their keys expired by then), then evicts the lowest-scored
-- (soonest to free), deleting their keys, until the index is 1/16 of the
-- bound below it.
local function index_trim(idx, now, max_gates)
  redis.call('ZREMRANGEBYSCORE', idx, '-inf', fmt(now))
  local drop = redis.call('ZCARD', idx) - (max_gates - math.max(math.floor(max_gates / 16), 1))
  if drop <= 0 then return end
  local victims = redis.call('ZRANGE', idx, 0, drop - 1)
  local base = string.sub(idx, 1, -2)
  for _, m in ipairs(victims) do
    redis.call('DEL', base .. 'g:' .. m, base .. 'f:' .. m, base .. 'q:' .. m, base .. 's:' .. m)
  end
  for i = 1, #victims, 1000 do
    redis.call('ZREM', idx, unpack(victims, i, math.min(i + 999, #victims)))
  end
end

-- index_touch records that the gate member holds state until free (µs,
-- margin included). It writes the index only when free is past the
-- gate's score, and makes room first when the gate is new to a full index.
local function index_touch(idx, member, free, now, max_gates, margin)
  local cur = tonumber(redis.call('ZSCORE', idx, member) or '')
  if cur and cur >= free then return end
  if (not cur or cur <= now) and redis.call('ZCARD', idx) >= max_gates then
    index_trim(idx, now, max_gates)
  end
  local score = free + math.min(math.floor((free - now) / 4), SLACK)
  redis.call('ZADD', idx, fmt(score), member)
  local keep = math.ceil((score - now) / 1000) + margin
  if redis.call('PTTL', idx) < keep then
    redis.call('PEXPIRE', idx, fmt(keep))
  end
end
`

const luaHelpers = luaBudget + luaGate + luaState + luaIndex

// admitScript checks the gate, the breaker, the learned quota and pacing,
// and registers an admitted attempt: in the in-flight set when the gate has
// a known quota (without one, it writes no in-flight key), in the probe
// slot when it goes as the probe. It counts the attempt for the learned
// quota and the breaker.
//
// KEYS: 1 gate, 2 in-flight set, 3 pacing TAT, 4 budget, 5 quota, 6 state,
// 7 index.
// ARGV: 1 now µs, 2 ticket id, 3 ticket TTL µs, 4 pacing interval µs (0 =
// no pacing), 5 burst, 6 max pacing wait µs, 7 budget window s (0 = do not
// count), 8 key margin ms, 9 learning ('1' or '0'), 10 learning idle
// expiry µs, 11 breaker ('1' or '0'), 12 breaker window s, 13 held poll
// µs, 14 gates per tenant, 15 index member.
// Returns {kind, until µs, wait µs, registered (1 or 0), probe (1 or 0),
// epoch}: kind 0 admitted (wait = pacing wait), 1 gate closed, 2 pace
// denied (wait = the wait), 3 breaker open, 4 held (wait = HeldFor).
var admitScript = redis.NewScript(luaHelpers + `
local now = tonumber(ARGV[1])
local id = ARGV[2]
local ttl = tonumber(ARGV[3])
local margin = tonumber(ARGV[8])
local learn_on = ARGV[9] == '1'
local brk_on = ARGV[11] == '1'
local brk_w = tonumber(ARGV[12])
local max_gates = tonumber(ARGV[14])
local g, known = closed_until(tonumber(redis.call('GET', KEYS[1]) or '0'), KEYS[2], KEYS[5], now)
if g > 0 then
  return {1, g, 0, 0, 0, 0}
end

local s
local for_b, for_l, dirty = false, false, false
if learn_on or brk_on then
  s = state_read(KEYS[6], now)
end
if brk_on and s.bo > 0 then
  if s.bo > now then
    return {3, s.bo, 0, 0, 0, 0}
  end
  for_b = true -- half open
end
local learn = learn_on and not known -- an announced quota takes precedence
local epoch_started = false -- the learned state is written whole, else only lx and la
if learn then
  if not s.learn then
    s.le, s.lp, s.lk, s.lL, s.la, s.ln, s.ld = math.max(now, s.last + 1), 0, false, 0, 0, 0, false
    epoch_started = true
  elseif s.ld then
    s.lp, s.le = s.le, math.max(now, s.le + 1)
    s.lk, s.lL, s.la, s.ln, s.ld = true, math.max(s.la - s.ln, 0), 0, 0, false
    epoch_started = true
  end
  s.learn, s.lx = true, now + tonumber(ARGV[10])
  for_l = s.lk and s.la >= s.lL
  dirty = true
end
local probe = for_b or for_l

-- finish writes the learned state and the index; free is until when the
-- attempt's other writes live.
local function finish(free)
  if dirty then
    if epoch_started then
      learn_write(KEYS[6], s)
    elseif learn then
      redis.call('HSET', KEYS[6], 'la', fmt(s.la), 'lx', fmt(s.lx))
    end
    free = math.max(free, state_keep(KEYS[6], s, now, margin))
  end
  if free > 0 then
    index_touch(KEYS[7], ARGV[15], free + margin * 1000 + 1000, now, max_gates, margin)
  end
end

if probe and s.pi ~= '' then
  finish(0)
  return {4, 0, math.min(tonumber(ARGV[13]), s.px - now), 0, 0, 0}
end
-- A learning probe goes only once the epoch's learned calls are back: an
-- accepted probe must show room beyond them, not win a race against the
-- slowest of them to the provider.
if for_l and not for_b then
  local first = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. fmt(now), '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  if #first > 0 then
    finish(0)
    return {4, 0, math.min(tonumber(ARGV[13]), tonumber(first[2]) - now), 0, 0, 0}
  end
end
-- In an epoch with a learned quota, the learned calls are registered in
-- flight (their Complete says they are back).
local learned = learn and s.lk and not probe
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
    return {2, 0, wait, 0, 0, 0}
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
  s.pi, s.px, s.pe, s.pl, s.pb = id, now + ttl, epoch, for_l, for_b
  probe_write(KEYS[6], s)
  registered, dirty = 1, true
end
if brk_on then
  local bx = s.bx -- 0: no live breaker (its stale fields are overwritten)
  brk_bump(KEYS[6], s, now, brk_w, 1, 0)
  if for_b then
    -- A half-open breaker outlives its probe as it outlives its open time.
    s.bx = math.max(s.bx, s.px + s.br)
  end
  if bx == 0 or s.bx ~= bx then
    brk_write(KEYS[6], s)
  end
  dirty = true
end
finish(free)
local p = 0
if probe then p = 1 end
return {0, 0, wait, registered, p, epoch}
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
// 24 index member, 25 learning idle expiry µs.
// Returns {closed until µs (0 = open), retry allowed (1 or 0), breaker
// open until µs (0 = not open), breaker change (0 none, 1 opened, 2
// reopened, 3 closed: store.BreakerChange)}.
var completeScript = redis.NewScript(luaHelpers + `
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
if ARGV[4] == '1' then
  free = math.max(free, quota_apply(KEYS[4], now, tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[12]), margin))
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

local s = state_read(KEYS[5], now)
local dirty = false
local pr_l, pr_b = false, false -- the attempt was the probe (for learning, for the breaker)
local epoch = tonumber(ARGV[13])
if ticket ~= '' and s.pi == ticket then
  pr_l, pr_b = s.pl and s.pe == epoch, s.pb
  probe_clear(KEYS[5], s)
  dirty = true
end
if s.learn then
  local changed = learn_settle(s, epoch, result, pr_l)
  if s.ld and target + tonumber(ARGV[25]) > s.lx then
    -- The idle time of an ended epoch runs from the reopening: a long
    -- close does not forget what the next epoch needs.
    s.lx, changed = target + tonumber(ARGV[25]), true
  end
  if changed then
    learn_write(KEYS[5], s)
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
    elseif result == 3 then
      s.bk = s.bk + 1
      brk_open(s, now, limit, open_for, max_open)
      brk_write(KEYS[5], s)
      dirty, change = true, 2
    end
  end
elseif ARGV[16] == '1' then
  local calls, fails = 0, 0
  if observed and result ~= 0 then calls = 1 end
  if result == 3 then fails = 1 end
  if calls + fails > 0 then
    local w = tonumber(ARGV[17])
    brk_bump(KEYS[5], s, now, w, calls, fails)
    if fails > 0 then
      local c, f = brk_sums(KEYS[5], now, w)
      if c >= tonumber(ARGV[18]) and f >= tonumber(ARGV[19]) * c then
        brk_open(s, now, limit, open_for, max_open)
        change = 1
      end
    end
    brk_write(KEYS[5], s)
    dirty = true
  end
end
if dirty then
  free = math.max(free, state_keep(KEYS[5], s, now, margin))
end
if free > 0 then
  index_touch(KEYS[6], ARGV[24], free + margin * 1000 + 1000, now, tonumber(ARGV[23]), margin)
end

local g = closed_until(target, KEYS[2], KEYS[4], now)
local bo = 0
if s.bo > now then bo = s.bo end
return {g, allowed, bo, change}
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
// nothing.
//
// KEYS: 1 gate, 2 in-flight set, 3 quota, 4 state.
// ARGV: 1 now µs.
// Returns {closed until µs, breaker open until µs, in flight, quota known
// (1 or 0), remaining, reset µs, learning (1 or 0), epoch, admitted, not
// accepted, learned (1 or 0), L, probe in flight (1 or 0)}.
var inspectScript = redis.NewScript(luaHelpers + `
local now = tonumber(ARGV[1])
local g, known = closed_until(tonumber(redis.call('GET', KEYS[1]) or '0'), KEYS[2], KEYS[3], now)
local s = state_read(KEYS[4], now)
local bo = 0
if s.bo > now then bo = s.bo end
local r, w, u = quota_read(KEYS[3], now)
local flight = redis.call('ZCOUNT', KEYS[2], '(' .. fmt(now), '+inf')
local function b(x) if x then return 1 end return 0 end
return {g, bo, flight, b(r ~= nil), r or 0, u or 0, b(s.learn), s.le, s.la, s.ln, b(s.lk), s.lL, b(s.pi ~= '')}
`)
