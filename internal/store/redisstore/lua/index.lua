
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

-- state_save ends a script's writes to a gate: when s is dirty it plans
-- the state hash's life (state_plan), then indexes the gate until the
-- later of that and free (µs, the other keys' life; 0 = none), then
-- commits s, unless the index refused the gate (index_touch deleted what
-- the script wrote of it: nothing more is written).
local function state_save(skey, ikey, member, s, dirty, free, now, margin, max_gates)
  local expire = false
  if dirty then
    local f
    f, expire = state_plan(s, now, margin)
    free = math.max(free, f)
  end
  if free > 0 then
    local st
    if dirty then st = s end
    if not index_touch(ikey, member, free + margin * 1000 + 1000, now, max_gates, margin, st) then return end
  end
  if dirty then
    state_commit(skey, s, now, expire)
  end
end
