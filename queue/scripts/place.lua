-- place.lua (leader, fenced): decide due tasks waiting for placement.
-- Each item either names a local pool (PENDING→READY, PLACED) or defers the
-- task to retry_at (stays PENDING, NO_CAPACITY).
-- KEYS: 1-8 see lib.lua; 9 fence key, 10 outbox.
-- ARGV: 1 clock, 2 fencing token, 3 n, then per item: id, pool, retry_at_ms,
--       handoff region ('' = local pool), reason of a deferral (default NO_CAPACITY).
-- An item with a handoff region goes to the outbox (stays PENDING) to be
-- handed to pool in that region.
-- Returns: {RC.FENCED} when fenced; else {placed, deferred, skipped}.
local now = clock(ARGV[1])
if not fence(KEYS[9], ARGV[2]) then return {RC.FENCED} end
local n = tonumber(ARGV[3])
local placed, deferred, skipped = 0, 0, 0
local ids = {}
-- Which items are still in the due set: one ZMSCORE, then one ZREM for all.
local all = {}
for k = 0, n - 1 do all[k + 1] = ARGV[4 + 5 * k] end
local inDue, seen = {}, {}
if n > 0 then
  inDue = redis.call('ZMSCORE', K_DUE, unpack(all))
  redis.call('ZREM', K_DUE, unpack(all))
end
for k = 0, n - 1 do
  local id, pool, retry, target = ARGV[4 + 5 * k], ARGV[5 + 5 * k], ARGV[6 + 5 * k], ARGV[7 + 5 * k]
  local why = ARGV[8 + 5 * k]
  if why == nil or why == '' then why = 'NO_CAPACITY' end
  local fresh = inDue[k + 1] and not seen[id] -- an id given twice is placed once
  seen[id] = true
  local r = fresh and redis.call('HMGET', tkey(id), 'st', 'pr', 'eq', 'ke', 'rs') or {}
  if not fresh or r[1] ~= 'P' then
    skipped = skipped + 1
  elseif target ~= '' then
    redis.call('HSET', tkey(id), 'ob', target, 'po', pool)
    redis.call('ZADD', KEYS[10], fmt(now), id)
    placed = placed + 1
  elseif pool ~= '' then
    local eq = fmt(now)
    if r[4] == '1' then eq = r[3]; redis.call('HDEL', tkey(id), 'ke') end
    cnt('P', -1)
    make_ready(id, now, pool, r[2], eq, 'PLACED')
    placed = placed + 1
    ids[#ids + 1] = id
  else
    redis.call('ZADD', K_DELAYED, retry, id)
    redis.call('HSET', tkey(id), 'rs', why, 'du', retry)
    if r[5] ~= why then trail(id, now, 'P', 'P', why, 'leader', '0', '') end
    deferred = deferred + 1
  end
end
event('place', ids, placed)
return {placed, deferred, skipped}
