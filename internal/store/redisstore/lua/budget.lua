
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
