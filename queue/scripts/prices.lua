-- prices.lua (leader, fenced): replaces the shard's live prices, the price
-- per slot-hour of each pool as it stands now (overrides and discount
-- applied), which claim.lua records on the tasks it claims.
-- KEYS: 1-8 see lib.lua; 9 fence key, 10 prices.
-- ARGV: 1 clock, 2 fencing token, then pool, price pairs.
-- Returns: {RC.FENCED} fenced; else {RC.OK}.
if not fence(KEYS[9], ARGV[2]) then return {RC.FENCED} end
redis.call('DEL', KEYS[10])
if #ARGV > 2 then redis.call('HSET', KEYS[10], unpack(ARGV, 3)) end
return {RC.OK}
