-- cancel.lua: PENDING/READY→CANCELED at once; RUNNING gets a cancel request
-- (the worker stops the handler at its next heartbeat and acks, or the lease
-- expires); HANDED_OFF answers with the region that holds the task; a task
-- whose hand-off is in flight gets a cancel request (cx) that the hand-off
-- carries to the receiver, or that cancels it here if the receiver refuses.
-- KEYS: 1-8 see lib.lua.
-- ARGV: 1 clock, 2 id, 3 reason, 4 by, 5 retention ms.
-- Returns: {RC.OK, 'C'} canceled; {RC.OK, 'U'} requested (running); {RC.OK, 'P'}
--          requested (hand-off in flight); {RC.ILLEGAL, state} illegal; {RC.NOT_FOUND} not found;
--          {RC.HANDED_OFF, region} handed off.
local now = clock(ARGV[1])
local id, reason, by = ARGV[2], ARGV[3], ARGV[4]
local tk = tkey(id)
local r = redis.call('HMGET', tk, 'st', 'po', 'pr', 'at', 'ho', 'ob', 'rs', 'pn', 'pk', 'tn')
local st = r[1]
if not st then return {RC.NOT_FOUND} end
local lazy = is_lazy(st, r[7], r[8], r[6])
if lazy then st = lazy_state(id, r[2], r[3]) end
if st == 'P' and r[6] then
  redis.call('HSET', tk, 'cx', '1') -- a hand-off to r[6] is in flight
  return {RC.OK, 'P'}
elseif st == 'P' then
  redis.call('ZREM', K_DELAYED, id)
  redis.call('ZREM', K_DUE, id)
  if lazy then redis.call('ZREM', dkey(r[2], r[3]), id) end
  if not r[2] then redis.call('ZREM', dnkey(), id) end
  if redis.call('ZREM', K_PREFIX .. 'held', id) == 1 then cnt('hd', -1) end -- a hand-off held for its sender's word
  cnt('P', -1)
elseif st == 'R' then
  redis.call('ZREM', qkey(r[2], r[3]), id)
  fair_drop(r[2], r[3], id, r[10])
  if r[9] then -- parked by a limit (lib.lua park)
    redis.call('ZREM', lmkey('pk:' .. r[9]), id)
    cnt('pk:' .. r[2], -1)
  end
  cnt('R', -1)
  cnt('r:' .. r[2] .. ':' .. r[3], -1)
elseif st == 'U' then
  redis.call('HSET', tk, 'cx', '1')
  return {RC.OK, 'U'}
elseif st == 'H' then
  return {RC.HANDED_OFF, r[5]}
else
  return {RC.ILLEGAL, st}
end
redis.call('HSET', tk, 'st', 'C', 'rs', reason, 'fa', fmt(now))
cnt('tC', 1)
backlog_task(r[10], -1, id)
batch_end(id, 'C')
trail(id, now, st, 'C', reason, by, r[4] or '0', '')
retain(id, ARGV[5])
event('cancel', {id}, 1)
return {RC.OK, 'C'}
