-- claim.lua: take up to n READY tasks of one pool (READY→RUNNING), issue a
-- lease token for each, and return their records.
-- Order: priority 0 is a strict tier; among 1..4 the lowest
-- enqueue_ms + priority*aging_step wins, so a task gains one level per
-- aging_step of waiting but never reaches priority 0.
-- The price recorded on each task (px) is the pool's live price, which the
-- region leader keeps in the prices hash (overrides included, prices.lua);
-- the worker's configured price only when the leader has written none.
-- Types: a worker names the task types it serves (ARGV 9) and takes only
-- those; READY tasks of other types stay where they are, in order, for the
-- pool's other workers. Passing them over reads their type field, so a claim
-- passes over at most ARGV 10 of them per priority: behind more than that a
-- claimer sees nothing of that priority until the workers that serve them
-- drain them (placement sends a type only to pools whose workers serve it).
-- KEYS: 1-8 see lib.lua; 9 prices.
-- ARGV: 1 clock, 2 pool, 3 worker, 4 n, 5 lease_ms, 6 aging_step_ms,
--       7 the worker's price per slot-hour ('' = none), 8 default timeout
--       ms (records omit fields equal to the region default), 9 served
--       types: '*' every type, else ',a,b,' (',' none), 10 per-priority
--       skip bound.
-- Returns: {now_ms, first lease token, price recorded ('' = none), then per
-- claimed task: id, its record as HGETALL pairs before the claim}. The j-th
-- task (from 1) holds token first+j-1; the caller applies what the claim
-- set (st U, wk, lt, sa now, at+1, px; for a task promoted untouched, rs
-- DUE and rt, eq its due time) to its copy.
local now = clock(ARGV[1])
local pool, worker, n = ARGV[2], ARGV[3], tonumber(ARGV[4])
local lease, step, price = tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7]
local filter = ARGV[9] ~= '*'
local bound, served = 0, {}
if filter then
  bound = tonumber(ARGV[10])
  for ty in string.gmatch(ARGV[9], '[^,]+') do served[ty] = true end
end
local skipped = 0
-- serves: whether this claimer takes task id (counting the ones it passes over).
local function serves(id)
  if not filter then return true end
  local ty = redis.call('HGET', tkey(id), 'ty')
  if ty and served[ty] then return true end
  skipped = skipped + 1
  return false
end

local chosen = {} -- {id, prio}
local taken = {}  -- prio -> ids, removed from that ready set with one ZREM
local function take(p, id)
  chosen[#chosen + 1] = {id, p}
  local l = taken[p]
  if l == nil then l = {}; taken[p] = l end
  l[#l + 1] = id
end

-- Each priority's head is read `left` at a time and read further only once
-- tasks were passed over, so a claimer that serves what it finds reads no
-- more than an unfiltered claim.
local off0, passed = 0, 0
while #chosen < n and passed < math.max(bound, 1) do
  local want = n - #chosen
  local top = redis.call('ZRANGE', qkey(pool, 0), off0, off0 + want - 1)
  off0 = off0 + #top
  for _, id in ipairs(top) do
    if serves(id) then
      take(0, id)
    else
      passed = passed + 1
      if passed >= bound then break end
    end
  end
  if #top < want or not filter then break end
end

local left = n - #chosen
if left > 0 then
  -- heads of priorities 1..4, merged by key; a priority that passed over
  -- `bound` tasks is done for this claim.
  local heads, pos, off, over, more = {}, {}, {}, {}, {}
  local function refill(p)
    heads[p] = redis.call('ZRANGE', qkey(pool, p), off[p], off[p] + left - 1, 'WITHSCORES')
    pos[p] = 1
    off[p] = off[p] + #heads[p] / 2
    more[p] = #heads[p] == 2 * left -- a full read: the set may hold more
  end
  for p = 1, 4 do
    off[p], over[p] = 0, 0
    refill(p)
  end
  while left > 0 do
    local best, bestKey = nil, nil
    for p = 1, 4 do
      local h = heads[p]
      if pos[p] >= #h and more[p] and over[p] > 0 and over[p] < bound then
        refill(p) -- read on past what this claim passed over
        h = heads[p]
      end
      if pos[p] < #h and (not filter or over[p] < bound) then
        local key = tonumber(h[pos[p] + 1]) + p * step
        if bestKey == nil or key < bestKey then best, bestKey = p, key end
      end
    end
    if best == nil then break end
    local id = heads[best][pos[best]]
    pos[best] = pos[best] + 2
    if serves(id) then
      take(best, id)
      left = left - 1
    else
      over[best] = over[best] + 1
    end
  end
end
for p = 0, 4 do
  if taken[p] then redis.call('ZREM', qkey(pool, p), unpack(taken[p])) end
end

-- The reason CLAIMED is implied by st U (nothing else sets rs while RUNNING),
-- so rs keeps why the task became READY, which the trail shows.
local k = #chosen
local out, ids = {fmt(now), '0', ''}, {}
if k > 0 then
  price = redis.call('HGET', KEYS[9], pool) or price
  out[3] = price
  -- Lease tokens: one INCRBY for the batch.
  local first = redis.call('INCRBY', K_SEQ, k) - k + 1
  out[2] = fmt(first)
  local snow = fmt(now)
  for j, c in ipairs(chosen) do
    local id, p = c[1], c[2]
    local tk = tkey(id)
    -- The record as it was: the caller applies what this claim sets.
    local h = redis.call('HGETALL', tk)
    local to, at, st, du
    for x = 1, #h, 2 do
      local f = h[x]
      if f == 'to' then to = h[x + 1] elseif f == 'at' then at = h[x + 1]
      elseif f == 'st' then st = h[x + 1] elseif f == 'du' then du = h[x + 1] end
    end
    if st == 'P' and du then
      -- Promoted with its record untouched (lib.lua): it became READY at
      -- its due time, which is also its enqueue time.
      redis.call('HSET', tk, 'rs', 'DUE', 'rt', du, 'eq', du)
    end
    local dl = now + tonumber(to or ARGV[8])
    local exp = now + lease
    if dl < exp then exp = dl end
    if price ~= '' then
      redis.call('HSET', tk, 'st', 'U', 'wk', worker, 'lt', fmt(first + j - 1), 'sa', snow,
        'at', fmt(tonumber(at or '0') + 1), 'px', price)
    else
      redis.call('HSET', tk, 'st', 'U', 'wk', worker, 'lt', fmt(first + j - 1), 'sa', snow,
        'at', fmt(tonumber(at or '0') + 1))
    end
    zadd(K_RUNNING, fmt(exp), id)
    cnt(rfield(pool, p), -1)
    out[#out + 1] = id
    out[#out + 1] = h
    ids[j] = id
  end
  cnt('R', -k)
  cnt('U', k)
  cnt('u:' .. pool, k)
end

-- Chain the wake-up: if work remains, leave a marker for the next idle
-- claimer; tasks passed over are work for another worker of the pool (the
-- worker backs off when such wake-ups keep finding it nothing to take).
if skipped > 0 or (k == n and redis.call('EXISTS', qkey(pool, 0), qkey(pool, 1), qkey(pool, 2), qkey(pool, 3), qkey(pool, 4)) > 0) then
  wake(pool)
end
event('claim', ids, k)
return out
