
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
