
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
