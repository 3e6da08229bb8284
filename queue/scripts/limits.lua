-- limits.lua (leader, fenced): replaces the shard's limits, this shard's
-- part of each (queue/limits.go), which claims enforce (lib.lua). Token
-- buckets, running counts, pauses and parked tasks stay: a changed limit
-- applies from the next claim. A changed rate part settles the key's
-- bucket at the part it had, up to now, and keeps at most the new burst
-- of tokens (the rest it gives up, for the leader to give elsewhere).
-- KEYS: 1-8 see lib.lua; 9 fence key.
-- ARGV: 1 clock, 2 fencing token, 3 n, then n key, "rate burst concurrency"
--       pairs (limits.go limitPart), then key, tokens pairs: tokens added to
--       the key's bucket (1 task = 1e6), up to its burst.
-- Returns: {RC.FENCED} fenced; else {0, then per key of the n in ARGV's order the
-- tasks of it this shard runs, then per key the tokens its bucket gave up}.
if not fence(KEYS[9], ARGV[2]) then return {RC.FENCED} end
local now = clock(ARGV[1])
local lim, pkd, lb = lmkey('lim'), lmkey('pkd'), lmkey('lb')
local n = tonumber(ARGV[3])
local was = {}
local h = redis.call('HGETALL', lim)
for i = 1, #h, 2 do was[h[i]] = h[i + 1] end
redis.call('DEL', lim)
if n > 0 then redis.call('HSET', lim, unpack(ARGV, 4, 3 + 2 * n)) end
-- rate_of is a part's rate and burst, nil for a key without a rate.
local function rate_of(v)
  if not v then return nil end
  local r, b = string.match(v, '^(%d+) (%d+)')
  r, b = tonumber(r), tonumber(b)
  if not r or r == 0 then return nil end
  return r, b
end
local function bucket(key)
  local v = redis.call('HGET', lb, key)
  if not v then return nil end
  local a, t = string.match(v, '^(%-?%d+) (%d+)')
  return tonumber(a), tonumber(t)
end
local lc = {}
h = redis.call('HGETALL', lmkey('lc'))
for i = 1, #h, 2 do lc[h[i]] = h[i + 1] end
local out, gave, burst = {0}, {}, {}
local changed = {}
for i = 4, 3 + 2 * n, 2 do
  local key, v = ARGV[i], ARGV[i + 1]
  out[#out + 1] = tonumber(lc[key] or '0')
  local g = 0
  local nr, nb = rate_of(v)
  if nr then burst[key] = nb * 1e6 end
  if was[key] ~= v then
    changed[key] = true
    -- a changed part (one given to this shard) looks at its parked tasks now
    if redis.call('ZSCORE', pkd, key) then redis.call('ZADD', pkd, 'LT', now, key) end
    local orr, ob = rate_of(was[key])
    local tok, last = bucket(key)
    if orr then
      -- absent, a claim would find it full at the part it had
      if not tok then tok, last = ob * 1e6, now end
      if now > last then tok = tok + (now - last) * orr end
      tok = math.min(tok, ob * 1e6)
    end
    if nr and tok then
      local keep = math.min(tok, nb * 1e6)
      g = math.max(tok - keep, 0)
      redis.call('HSET', lb, key, string.format('%d %d', keep, now))
    end
  end
  gave[#gave + 1] = g
end
for i = 4 + 2 * n, #ARGV, 2 do
  local key, g = ARGV[i], tonumber(ARGV[i + 1])
  local tok = bucket(key)
  if tok and changed[key] and burst[key] and g > 0 then
    redis.call('HSET', lb, key, string.format('%d %d', math.min(tok + g, burst[key]), now))
  end
end
for _, g in ipairs(gave) do out[#out + 1] = g end
-- Keys no longer limited: their parked tasks are looked at now.
for _, key in ipairs(redis.call('ZRANGE', pkd, 0, -1)) do
  if not lim_cfg(key) then redis.call('ZADD', pkd, now, key) end
end
return out
