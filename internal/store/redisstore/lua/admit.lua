
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
    if res[1] == ADMITTED and f[2] == ARGV[19] then
      n, from = n - 1, 4
    end
    if n <= 0 then
      redis.call('HDEL', KEYS[8], ord_b)
    else
      local nxt = now
      if res[1] == GATE_CLOSED or res[1] == BREAKER_OPEN then
        nxt = math.max(res[2], now)
      elseif res[1] == HELD then
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
  return ret({GATE_CLOSED, g, 0, 0, 0, 0, 0})
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
    return ret({BREAKER_OPEN, s.bo, 0, 0, 0, 0, 0})
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
  if dirty then
    if epoch_started then
      learn_write(s)
    elseif learn then
      put(s, 'la', fmt(s.la))
      put(s, 'lx', fmt(s.lx))
    end
  end
  state_save(KEYS[6], KEYS[7], ARGV[15], s, dirty, free, now, margin, max_gates)
end

if probe and s.pi ~= '' then
  finish(0)
  return ret({HELD, 0, math.min(tonumber(ARGV[13]), s.px - now), 0, 0, 0, 0})
end
-- A learning probe goes only once the epoch's learned calls are back: an
-- accepted probe must show room beyond them, not win a race against the
-- slowest of them to the provider.
if for_l and not for_b then
  local first = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. fmt(now), '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  if #first > 0 then
    finish(0)
    return ret({HELD, 0, math.min(tonumber(ARGV[13]), tonumber(first[2]) - now), 0, 0, 0, 0})
  end
end
-- The probe (a scout, a learning probe, a half-open breaker's) is the
-- oldest waiting call of all replicas.
if probe and ord_ahead() >= 1 then
  finish(0)
  return ret({HELD, 0, ORDER_POLL, 0, 0, 0, 0})
end
-- In an epoch with a learned quota, the learned calls are registered in
-- flight (their Complete says they are back).
local learned = learn and s.lk and not probe
-- The calls other replicas hold that arrived before this one go first:
-- it goes only if the learned quota has room for them and for it.
if learned and ord_ahead() >= s.lL - s.la then
  finish(0)
  return ret({HELD, 0, ORDER_POLL, 0, 0, 0, 0})
end
if known and not probe and ord_ahead() > 0 then
  local r = quota_read(KEYS[5], now)
  if r and ord_ahead() >= r - redis.call('ZCOUNT', KEYS[2], '(' .. fmt(now), '+inf') then
    finish(0)
    return ret({HELD, 0, ORDER_POLL, 0, 0, 0, 0})
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
      return ret({HELD, 0, tonumber(ARGV[13]), 0, 0, 0, 0})
    end
    if ord_ahead() >= lim - inflight then
      finish(0)
      return ret({HELD, 0, ORDER_POLL, 0, 0, 0, 0})
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
    return ret({PACE_DENIED, 0, wait, 0, 0, 0, 0})
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
return ret({ADMITTED, 0, wait, registered, p, epoch, plain, index_state.untracked})
