-- fairshare.lua (leader, fenced): replaces the shard's fair shares, this
-- shard's part of each pool's (queue/fairshare.go), which claims follow
-- (lib.lua, claim.lua). A pool that gains a fair share has its READY tasks
-- of priorities 1-4 indexed by tenant now (once, O(its ready tasks)); a
-- pool that loses it has its fair-share keys deleted. Running counts of
-- pools that keep one carry over; tenants' index scores are recomputed
-- for those whose part changed (every indexed one when '*' changed).
-- KEYS: 1-8 see lib.lua; 9 fence key.
-- ARGV: 1 clock, 2 fencing token, 3 number of pools, then per pool: its
--       name, the number of tenants, then tenant, "weight_milli floor max"
--       pairs ('*' any other tenant; " z" after: this shard's part of the
--       max is none for now, queue/fairshare.go fairPart).
-- Returns: {RC.FENCED} fenced; else {0, tasks indexed, then per tenant named in
-- ARGV ('*' left out) the slots its tasks RUNNING in the pool on this
-- shard hold, whole ones rounded up}.
-- A pool whose parts changed is woken: a part given here may start tasks.
if not fence(KEYS[9], ARGV[2]) then return {RC.FENCED} end
local fsp = K_PREFIX .. 'fsp'
local old = redis.call('SMEMBERS', fsp)
local keep, indexed, out = {}, 0, {0, 0}
local i = 4
for _ = 1, tonumber(ARGV[3]) do
  local pool, nf = ARGV[i], tonumber(ARGV[i + 1])
  keep[pool] = true
  local fsk, frk = K_PREFIX .. 'fs:' .. pool, K_PREFIX .. 'fr:' .. pool
  local h, parts = redis.call('HGETALL', fsk), {}
  for x = 1, #h, 2 do parts[h[x]] = h[x + 1] end
  local was, all, moved, named = #h > 0, #h == 0, {}, {}
  redis.call('DEL', fsk)
  redis.call('HSET', fsk, unpack(ARGV, i + 2, i + 1 + 2 * nf))
  redis.call('SADD', fsp, pool)
  for j = i + 2, i + 1 + 2 * nf, 2 do
    local tn = ARGV[j]
    if tn ~= '*' then named[#named + 1] = tn end
    if parts[tn] ~= ARGV[j + 1] then
      if tn == '*' then all = true else moved[#moved + 1] = tn end
    end
    parts[tn] = nil
  end
  for tn in pairs(parts) do moved[#moved + 1] = tn end -- now '*'
  if #named > 0 then
    local r = redis.call('HMGET', frk, unpack(named))
    -- whole slots, rounded up (fr holds milli-slots)
    for j = 1, #named do out[#out + 1] = math.ceil(tonumber(r[j] or '0') / 1000) end
  end
  if was and (all or #moved > 0) then wake(pool) end
  i = i + 2 + 2 * nf
  local f = fair(pool)
  if not was then
    for p = 1, 4 do
      local q = redis.call('ZRANGE', qkey(pool, p), 0, -1, 'WITHSCORES')
      for j = 1, #q, 2 do fair_add(pool, p, q[j + 1], q[j]) end
      indexed = indexed + #q / 2
    end
    -- indexed from the ready sets, removals exact from here: no stale entry
    redis.call('HSET', frk, '!', '1')
  end
  local fik = K_PREFIX .. 'fi:' .. pool
  if all then moved = redis.call('ZRANGE', fik, 0, -1) end
  for c = 1, #moved, 500 do -- unpack breaks near 8 000 values
    fair_prefetch(pool, {unpack(moved, c, math.min(c + 499, #moved))})
  end
  for _, tn in ipairs(moved) do
    redis.call('ZADD', fik, 'XX', fair_score(fair_of(f, tn), fair_running(pool, tn)), tn)
  end
end
for _, pool in ipairs(old) do
  if not keep[pool] then
    local fik = K_PREFIX .. 'fi:' .. pool
    for _, tn in ipairs(redis.call('ZRANGE', fik, 0, -1)) do
      redis.call('UNLINK', fqkey(pool, 1, tn), fqkey(pool, 2, tn), fqkey(pool, 3, tn), fqkey(pool, 4, tn))
    end
    redis.call('DEL', fik, K_PREFIX .. 'fr:' .. pool, K_PREFIX .. 'fs:' .. pool)
    redis.call('SREM', fsp, pool)
  end
end
out[2] = indexed
return out
