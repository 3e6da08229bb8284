-- promote.lua (leader, fenced): move due PENDING tasks on. A task pinned to a
-- pool becomes READY there; any other waits in the due set for placement.
-- KEYS: 1-8 see lib.lua; 9 fence key.
-- ARGV: 1 clock, 2 fencing token, 3 limit (≤ 1000).
-- Returns: {-1} when fenced; else {moved, made_ready, next_due_ms or ''}.
local now = clock(ARGV[1])
if not fence(KEYS[9], ARGV[2]) then return {-1} end
local limit = tonumber(ARGV[3])
local ids = redis.call('ZRANGEBYSCORE', K_DELAYED, '-inf', fmt(now), 'LIMIT', 0, limit)
local ready = 0
for _, id in ipairs(ids) do
  redis.call('ZREM', K_DELAYED, id)
  local r = redis.call('HMGET', tkey(id), 'st', 'po', 'pn', 'pr', 'eq', 'ke', 'du')
  if r[1] == 'P' then
    if (r[3] == '1' or r[6] == '1') and r[2] then
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
return {#ids, ready, nxt[2] or ''}
