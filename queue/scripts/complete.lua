-- complete.lua: RUNNING→SUCCESS for a batch, each only with its current
-- lease token.
-- Each success is a run-time observation of its (pool, type) (lib.lua
-- runtime): from its start (sa) to now, and a cost record (lib.lua cost).
-- KEYS: 1-8 see lib.lua; 9 run times.
-- ARGV: 1 clock, 2 retention_ms, 3 n, 4 run-time pairs cap, 5 run-time
--       weight alpha, then per task: id, token, result.
-- Returns: per task a code: 0 done; 1 lease lost (nothing changed).
local now = clock(ARGV[1])
local snow = fmt(now)
local ret, n = ARGV[2], tonumber(ARGV[3])
local rtcap, alpha = tonumber(ARGV[4]), tonumber(ARGV[5])
local out, ids = {}, {}
for k = 0, n - 1 do
  local id, token, result = ARGV[6 + 3 * k], ARGV[7 + 3 * k], ARGV[8 + 3 * k]
  local tk = tkey(id)
  local r = redis.call('HMGET', tk, 'st', 'lt', 'po', 'lg', 'pq', 'ty', 'sa', 'tn', 'tg', 'px', 'lc', 'fs')
  if r[1] ~= 'U' or r[2] ~= token then
    out[k + 1] = 1
  else
    -- leave_running (lib.lua) with the running-set removal batched below;
    -- the lease token is blanked in the same HSET (an HDEL per task cost
    -- a command), a preemption request deleted only when there is one.
    if r[5] then redis.call('HDEL', tk, 'pq') end
    if r[11] and r[11] ~= '' then
      release_add(r[11]) -- concurrency held under a limit (lib.lua)
      if result ~= '' then
        redis.call('HSET', tk, 'st', 'S', 'rs', 'COMPLETED', 'fa', snow, 'lt', '', 'lc', '', 'rv', result)
      else
        redis.call('HSET', tk, 'st', 'S', 'rs', 'COMPLETED', 'fa', snow, 'lt', '', 'lc', '')
      end
    elseif result ~= '' then
      redis.call('HSET', tk, 'st', 'S', 'rs', 'COMPLETED', 'fa', snow, 'lt', '', 'rv', result)
    else
      redis.call('HSET', tk, 'st', 'S', 'rs', 'COMPLETED', 'fa', snow, 'lt', '')
    end
    if r[12] then fair_release(r[3], r[12]) end -- its slot in the pool's fair share (lib.lua)
    cnt('u:' .. r[3], -1)
    backlog(r[8], -1)
    retain(id, ret, r[4] == '1')
    if r[7] then
      runtime(r[3], r[6], now - tonumber(r[7]))
      cost(r[8], r[6], r[3], r[9], r[10], now - tonumber(r[7]), false)
    end
    out[k + 1] = 0
    ids[#ids + 1] = id
  end
end
if #ids > 0 then
  redis.call('ZREM', K_RUNNING, unpack(ids))
  cnt('U', -#ids)
  cnt('tS', #ids)
  write_runtimes(KEYS[9], now, rtcap, alpha)
  write_costs(now)
  release_flush()
  fair_flush()
end
event('complete', ids, #ids)
return out
