-- limits.lua (leader, fenced): replaces the shard's limits, this shard's
-- share of each (queue/limits.go), which claims enforce (lib.lua). Token
-- buckets, running counts, pauses and parked tasks stay: a changed limit
-- applies from the next claim.
-- KEYS: 1-8 see lib.lua; 9 fence key.
-- ARGV: 1 clock, 2 fencing token, then key, "rate burst concurrency" pairs.
-- Returns: {-1} fenced; else {0}.
if not fence(KEYS[9], ARGV[2]) then return {-1} end
redis.call('DEL', lmkey('lim'))
if #ARGV > 2 then redis.call('HSET', lmkey('lim'), unpack(ARGV, 3)) end
-- Keys no longer limited: their parked tasks are looked at now.
for _, key in ipairs(redis.call('ZRANGE', lmkey('pkd'), 0, -1)) do
  if not lim_cfg(key) then redis.call('ZADD', lmkey('pkd'), clock(ARGV[1]), key) end
end
return {0}
