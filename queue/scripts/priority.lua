-- priority.lua: change a live task's priority. A READY task moves to the
-- ready set of its new priority keeping its enqueue time.
-- KEYS: 1-8 see lib.lua.
-- ARGV: 1 clock, 2 id, 3 new priority, 4 by.
-- Returns: {RC.OK, old} changed; {RC.ILLEGAL, state} terminal; {RC.NOT_FOUND} not found; {RC.HANDED_OFF, region} handed off.
local now = clock(ARGV[1])
local id, np = ARGV[2], ARGV[3]
local tk = tkey(id)
local r = redis.call('HMGET', tk, 'st', 'po', 'pr', 'at', 'ho', 'ob', 'rs', 'pn', 'tn')
local st = r[1]
if not st then return {RC.NOT_FOUND} end
local lazy = is_lazy(st, r[7], r[8], r[6])
if lazy then st = lazy_state(id, r[2], r[3]) end
if st == 'H' then return {RC.HANDED_OFF, r[5]} end
if st ~= 'P' and st ~= 'R' and st ~= 'U' then return {RC.ILLEGAL, st} end
if r[3] == np then return {RC.OK, np} end
if st == 'P' and lazy then
  -- Waiting in its pool's delayed set of the old priority: move it.
  local due = redis.call('ZSCORE', dkey(r[2], r[3]), id)
  if due then
    redis.call('ZREM', dkey(r[2], r[3]), id)
    redis.call('ZADD', dkey(r[2], np), due, id)
    remark(r[2], np, due)
  end
elseif st == 'R' then
  local score = redis.call('ZSCORE', qkey(r[2], r[3]), id)
  if score then
    redis.call('ZREM', qkey(r[2], r[3]), id)
    redis.call('ZADD', qkey(r[2], np), score, id)
    fair_drop(r[2], r[3], id, r[9])
    fair_add(r[2], np, score, id, r[9] or 'default')
  end -- else parked by a limit: unpark puts it into the ready set of its pr
  cnt('r:' .. r[2] .. ':' .. r[3], -1)
  cnt('r:' .. r[2] .. ':' .. np, 1)
end
redis.call('HSET', tk, 'pr', np)
trail(id, now, st, st, 'PRIORITY_CHANGED', ARGV[4], r[4] or '0', r[3] .. '->' .. np)
return {RC.OK, r[3]}
