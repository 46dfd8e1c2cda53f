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

local function quota_apply(key, now, remaining, reset, tol, margin)
  local r, w, u = quota_read(key, now)
  if r and reset < w - tol then
    return -- a late response from an older window
  end
  if reset <= now then
    redis.call('DEL', key) -- the window already reset
    return
  end
  if not r or reset > w + tol then
    r, w, u = remaining, reset, reset -- a new window
  else
    r, u = math.min(r, remaining), math.max(u, reset) -- the same window
  end
  redis.call('HSET', key, 'r', fmt(r), 'w', fmt(w), 'u', fmt(u))
  redis.call('PEXPIRE', key, fmt(math.ceil((u - now) / 1000) + margin))
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

// admitScript checks the gate and pacing and, when the gate has a known
// quota, registers an admitted attempt in the in-flight set (without one,
// it writes no in-flight key).
//
// KEYS: 1 gate, 2 in-flight set, 3 pacing TAT, 4 budget, 5 quota.
// ARGV: 1 now µs, 2 ticket id, 3 ticket TTL µs, 4 pacing interval µs (0 =
// no pacing), 5 burst, 6 max pacing wait µs, 7 budget window s (0 = do not
// count), 8 key margin ms.
// Returns {0, 0, wait µs, registered (1 or 0)} when admitted,
// {1, closed until µs, 0, 0} when the gate is closed, {2, 0, wait µs, 0}
// when pacing denied.
var admitScript = redis.NewScript(luaBudget + luaGate + `
local now = tonumber(ARGV[1])
local margin = tonumber(ARGV[8])
local g, known = closed_until(tonumber(redis.call('GET', KEYS[1]) or '0'), KEYS[2], KEYS[5], now)
if g > 0 then
  return {1, g, 0, 0}
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
    return {2, 0, wait, 0}
  end
  redis.call('SET', KEYS[3], fmt(newtat), 'PX', fmt(math.max(1, math.ceil((newtat - now) / 1000))))
end
local window = tonumber(ARGV[7])
if window > 0 then
  budget_bump(KEYS[4], now, window, 'q', margin)
end
if not known then
  return {0, 0, wait, 0}
end
local ttl = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', fmt(now))
redis.call('ZADD', KEYS[2], fmt(now + ttl), ARGV[2])
local keep = math.ceil(ttl / 1000) + margin
if redis.call('PTTL', KEYS[2]) < keep then
  redis.call('PEXPIRE', KEYS[2], fmt(keep))
end
return {0, 0, wait, 1}
`)

// completeScript ends an attempt (or, with an empty ticket id, records a
// bare observation and spends from the budget: it then never writes the
// in-flight set), closes
// the gate as the observation asks, records its quota, and spends a retry
// from the budget.
//
// KEYS: 1 gate, 2 in-flight set, 3 budget, 4 quota.
// ARGV: 1 now µs, 2 ticket id (empty = none), 3 close until µs (0 = none),
// 4 has quota ('1' or '0'), 5 remaining, 6 reset µs, 7 spend retry ('1' or
// '0'), 8 budget window s (0 = unlimited), 9 ratio, 10 floor total,
// 11 key margin ms, 12 quota window tolerance µs.
// Returns {closed until µs (0 = open), retry allowed (1 or 0)}.
var completeScript = redis.NewScript(luaBudget + luaGate + `
local now = tonumber(ARGV[1])
local margin = tonumber(ARGV[11])
if ARGV[2] ~= '' then
  redis.call('ZREM', KEYS[2], ARGV[2])
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
end
if ARGV[4] == '1' then
  quota_apply(KEYS[4], now, tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[12]), margin)
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
local g = closed_until(target, KEYS[2], KEYS[4], now)
return {g, allowed}
`)

// stateScript reads the gate's state, as admitScript checks it.
//
// KEYS: 1 gate, 2 in-flight set, 3 quota.
// ARGV: 1 now µs.
// Returns closed until µs (0 = open).
var stateScript = redis.NewScript(luaBudget + luaGate + `
local now = tonumber(ARGV[1])
local g = closed_until(tonumber(redis.call('GET', KEYS[1]) or '0'), KEYS[2], KEYS[3], now)
return g
`)
