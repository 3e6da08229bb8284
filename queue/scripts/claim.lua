-- claim.lua: take up to n READY tasks of one pool (READY→RUNNING), issue a
-- lease token for each, and return their records.
-- Order: priority 0 is a strict tier; among 1..4 the lowest
-- enqueue_ms + priority*aging_step wins, so a task gains one level per
-- aging_step of waiting but never reaches priority 0.
-- KEYS: 1-8 see lib.lua.
-- ARGV: 1 clock, 2 pool, 3 worker, 4 n, 5 lease_ms, 6 aging_step_ms,
--       7 price per slot-hour at claim ('' = none), 8 default timeout ms
--       (records omit fields equal to the region default).
-- Returns: per claimed task {id, record as HGETALL pairs}
-- (it includes the lease token as field 'lt').
local now = clock(ARGV[1])
local pool, worker, n = ARGV[2], ARGV[3], tonumber(ARGV[4])
local lease, step, price = tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7]

local chosen = {} -- {id, prio}
local function take(p, id)
  chosen[#chosen + 1] = {id, p}
  redis.call('ZREM', qkey(pool, p), id)
end

local top = redis.call('ZRANGE', qkey(pool, 0), 0, n - 1)
for _, id in ipairs(top) do take(0, id) end

local left = n - #chosen
if left > 0 then
  -- heads of priorities 1..4: up to `left` candidates each, merged by key.
  local heads, pos = {}, {}
  for p = 1, 4 do
    heads[p] = redis.call('ZRANGE', qkey(pool, p), 0, left - 1, 'WITHSCORES')
    pos[p] = 1
  end
  while left > 0 do
    local best, bestKey = nil, nil
    for p = 1, 4 do
      local h = heads[p]
      if pos[p] < #h then
        local key = tonumber(h[pos[p] + 1]) + p * step
        if bestKey == nil or key < bestKey then best, bestKey = p, key end
      end
    end
    if best == nil then break end
    take(best, heads[best][pos[best]])
    pos[best] = pos[best] + 2
    left = left - 1
  end
end

local out, ids = {}, {}
for k, c in ipairs(chosen) do
  local id, p = c[1], c[2]
  local tk = tkey(id)
  local r = redis.call('HMGET', tk, 'to', 'at')
  local token = fmt(redis.call('INCR', K_SEQ))
  local at = tonumber(r[2] or '0') + 1
  local dl = now + tonumber(r[1] or ARGV[8])
  local exp = now + lease
  if dl < exp then exp = dl end
  redis.call('HSET', tk, 'st', 'U', 'rs', 'CLAIMED', 'wk', worker, 'lt', token,
    'sa', fmt(now), 'dl', fmt(dl), 'at', fmt(at))
  if price ~= '' then redis.call('HSET', tk, 'px', price) end
  redis.call('ZADD', K_RUNNING, fmt(exp), id)
  cnt('R', -1)
  cnt('r:' .. pool .. ':' .. p, -1)
  cnt('U', 1)
  cnt('u:' .. pool, 1)
  out[k] = {id, redis.call('HGETALL', tk)}
  ids[k] = id
end

-- Chain the wake-up: if work remains, leave a marker for the next idle claimer.
if #chosen == n then
  for p = 0, 4 do
    if redis.call('EXISTS', qkey(pool, p)) == 1 then wake(pool); break end
  end
end
event('claim', ids, #ids)
return out
