-- replace.lua: the leader's re-placement of READY tasks when the world
-- changed under them (their pool's live price rose past the
-- region's threshold, or its capacity window closed): READY→PENDING
-- (REPLACED_COST) into the due set, where the leader's place loop places
-- them with the prices and windows of now. A task no longer READY in the
-- pool (claimed, parked by a limit, cancelled, moved already) or pinned to
-- it is left alone, so each task moves at most once and is never in two
-- places. Fenced: only the current term's leader moves tasks.
-- KEYS: 1-8 see lib.lua; 9 fence key.
-- ARGV: 1 clock, 2 fencing token, 3 pool, 4 why (the trail step's note),
--   then ids.
-- Returns: {RC.FENCED} fenced; else {moved}.
if not fence(KEYS[9], ARGV[2]) then return {RC.FENCED} end
local now = clock(ARGV[1])
local snow = fmt(now)
local pool, why = ARGV[3], ARGV[4]
local moved, ids = 0, {}
for k = 5, #ARGV do
  local id = ARGV[k]
  local tk = tkey(id)
  local r = redis.call('HMGET', tk, 'st', 'po', 'pr', 'at', 'pn', 'rt', 'tn')
  if r[1] == 'R' and r[2] == pool and r[5] ~= '1' and redis.call('ZREM', qkey(r[2], r[3]), id) == 1 then
    fair_drop(r[2], r[3], id, r[7])
    cnt('R', -1)
    cnt('r:' .. r[2] .. ':' .. r[3], -1)
    cnt('P', 1)
    flush(id, r[6], nil, nil, r[4] or '0')
    redis.call('HSET', tk, 'st', 'P', 'rs', 'REPLACED_COST')
    redis.call('HDEL', tk, 'po')
    zadd(K_DUE, snow, id)
    trail(id, now, 'R', 'P', 'REPLACED_COST', pool, r[4] or '0', why)
    moved = moved + 1
    ids[#ids + 1] = id
  end
end
event('replace', ids, moved)
return {moved}
