-- slowlane.lua (leader, fenced): replaces the shard's slow lanes, this
-- shard's part of each pool's (queue/slowlane.go), which claims enforce
-- (lib.lua, claim.lua). A lane is its threshold and the slots its slow
-- tasks may hold at once; its slow types, each "<type> <tenant>", are
-- those the leader's learnt run times put past the threshold ('e'), plus
-- those a heartbeat saw run past it ('h', heartbeat.lua) that the learnt
-- run times do not yet know. A
-- pool whose lane goes has its slow types forgotten and its parked tasks
-- looked at now. Running counts and parked tasks stay.
-- Cost: O(types given) a pool, and O(parked) when a type turns quick.
-- KEYS: 1-8 see lib.lua; 9 fence key.
-- ARGV: 1 clock, 2 fencing token, 3 number of pools, then per pool: its
--       name, threshold ms, slots, the number of slow types and those,
--       the number of known types and those (known and not slow: quick);
--       each type "<type> <tenant>".
--       Slots may be 0: the shard's slow tasks of that pool wait parked
--       until the leader gives it some (queue/slowlane.go).
-- Returns: {RC.FENCED} fenced; else {0, then per pool in ARGV's order the slow
-- tasks it runs on the shard}.
if not fence(KEYS[9], ARGV[2]) then return {RC.FENCED} end
local now = clock(ARGV[1])
local sln = lmkey('sln')
local old = redis.call('HKEYS', sln)
local keep, out = {}, {0}
local i = 4
for _ = 1, tonumber(ARGV[3]) do
  local pool = ARGV[i]
  keep[pool] = true
  out[#out + 1] = tonumber(redis.call('HGET', lmkey('lc'), 'w:' .. pool) or '0')
  redis.call('HSET', sln, pool, ARGV[i + 1] .. ' ' .. ARGV[i + 2])
  local slt = lmkey('slt:' .. pool)
  local ns = tonumber(ARGV[i + 3])
  i = i + 4
  local slow = {}
  for j = i, i + ns - 1 do
    slow[ARGV[j]] = true
    redis.call('HSET', slt, ARGV[j], 'e')
  end
  i = i + ns
  local nk = tonumber(ARGV[i])
  i = i + 1
  local quick = false
  for j = i, i + nk - 1 do
    if not slow[ARGV[j]] and redis.call('HDEL', slt, ARGV[j]) == 1 then quick = true end
  end
  i = i + nk
  -- A type slow no more: the lane's parked tasks go back to their ready
  -- sets (at most 1000, in order; claims park the slow ones again), so
  -- its tasks do not wait for a slow one to end.
  if quick and redis.call('ZSCORE', lmkey('pkd'), 'w:' .. pool) then unpark('w:' .. pool, 1000) end
  -- a lane with more slots than before releases its parked tasks now
  if redis.call('ZSCORE', lmkey('pkd'), 'w:' .. pool) then redis.call('ZADD', lmkey('pkd'), 'LT', now, 'w:' .. pool) end
end
for _, pool in ipairs(old) do
  if not keep[pool] then
    redis.call('HDEL', sln, pool)
    redis.call('DEL', lmkey('slt:' .. pool))
    if redis.call('ZSCORE', lmkey('pkd'), 'w:' .. pool) then redis.call('ZADD', lmkey('pkd'), now, 'w:' .. pool) end
  end
end
return out
