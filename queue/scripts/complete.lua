-- complete.lua: RUNNING→SUCCESS for a batch, each only with its current
-- lease token.
-- KEYS: 1-8 see lib.lua.
-- ARGV: 1 clock, 2 retention_ms, 3 n, then per task: id, token, result.
-- Returns: per task a code: 0 done; 1 lease lost (nothing changed).
local now = clock(ARGV[1])
local ret, n = ARGV[2], tonumber(ARGV[3])
local out, ids = {}, {}
for k = 0, n - 1 do
  local id, token, result = ARGV[4 + 3 * k], ARGV[5 + 3 * k], ARGV[6 + 3 * k]
  local tk = tkey(id)
  local r = redis.call('HMGET', tk, 'st', 'lt', 'po')
  if r[1] ~= 'U' or r[2] ~= token then
    out[k + 1] = 1
  else
    leave_running(id, r[3])
    redis.call('HSET', tk, 'st', 'S', 'rs', 'COMPLETED', 'fa', fmt(now))
    if result ~= '' then redis.call('HSET', tk, 'rv', result) end
    cnt('tS', 1)
    retain(id, ret)
    out[k + 1] = 0
    ids[#ids + 1] = id
  end
end
event('complete', ids, #ids)
return out
