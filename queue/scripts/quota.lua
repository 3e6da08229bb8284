-- quota.lua: a tenant's submit quota, shared by every server of the region
-- (docs/security.md): one token bucket per tenant in one key, refilled at
-- rate tasks/s and holding at most burst; a submit takes one per task or,
-- when they are not there, nothing.
-- KEYS: 1-8 see lib.lua (unused); 9 the tenant's bucket, STRING
--   "<micro-tasks> <last ms>", expiring once it would be full again.
-- ARGV: 1 clock, 2 rate in micro-tasks per ms (= tasks/s × 1000), 3 burst,
--   4 tasks asked.
-- Returns: {RC.OK} taken; {RC.REFUSED, ms} refused: the wait until they
--   would be there.
local now = clock(ARGV[1])
local rate, burst, n = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local full = burst * 1e6
local tok = full
local v = redis.call('GET', KEYS[9])
if v then
  local a, t = string.match(v, '^(%d+) (%d+)$')
  if a then
    tok = tonumber(a)
    local dt = now - tonumber(t)
    if dt > 0 then tok = math.min(full, tok + dt * rate) end
  end
end
local need = n * 1e6
if tok < need then
  return {RC.REFUSED, fmt(math.ceil((need - tok) / rate))}
end
tok = tok - need
redis.call('SET', KEYS[9], string.format('%d %d', tok, now), 'PX', fmt(math.ceil((full - tok) / rate) + 1000))
return {RC.OK}
