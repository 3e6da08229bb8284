-- sweep.lua (leader, fenced): retention of dead letters. Terminal records
-- expire by their own TTL; the dead set's entries older than the retention
-- are dropped here, at most limit per call.
-- KEYS: 1-8 see lib.lua; 9 fence key.
-- ARGV: 1 clock, 2 fencing token, 3 dead retention ms, 4 limit.
-- Returns: {-1} fenced; else {removed}.
local now = clock(ARGV[1])
if not fence(KEYS[9], ARGV[2]) then return {-1} end
local old = redis.call('ZRANGEBYSCORE', K_DEAD, '-inf', fmt(now - tonumber(ARGV[3])), 'LIMIT', 0, tonumber(ARGV[4]))
for _, id in ipairs(old) do redis.call('ZREM', K_DEAD, id) end
cnt('F', -#old)
return {#old}
