-- promote.lua (leader, fenced): move due PENDING tasks on. A task pinned to a
-- pool becomes READY there; any other waits in the due set for placement.
-- KEYS: 1-8 see lib.lua; 9 fence key.
-- ARGV: 1 clock, 2 fencing token, 3 limit (≤ 1000),
--       4 re-admission budget: preempted tasks (ke) that may become READY in
--         this call (-1: no limit); the rest wait 100–1000 ms more,
--       5 hot pools: ',pool,pool,' whose low priorities (3–4, not critical)
--         are deferred by backpressure ('' = none),
--       6 deferral spread ms: a deferred task waits a jittered 50–100 % of it.
-- Returns: {-1} when fenced; else {moved, made_ready, next_due_ms or '', deferred,
--          readmitted (preempted tasks made READY)}.
local now = clock(ARGV[1])
if not fence(KEYS[9], ARGV[2]) then return {-1} end
local limit = tonumber(ARGV[3])
local budget = tonumber(ARGV[4] or '-1')
local hot = ARGV[5] or ''
local spread = tonumber(ARGV[6] or '0')
local deferred, readmitted = 0, 0
-- jitter in [0, 1) from the id, so a spike spreads evenly and replays agree.
local function jit(id)
  local h = 0
  for i = 1, #id do h = (h * 31 + string.byte(id, i)) % 1000003 end
  return (h % 1000) / 1000
end
local ids = redis.call('ZRANGEBYSCORE', K_DELAYED, '-inf', fmt(now), 'LIMIT', 0, limit)
local ready = 0
-- The ids are the set's lowest ranks (scores from -inf): one call removes them.
if #ids > 0 then redis.call('ZREMRANGEBYRANK', K_DELAYED, 0, #ids - 1) end
for _, id in ipairs(ids) do
  local tk = tkey(id)
  -- What every task needs; the other fields are read on the rarer paths
  -- only (each field an HMGET looks up costs Redis as much as the rest).
  local r = redis.call('HMGET', tk, 'st', 'po', 'pn', 'pr', 'ke')
  local pool, prio, ke = r[2], r[4], r[5] == '1'
  local placed = (r[3] == '1' or ke) and pool
  if r[1] == 'P' then
    if placed and hot ~= '' and tonumber(prio) >= 3 and string.find(hot, ',' .. pool .. ',', 1, true)
        and redis.call('HGET', tk, 'cr') ~= '1' then
      local due = now + math.floor(spread * (0.5 + jit(id) / 2))
      redis.call('ZADD', K_DELAYED, fmt(due), id)
      local rs = redis.call('HGET', tk, 'rs')
      redis.call('HSET', tk, 'rs', 'DEFERRED_BACKPRESSURE', 'du', fmt(due))
      if rs ~= 'DEFERRED_BACKPRESSURE' then trail(id, now, 'P', 'P', 'DEFERRED_BACKPRESSURE', 'leader', '0', pool) end
      deferred = deferred + 1
    elseif ke and pool and budget == 0 then
      local due = now + 100 + math.floor(900 * jit(id))
      redis.call('ZADD', K_DELAYED, fmt(due), id)
      deferred = deferred + 1
    elseif placed then
      local eq = fmt_now(now)
      if ke then
        readmitted = readmitted + 1
        if budget > 0 then budget = budget - 1 end
        eq = redis.call('HGET', tk, 'eq') or eq
        redis.call('HDEL', tk, 'ke')
      end
      cnt('P', -1)
      make_ready(id, now, pool, prio, eq, 'DUE', true)
      ready = ready + 1
    else
      zadd(K_DUE, redis.call('HGET', tk, 'du') or fmt_now(now), id)
    end
  end
end
event('promote', ids, #ids)
local nxt = redis.call('ZRANGE', K_DELAYED, 0, 0, 'WITHSCORES')
return {#ids, ready, nxt[2] or '', deferred, readmitted}
