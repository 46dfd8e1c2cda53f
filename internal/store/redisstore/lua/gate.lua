
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
