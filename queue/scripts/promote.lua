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
for _, id in ipairs(ids) do
  redis.call('ZREM', K_DELAYED, id)
  local r = redis.call('HMGET', tkey(id), 'st', 'po', 'pn', 'pr', 'eq', 'ke', 'du', 'cr', 'rs')
  if r[1] == 'P' then
    local low = tonumber(r[4]) >= 3 and r[8] ~= '1'
    if (r[3] == '1' or r[6] == '1') and r[2] and low and hot ~= '' and string.find(hot, ',' .. r[2] .. ',', 1, true) then
      local due = now + math.floor(spread * (0.5 + jit(id) / 2))
      redis.call('ZADD', K_DELAYED, fmt(due), id)
      redis.call('HSET', tkey(id), 'rs', 'DEFERRED_BACKPRESSURE', 'du', fmt(due))
      if r[9] ~= 'DEFERRED_BACKPRESSURE' then trail(id, now, 'P', 'P', 'DEFERRED_BACKPRESSURE', 'leader', '0', r[2]) end
      deferred = deferred + 1
    elseif r[6] == '1' and r[2] and budget == 0 then
      local due = now + 100 + math.floor(900 * jit(id))
      redis.call('ZADD', K_DELAYED, fmt(due), id)
      deferred = deferred + 1
    elseif (r[3] == '1' or r[6] == '1') and r[2] then
      if r[6] == '1' then
        readmitted = readmitted + 1
        if budget > 0 then budget = budget - 1 end
      end
      local eq = fmt(now)
      if r[6] == '1' then eq = r[5]; redis.call('HDEL', tkey(id), 'ke') end
      cnt('P', -1)
      make_ready(id, now, r[2], r[4], eq, 'DUE')
      ready = ready + 1
    else
      redis.call('ZADD', K_DUE, r[7] or fmt(now), id)
    end
  end
end
event('promote', ids, #ids)
local nxt = redis.call('ZRANGE', K_DELAYED, 0, 0, 'WITHSCORES')
return {#ids, ready, nxt[2] or '', deferred, readmitted}
