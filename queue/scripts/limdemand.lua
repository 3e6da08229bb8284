-- limdemand.lua (leader, read only): this shard's part of each limit and
-- the key's work here, for the parts to follow the work (queue/limits.go
-- SetLimits). One call a shard, whatever the number of keys.
-- KEYS: 1-8 see lib.lua.
-- ARGV: 1 clock.
-- Returns: per key of the shard's limits: key, its part (limits.go
-- limitPart), tasks of it RUNNING, tasks parked, and 1 when its token
-- bucket is below full (it started tasks within a refill), else 0.
local now = clock(ARGV[1])
local function hash(k)
  local m, h = {}, redis.call('HGETALL', lmkey(k))
  for i = 1, #h, 2 do m[h[i]] = h[i + 1] end
  return m
end
local lc, lb = hash('lc'), hash('lb')
local due = {} -- keys with tasks parked
for _, k in ipairs(redis.call('ZRANGE', lmkey('pkd'), 0, -1)) do due[k] = true end
local lim = redis.call('HGETALL', lmkey('lim'))
local out = {}
for i = 1, #lim, 2 do
  local key, v = lim[i], lim[i + 1]
  local busy = 0
  local r, b = string.match(v, '^(%d+) (%d+)')
  r, b = tonumber(r), tonumber(b)
  if lb[key] and r > 0 and b > 0 then
    local tok, last = string.match(lb[key], '^(%-?%d+) (%d+)')
    tok, last = tonumber(tok), tonumber(last)
    if now > last then tok = tok + (now - last) * r end
    if tok < b * 1e6 then busy = 1 end
  end
  out[#out + 1] = key
  out[#out + 1] = v
  out[#out + 1] = tonumber(lc[key] or '0')
  out[#out + 1] = due[key] and redis.call('ZCARD', lmkey('pk:' .. key)) or 0
  out[#out + 1] = busy
end
return out
