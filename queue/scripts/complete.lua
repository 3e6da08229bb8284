-- complete.lua: RUNNING→SUCCESS for a batch, each only with its current
-- lease token.
-- Each success is a run-time observation of its (pool, type, tenant)
-- (lib.lua runtime): from its start (sa) to now, and a cost record (lib.lua cost).
-- The record and its trail are kept for the task's result_ttl (xt; else
-- the region's retention of successes) by the leader's sweep (lib.lua
-- retain_success), not by a TTL, while a sweeper is alive; by a TTL of it
-- otherwise. rx records when that ends (ms). The reason COMPLETED is
-- implied by st S (record.TaskReader): rs keeps why the task became READY.
-- KEYS: 1-8 see lib.lua; 9 run times.
-- ARGV: 1 clock, 2 n, 3 run-time pairs cap, 4 run-time weight alpha,
--       5 success retention ms, then per task: id, token, result, progress
--       ('' none; else as heartbeat.lua's, recorded first).
-- Returns: per task a code: RC.OK done; RC.LEASE_LOST lease lost (nothing changed); then,
-- if any, a pool where a tenant with work waiting is now below its floor
-- and by how many slots.
local now = clock(ARGV[1])
local snow = fmt(now)
local n = tonumber(ARGV[2])
local rtcap, alpha, ret = tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5]
local out, ids, ttls = {}, {}, {}
local upool, ufield -- the last success's pool and its running-count field
for k = 0, n - 1 do
  local id, token, result, pg = ARGV[6 + 4 * k], ARGV[7 + 4 * k], ARGV[8 + 4 * k], ARGV[9 + 4 * k]
  local tk = tkey(id)
  -- what a success needs of the record (a progress's attempt and last
  -- value only when the call brings one)
  local r = redis.call('HMGET', tk, 'st', 'lt', 'po', 'pq', 'ty', 'sa', 'tn', 'tg', 'px', 'lc', 'fs', 'xt', 'bt', 'se', 'sl', 'br')
  if r[1] ~= 'U' or r[2] ~= token then
    out[k + 1] = RC.LEASE_LOST
  else
    -- leave_running (lib.lua) with the running-set removal batched below;
    -- the lease token is blanked in the same HSET (an HDEL per task cost
    -- a command), a preemption request deleted only when there is one.
    if r[4] then redis.call('HDEL', tk, 'pq') end
    if pg ~= '' then
      local pct, msg = string.match(pg, '^([^\t]*)\t(.*)$')
      local a = redis.call('HMGET', tk, 'at', 'pg')
      set_progress(tk, a[1], a[2], pct, msg or '', now)
    end
    local ttl = tonumber(r[12])
    local rx = fmt(now + (ttl or tonumber(ret)))
    if r[10] and r[10] ~= '' then
      release_add(r[10]) -- concurrency held under a limit (lib.lua)
      if result ~= '' then
        redis.call('HSET', tk, 'st', 'S', 'fa', snow, 'lt', '', 'lc', '', 'rx', rx, 'rv', result)
      else
        redis.call('HSET', tk, 'st', 'S', 'fa', snow, 'lt', '', 'lc', '', 'rx', rx)
      end
    elseif result ~= '' then
      redis.call('HSET', tk, 'st', 'S', 'fa', snow, 'lt', '', 'rx', rx, 'rv', result)
    else
      redis.call('HSET', tk, 'st', 'S', 'fa', snow, 'lt', '', 'rx', rx)
    end
    if r[11] then fair_release(r[3], r[11], r[15]) end -- its slots in the pool's fair share (lib.lua)
    if r[3] ~= upool then upool, ufield = r[3], 'u:' .. r[3] end
    cnt(ufield, -1)
    slot_gap(r[3], r[15], -1)
    backlog_task(r[7], -1, id)
    batch_end(id, 'S', r[13], r[14], r[16], r[7])
    if r[6] then
      runtime(r[3], r[5], r[7], now - tonumber(r[6]))
      cost(r[7], r[5], r[3], r[8], r[9], now - tonumber(r[6]), false, r[15])
    end
    out[k + 1] = RC.OK
    ids[#ids + 1] = id
    ttls[#ids] = ttl
  end
end
if #ids > 0 then
  redis.call('ZREM', K_RUNNING, unpack(ids))
  cnt('U', -#ids)
  cnt('tS', #ids)
  write_runtimes(KEYS[9], now, rtcap, alpha)
  write_costs(now)
  retain_success(now, ids, ret, ttls)
  release_flush()
  local owed, by = fair_flush()
  if owed then out[n + 1] = owed; out[n + 2] = by end
end
event('complete', ids, #ids)
return out
