
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
state_save(KEYS[5], KEYS[6], ARGV[24], s, dirty, free, now, margin, tonumber(ARGV[23]))

local g = closed_until(target, KEYS[2], KEYS[4], now)
local bo = 0
if s.bo > now then bo = s.bo end
if ARGV[26] ~= '' and (notify or change ~= 0 or (s.ld and not was_ended)) then
  redis.call('PUBLISH', ARGV[26], KEYS[5])
end
return {g, allowed, bo, change, index_state.untracked}
