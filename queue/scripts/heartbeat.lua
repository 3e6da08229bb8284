-- heartbeat.lua: extend every lease a worker holds, in one call, and record
-- the worker as alive in its pool. Reports the tasks it must stop.
-- KEYS: 1-8 see lib.lua; 9 workers:<pool> (ZSET), 10 slots:<pool> (HASH),
--       11 types:<pool> (HASH worker → the task types it serves).
-- ARGV: 1 clock, 2 worker, 3 lease_ms, 4 slots, 5 n, 6 default timeout ms (for
--       records that omit it), 7 served types: '*' every type, ',a,b,' a
--       list (',' none), '' not said (the entry is removed), '-' leave as
--       it is (shards but 0); then n triples id, token, progress: '' none,
--       else "<percent>\t<message>" (lib.lua set_progress; the record's
--       attempt and the script's clock are added).
-- Progress written makes one 'progress' event naming its tasks.
-- Returns: flat triples id, token, why for each task to stop:
--   LOST (token no longer valid), CANCELED (cancel requested),
--   PREEMPTED (preemption requested), DEADLINE (timeout passed).
local now = clock(ARGV[1])
local worker, lease, n = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[5])
redis.call('ZADD', KEYS[9], fmt(now), worker)
redis.call('HSET', KEYS[10], worker, ARGV[4])
if ARGV[7] == '' then
  redis.call('HDEL', KEYS[11], worker)
elseif ARGV[7] ~= '-' then
  redis.call('HSET', KEYS[11], worker, ARGV[7])
end
-- Slow lanes (docs/fairness.md): a task RUNNING past its pool's
-- threshold makes its tenant's type slow at once (the first burst of a type not yet
-- learnt is contained from then on), and a task of a slow type not yet
-- counted in the lane is counted now (it started before its type was
-- known slow), so no more of them start while the lane is full.
local LANES = redis.call('EXISTS', lmkey('sln')) == 1
local THR = {}
local function threshold(pool)
  local t = THR[pool]
  if t == nil then
    t = false
    local v = redis.call('HGET', lmkey('sln'), pool)
    if v then t = tonumber(string.match(v, '^(%d+)')) end
    THR[pool] = t
  end
  return t
end
local lanes = {}
local stop = {}
local moved = {}
local function halt(id, token, why)
  stop[#stop + 1] = id; stop[#stop + 1] = token; stop[#stop + 1] = why
end
for k = 0, n - 1 do
  local id, token, pg = ARGV[8 + 3 * k], ARGV[9 + 3 * k], ARGV[10 + 3 * k]
  local r = redis.call('HMGET', tkey(id), 'st', 'lt', 'cx', 'pq', 'sa', 'to', 'po', 'ty', 'lc', 'at', 'pg', 'tn')
  -- The attempt's deadline: started + timeout (claim does not store it).
  local dl = tonumber(r[5] or '0') + tonumber(r[6] or ARGV[6])
  if r[1] ~= 'U' or r[2] ~= token then
    halt(id, token, 'LOST')
  elseif r[3] == '1' then
    halt(id, token, 'CANCELED')
  elseif r[4] == '1' then
    halt(id, token, 'PREEMPTED')
  elseif now >= dl then
    halt(id, token, 'DEADLINE')
  else
    if pg ~= '' then
      local pct, msg = string.match(pg, '^([^\t]*)\t(.*)$')
      set_progress(tkey(id), r[10], r[11], pct, msg or '', now)
      moved[#moved + 1] = id
    end
    local exp = now + lease
    if dl < exp then exp = dl end
    redis.call('ZADD', K_RUNNING, 'XX', fmt(exp), id)
    local pool, ty = r[7], r[8] or ''
    local thr = LANES and pool and threshold(pool)
    if thr then
      local slow = slow_type(pool, ty, r[12])
      if not slow and now - tonumber(r[5] or now) >= thr then
        mark_slow(pool, ty, r[12])
        slow = true
      end
      local key, lcv = 'w:' .. pool, r[9]
      if not lcv or lcv == '' then lcv = ',' end
      if slow and not string.find(lcv, ',' .. key .. ',', 1, true) then
        redis.call('HSET', tkey(id), 'lc', lcv .. key .. ',')
        lanes[key] = (lanes[key] or 0) + 1
      end
    end
  end
end
for key, d in pairs(lanes) do redis.call('HINCRBY', lmkey('lc'), key, d) end
event('progress', moved, #moved)
return stop
