-- return.lua: the lease holder gives a task back without spending a retry
-- (graceful shutdown, preemption). RUNNING→READY in the same pool with its
-- original enqueue time, or RUNNING→PENDING for delay_ms (then READY in the
-- same pool, still with the original enqueue time).
-- KEYS: 1-8 see lib.lua.
-- ARGV: 1 clock, 2 id, 3 token, 4 reason (WORKER_SHUTDOWN|PREEMPTED),
--       5 delay_ms, 6 canceled retention ms.
-- Returns: {0, new state code}; {1, state} lease lost; {2} not found.
local now = clock(ARGV[1])
local id, token, reason, delay = ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5])
local tk = tkey(id)
local r = redis.call('HMGET', tk, 'st', 'lt', 'at', 'po', 'pr', 'eq', 'rt', 'sa', 'wk', 'cx', 'pc')
if not r[1] then return {2} end
if r[1] ~= 'U' or r[2] ~= token then return {1, r[1]} end
leave_running(id, r[4])
flush(id, r[7], r[8], r[9], r[3])
local at = tonumber(r[3]) - 1
redis.call('HSET', tk, 'at', fmt(at))
if reason == 'PREEMPTED' then
  redis.call('HSET', tk, 'pc', fmt(tonumber(r[11] or '0') + 1))
end
if r[10] == '1' then
  redis.call('HSET', tk, 'st', 'C', 'rs', 'CANCELED_BY_USER', 'fa', fmt(now))
  cnt('tC', 1)
  trail(id, now, 'U', 'C', 'CANCELED_BY_USER', r[9], r[3], '')
  retain(id, ARGV[6])
  return {0, 'C'}
end
if delay <= 0 then
  trail(id, now, 'U', 'R', reason, r[9], r[3], '')
  make_ready(id, now, r[4], r[5], r[6], reason, true)
  redis.call('HDEL', tk, 'rt') -- the log holds this step
  event('return', {id}, 1)
  return {0, 'R'}
end
local due = now + delay
redis.call('HSET', tk, 'st', 'P', 'rs', reason, 'du', fmt(due), 'ke', '1')
redis.call('ZADD', K_DELAYED, fmt(due), id)
cnt('P', 1)
trail(id, now, 'U', 'P', reason, r[9], r[3], '')
event('return', {id}, 1)
return {0, 'P'}
