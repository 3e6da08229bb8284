-- limits.lua (leader, fenced): replaces the shard's limits, this shard's
-- share of each (queue/limits.go), which claims enforce (lib.lua). Token
-- buckets, running counts, pauses and parked tasks stay: a changed limit
-- applies from the next claim.
-- KEYS: 1-8 see lib.lua; 9 fence key.
-- ARGV: 1 clock, 2 fencing token, then key, "rate burst concurrency" pairs
--       (" z" after: this shard's part of the concurrency is none for now).
-- Returns: {-1} fenced; else {0, then per key in ARGV's order the tasks of
-- it this shard runs}.
if not fence(KEYS[9], ARGV[2]) then return {-1} end
local now = clock(ARGV[1])
local lim, pkd = lmkey('lim'), lmkey('pkd')
local was = {}
local h = redis.call('HGETALL', lim)
for i = 1, #h, 2 do was[h[i]] = h[i + 1] end
redis.call('DEL', lim)
if #ARGV > 2 then redis.call('HSET', lim, unpack(ARGV, 3)) end
local out = {0}
for i = 3, #ARGV, 2 do
  local key = ARGV[i]
  out[#out + 1] = tonumber(redis.call('HGET', lmkey('lc'), key) or '0')
  -- a changed part (one given to this shard) looks at its parked tasks now
  if was[key] ~= ARGV[i + 1] and redis.call('ZSCORE', pkd, key) then redis.call('ZADD', pkd, 'LT', now, key) end
end
-- Keys no longer limited: their parked tasks are looked at now.
for _, key in ipairs(redis.call('ZRANGE', pkd, 0, -1)) do
  if not lim_cfg(key) then redis.call('ZADD', pkd, now, key) end
end
return out
