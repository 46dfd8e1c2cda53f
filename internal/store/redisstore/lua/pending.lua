
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
    state_save(skey, ikey, member, s, true, 0, now, margin, max_gates)
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
