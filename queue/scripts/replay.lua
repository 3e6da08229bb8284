-- replay.lua: FAILED→PENDING (REPLAYED) with a fresh retry budget; the task
-- is due at once and is placed (or made READY in its pinned pool) by the
-- next promotion.
-- KEYS: 1-8 see lib.lua.
-- ARGV: 1 clock, 2 id, 3 by.
-- Returns: {RC.OK} replayed; {RC.ILLEGAL, state} not FAILED; {RC.NOT_FOUND} not found; {RC.HANDED_OFF, region}
-- handed off (the task lives there: the caller asks that region).
local now = clock(ARGV[1])
local id = ARGV[2]
local tk = tkey(id)
local r = redis.call('HMGET', tk, 'st', 'ho', 'tn')
local st = r[1]
if not st then return {RC.NOT_FOUND} end
if st == 'H' then return {RC.HANDED_OFF, r[2]} end
if st ~= 'F' then return {RC.ILLEGAL, st} end
redis.call('ZREM', K_DEAD, id)
cnt('F', -1)
redis.call('PERSIST', tk)
redis.call('PERSIST', lkey(id))
redis.call('HSET', tk, 'st', 'P', 'rs', 'REPLAYED', 'at', '0', 'du', fmt(now))
redis.call('HDEL', tk, 'fa', 'rt', 'sa', 'wk')
redis.call('ZADD', K_DELAYED, fmt(now), id)
cnt('P', 1)
backlog_task(r[3], 1, id)
trail(id, now, 'F', 'P', 'REPLAYED', ARGV[3], '0', '')
event('replay', {id}, 1)
return {RC.OK}
