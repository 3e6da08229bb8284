-- return.lua: the lease holder gives a task back without spending a retry
-- (graceful shutdown, preemption). RUNNING→READY in the same pool with its
-- original enqueue time, or RUNNING→PENDING for delay_ms (then READY in the
-- same pool, still with the original enqueue time).
-- With a pause (RETRY_AFTER: the handler's retry after, worker.RetryAfter)
-- the task's tenant's tasks of its limit key (of its type when it names
-- none) are paused for every worker until now + pause_ms, and the task waits READY, parked under that
-- key (lib.lua park), until then.
-- A pause is counted against the task's pause budget (xp, else the
-- region's): pd adds up the pauses. One that would take pd past the budget
-- pauses nothing and fails the attempt instead (MAX_PAUSE_EXCEEDED, an
-- attempt spent): retried by the task's policy, else FAILED with that
-- reason (lib.lua retry_or_dead).
-- The attempt is a cost record (claim to now), counted as not succeeded.
-- KEYS: 1-8 see lib.lua.
-- ARGV: 1 clock, 2 id, 3 token, 4 reason (WORKER_SHUTDOWN|PREEMPTED|
--       RETRY_AFTER), 5 delay_ms, 6 canceled retention ms, 7 pause_ms
--       (optional, with delay 0); with a pause: 8 the region's pause
--       budget ms, 9 jitter 0..999, 10 dead retention ms, 11-13 region
--       defaults for max_retries, retry_base ms, retry_cap ms.
-- Returns: {RC.OK, new state code}; {RC.LEASE_LOST, state} lease lost; {RC.NOT_FOUND} not found.
local now = clock(ARGV[1])
local id, token, reason, delay = ARGV[2], ARGV[3], ARGV[4], tonumber(ARGV[5])
local tk = tkey(id)
local r = redis.call('HMGET', tk, 'st', 'lt', 'at', 'po', 'pr', 'eq', 'rt', 'sa', 'wk', 'cx', 'pc', 'lk', 'ty', 'tn', 'tg', 'px', 'sl',
  'xp', 'pd')
if not r[1] then return {RC.NOT_FOUND} end
if r[1] ~= 'U' or r[2] ~= token then return {RC.LEASE_LOST, r[1]} end
leave_running(id, r[4])
flush(id, r[7], r[8], r[9], r[3])
-- The attempt held its slot from its claim to now: a cost record, not a
-- success (lib.lua cost).
if r[8] then
  cost(r[14], r[13], r[4], r[15], r[16], now - tonumber(r[8]), true, r[17])
  write_costs(now)
end
local pause = tonumber(ARGV[7] or '0')
if delay > 0 then pause = 0 end
local paused = tonumber(r[19] or '0') + pause
local budget = pause > 0 and tonumber(r[18] or ARGV[8] or '')
if budget and r[10] ~= '1' and paused > budget then
  local err = 'retry after ' .. fmt(pause) .. ' ms would make the task wait ' .. fmt(paused) ..
    ' ms in all, past its pause budget of ' .. fmt(budget) .. ' ms (max_pause)'
  local m = redis.call('HMGET', tk, 'mr', 'rb', 'rc')
  redis.call('HSET', tk, 'er', err)
  local st = retry_or_dead(id, now, tonumber(r[3]), tonumber(m[1] or ARGV[11]), tonumber(m[2] or ARGV[12]),
    tonumber(m[3] or ARGV[13]), 'U', 'MAX_PAUSE_EXCEEDED', r[9], err, true, tonumber(ARGV[9]), ARGV[10])
  event(st == 'F' and 'dead' or 'retry', {id}, 1)
  return {RC.OK, st}
end
local at = tonumber(r[3]) - 1
redis.call('HSET', tk, 'at', fmt(at))
if reason == 'PREEMPTED' then
  redis.call('HSET', tk, 'pc', fmt(tonumber(r[11] or '0') + 1))
end
if r[10] == '1' then
  redis.call('HSET', tk, 'st', 'C', 'rs', 'CANCELED_BY_USER', 'fa', fmt(now))
  cnt('tC', 1)
  backlog_task(r[14], -1, id)
  batch_end(id, 'C')
  trail(id, now, 'U', 'C', 'CANCELED_BY_USER', r[9], r[3], '')
  retain(id, ARGV[6])
  return {RC.OK, 'C'}
end
if pause > 0 then
  redis.call('HSET', tk, 'pd', fmt(paused))
  local key = pause_key(r[14], r[12], r[13])
  local u = now + pause
  local cur = tonumber(redis.call('HGET', lmkey('lp'), key) or '0')
  if u > cur then redis.call('HSET', lmkey('lp'), key, fmt(u)) else u = cur end
  trail(id, now, 'U', 'R', reason, r[9], r[3], string.sub(key, 3) .. ' paused for ' .. fmt(pause) .. ' ms')
  redis.call('HSET', tk, 'st', 'R', 'rs', reason)
  cnt('R', 1)
  cnt(rfield(r[4], r[5]), 1)
  park(id, r[4], r[6], key, 'paused', now, u, false)
  event('return', {id}, 1)
  return {RC.OK, 'R'}
end
if delay <= 0 then
  trail(id, now, 'U', 'R', reason, r[9], r[3], '')
  make_ready(id, now, r[4], r[5], r[6], reason, true)
  redis.call('HDEL', tk, 'rt') -- the log holds this step
  event('return', {id}, 1)
  return {RC.OK, 'R'}
end
local due = now + delay
redis.call('HSET', tk, 'st', 'P', 'rs', reason, 'du', fmt(due), 'ke', '1')
redis.call('ZADD', K_DELAYED, fmt(due), id)
cnt('P', 1)
trail(id, now, 'U', 'P', reason, r[9], r[3], '')
event('return', {id}, 1)
return {RC.OK, 'P'}
