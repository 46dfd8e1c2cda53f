
local now = tonumber(ARGV[1])
local g = closed_until(tonumber(redis.call('GET', KEYS[1]) or '0'), KEYS[2], KEYS[3], now)
local bo = num(redis.call('HGET', KEYS[4], 'bo'))
if bo <= now or num(redis.call('HGET', KEYS[4], 'bx')) <= now then bo = 0 end
return {g, bo}
