-- heartbeat.lua: extend every lease a worker holds, in one call, and record
-- the worker as alive in its pool. Reports the tasks it must stop.
-- KEYS: 1-8 see lib.lua; 9 workers:<pool> (ZSET), 10 slots:<pool> (HASH),
--       11 types:<pool> (HASH worker → the task types it serves).
-- ARGV: 1 clock, 2 worker, 3 lease_ms, 4 slots, 5 n, 6 default timeout ms (for
--       records that omit it), 7 served types: '*' every type, ',a,b,' a
--       list (',' none), '' not said (the entry is removed), '-' leave as
--       it is (shards but 0); then n pairs id, token.
-- Returns: flat triples id, token, why for each task to stop:
--   LOST (token no longer valid), CANCELED (cancel requested),
--   PREEMPTED (preemption requested), DEADLINE (timeout passed).
local now = clock(ARGV[1])
local worker, lease, n = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[5])
redis.call('ZADD', KEYS[9], fmt(now), worker)
redis.call('HSET', KEYS[10], worker, ARGV[4])
if ARGV[7] == '' then
  redis.call('HDEL', KEYS[11], worker)
elseif ARGV[7] ~= '-' then
  redis.call('HSET', KEYS[11], worker, ARGV[7])
end
local stop = {}
local function halt(id, token, why)
  stop[#stop + 1] = id; stop[#stop + 1] = token; stop[#stop + 1] = why
end
for k = 0, n - 1 do
  local id, token = ARGV[8 + 2 * k], ARGV[9 + 2 * k]
  local r = redis.call('HMGET', tkey(id), 'st', 'lt', 'cx', 'pq', 'sa', 'to')
  -- The attempt's deadline: started + timeout (claim does not store it).
  local dl = tonumber(r[5] or '0') + tonumber(r[6] or ARGV[6])
  if r[1] ~= 'U' or r[2] ~= token then
    halt(id, token, 'LOST')
  elseif r[3] == '1' then
    halt(id, token, 'CANCELED')
  elseif r[4] == '1' then
    halt(id, token, 'PREEMPTED')
  elseif now >= dl then
    halt(id, token, 'DEADLINE')
  else
    local exp = now + lease
    if dl < exp then exp = dl end
    redis.call('ZADD', K_RUNNING, 'XX', fmt(exp), id)
  end
end
return stop
