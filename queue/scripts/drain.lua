-- drain.lua: move READY tasks of a pool out of this region: READY→PENDING
-- into the outbox, bound for pool in region (DRAINED). The outbox sender
-- hands them off like any placement.
-- An operator's drain may run on any server (each task moves at most once);
-- the leader's re-placement of a pool without workers is fenced.
-- KEYS: 1-8 see lib.lua; 9 outbox; 10 fence key (when fenced).
-- ARGV: 1 clock, 2 n, 3 fencing token ('' = not fenced), then per task: id,
--       target region, target pool.
-- Returns: {RC.FENCED} fenced; else {moved}.
local now = clock(ARGV[1])
local n = tonumber(ARGV[2])
if ARGV[3] ~= '' and not fence(KEYS[10], ARGV[3]) then return {RC.FENCED} end
local moved, ids = 0, {}
for k = 0, n - 1 do
  local id, region, pool = ARGV[4 + 3 * k], ARGV[5 + 3 * k], ARGV[6 + 3 * k]
  local tk = tkey(id)
  local r = redis.call('HMGET', tk, 'st', 'po', 'pr', 'at', 'ob', 'rs', 'pn', 'tn')
  local st = r[1]
  if is_lazy(st, r[6], r[7], r[5]) then st = lazy_state(id, r[2], r[3]) end
  if st == 'R' and redis.call('ZREM', qkey(r[2], r[3]), id) == 1 then
    fair_drop(r[2], r[3], id, r[8])
    cnt('R', -1)
    cnt('r:' .. r[2] .. ':' .. r[3], -1)
    cnt('P', 1)
    redis.call('HSET', tk, 'st', 'P', 'rs', 'DRAINED', 'ob', region, 'po', pool)
    redis.call('HDEL', tk, 'rt')
    redis.call('ZADD', KEYS[9], fmt(now), id)
    trail(id, now, 'R', 'P', 'DRAINED', region .. '/' .. pool, r[4] or '0', '')
    moved = moved + 1
    ids[#ids + 1] = id
  end
end
event('drain', ids, moved)
return {moved}
