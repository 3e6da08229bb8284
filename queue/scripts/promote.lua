-- promote.lua (leader, fenced): move due PENDING tasks on. A task pinned to a
-- pool becomes READY there; any other waits in the due set for placement.
-- Pinned tasks submitted with a delay wait in per-(pool, priority) delayed
-- sets behind a marker (lib.lua): their due ids move to the ready set in one
-- ZADD with their records untouched, except in a hot pool's priorities 3–4,
-- which are deferred one by one as below (critical ones excepted).
-- KEYS: 1-8 see lib.lua; 9 fence key.
-- ARGV: 1 clock, 2 fencing token, 3 limit (≤ 1000),
--       4 re-admission budget: preempted tasks (ke) that may become READY in
--         this call (-1: no limit); the rest wait 100–1000 ms more,
--       5 hot pools: ',pool,pool,' whose low priorities (3–4, not critical)
--         are deferred by backpressure ('' = none),
--       6 deferral spread ms: a deferred task waits a jittered 50–100 % of it.
-- Returns: {RC.FENCED} when fenced; else {moved, made_ready, next_due_ms or '', deferred,
--          readmitted (preempted tasks made READY), more (1: the limit was
--          reached, more may be due now)}.
local now = clock(ARGV[1])
if not fence(KEYS[9], ARGV[2]) then return {RC.FENCED} end
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
-- promote_one moves one ordinary delayed task on.
local function promote_one(id)
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

local marks, moved, shown = {}, 0, {}
for _, id in ipairs(ids) do
  if string.byte(id, 1) == 126 then -- '~': a pinned delayed set, after the rest
    marks[#marks + 1] = id
  else
    moved = moved + 1
    if #shown < 8 then shown[#shown + 1] = id end
    promote_one(id)
  end
end

-- take_due removes from set what is due, up to the limit left, and returns
-- it as {id, due, id, due, ...} (counted as moved).
local function take_due(set)
  local left = limit - moved
  if left <= 0 then return {} end
  local due = redis.call('ZRANGEBYSCORE', set, '-inf', fmt(now), 'WITHSCORES', 'LIMIT', 0, left)
  if #due > 0 then
    redis.call('ZREMRANGEBYRANK', set, 0, #due / 2 - 1)
    moved = moved + #due / 2
    for j = 1, #due, 2 do
      if #shown >= 8 then break end
      shown[#shown + 1] = due[j]
    end
  end
  return due
end

-- promote_unplaced moves what is due of the unplaced delayed tasks (dn) to
-- the due set; their records stay as they are.
local function promote_unplaced()
  local due = take_due(dnkey())
  for j = 1, #due, 2 do zadd(K_DUE, due[j + 1], due[j]) end
  return dnkey()
end

-- promote_pinned moves what is due of one pinned delayed set to its ready
-- set (READY with the due time as enqueue time, records untouched), up to
-- the limit left. A hot pool's priorities 3–4 are deferred one by one into
-- the shard's delayed set instead, where they go on as ordinary delayed
-- tasks (rs no longer SUBMITTED); critical ones are not deferred.
local function promote_pinned(m)
  local sep = #m
  while string.byte(m, sep) ~= 58 do sep = sep - 1 end -- the last ':'
  local pool, prio = string.sub(m, 2, sep - 1), string.sub(m, sep + 1)
  local dk = dkey(pool, prio)
  local due = take_due(dk)
  local k = #due / 2
  if k == 0 then return dk end
  if hot ~= '' and tonumber(prio) >= 3 and string.find(hot, ',' .. pool .. ',', 1, true) then
    for j = 1, #due, 2 do
      local id = due[j]
      if redis.call('HGET', tkey(id), 'cr') == '1' then
        zadd(qkey(pool, prio), due[j + 1], id)
        fair_add(pool, prio, due[j + 1], id)
        cnt('P', -1); cnt('R', 1); cnt(rfield(pool, prio), 1)
        wake(pool)
        ready = ready + 1
      else
        local at = now + math.floor(spread * (0.5 + jit(id) / 2))
        redis.call('ZADD', K_DELAYED, fmt(at), id)
        redis.call('HSET', tkey(id), 'rs', 'DEFERRED_BACKPRESSURE', 'du', fmt(at))
        trail(id, now, 'P', 'P', 'DEFERRED_BACKPRESSURE', 'leader', '0', pool)
        deferred = deferred + 1
      end
    end
  else
    local args = {}
    for j = 1, #due, 2 do
      args[j] = due[j + 1]
      args[j + 1] = due[j]
    end
    redis.call('ZADD', qkey(pool, prio), unpack(args))
    if fair(pool) then
      for j = 1, #due, 2 do fair_add(pool, prio, due[j + 1], due[j]) end
    end
    cnt('P', -k); cnt('R', k); cnt(rfield(pool, prio), k)
    wake(pool)
    ready = ready + k
  end
  return dk
end

-- The sets behind the markers; each marker goes back at its set's new head.
for _, m in ipairs(marks) do
  local set
  if m == '~' then set = promote_unplaced() else set = promote_pinned(m) end
  local head = redis.call('ZRANGE', set, 0, 0, 'WITHSCORES')
  if head[2] then redis.call('ZADD', K_DELAYED, head[2], m) end
end
event('promote', shown, moved)
local nxt = redis.call('ZRANGE', K_DELAYED, 0, 0, 'WITHSCORES')
-- more: the limit was reached, so more may be due now.
local more = (#ids == limit or moved >= limit) and 1 or 0
return {moved, ready, nxt[2] or '', deferred, readmitted, more}
