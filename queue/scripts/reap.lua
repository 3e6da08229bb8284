-- reap.lua (leader, fenced): expired leases go through TIMEOUT (recorded in
-- the trail) to PENDING with backoff, FAILED when retries are spent, or
-- CANCELED when a cancel was requested. A lease expiry spends a retry.
-- Each expired attempt is a cost record (claim to lease expiry, failed).
-- KEYS: 1-8 see lib.lua; 9 fence key.
-- ARGV: 1 clock, 2 fencing token, 3 limit (≤ 1000), 4 jitter seed,
--       5 dead retention ms, 6 canceled retention ms, 7-9 region defaults for
--       max_retries, retry_base ms, retry_cap ms, 10 default timeout ms.
-- Returns: {RC.FENCED} when fenced; else {reaped, next_expiry_ms or ''}.
local now = clock(ARGV[1])
if not fence(KEYS[9], ARGV[2]) then return {RC.FENCED} end
local ids = redis.call('ZRANGEBYSCORE', K_RUNNING, '-inf', fmt(now), 'LIMIT', 0, tonumber(ARGV[3]))
local seed = tonumber(ARGV[4])
local done = {}
for k, id in ipairs(ids) do
  local tk = tkey(id)
  local r = redis.call('HMGET', tk, 'st', 'at', 'mr', 'rb', 'rc', 'po', 'rt', 'sa', 'wk', 'cx', 'to', 'ty', 'tn', 'tg', 'px', 'sl')
  if r[1] ~= 'U' then
    redis.call('ZREM', K_RUNNING, id) -- stale entry; nothing else to undo
  else
    -- The slot was held from the claim until the lease ran out (the
    -- handler may have stopped earlier; nobody can say when): a cost
    -- record, counted failed.
    local expiry = tonumber(redis.call('ZSCORE', K_RUNNING, id) or fmt(now))
    if r[8] then cost(r[13], r[12], r[6], r[14], r[15], math.min(expiry, now) - tonumber(r[8]), true, r[16]) end
    leave_running(id, r[6])
    flush(id, r[7], r[8], r[9], r[2])
    local why = 'HEARTBEAT_LOST'
    -- The attempt's deadline: started + timeout (claim does not store it).
    if r[8] and now >= tonumber(r[8]) + tonumber(r[11] or ARGV[10]) then why = 'DEADLINE_EXCEEDED' end
    trail(id, now, 'U', 'T', why, 'reaper', r[2], '')
    redis.call('HSET', tk, 'er', why)
    if r[10] == '1' then
      redis.call('HSET', tk, 'st', 'C', 'rs', 'CANCELED_BY_USER', 'fa', fmt(now))
      cnt('tC', 1)
      backlog_end(id)
      batch_end(id, 'C')
      trail(id, now, 'T', 'C', 'CANCELED_BY_USER', 'reaper', r[2], '')
      retain(id, ARGV[6])
    else
      retry_or_dead(id, now, tonumber(r[2]), tonumber(r[3] or ARGV[7]), tonumber(r[4] or ARGV[8]),
        tonumber(r[5] or ARGV[9]),
        'T', why, 'reaper', '', true, (seed + k * 7919) % 1000, ARGV[5])
    end
    done[#done + 1] = id
  end
end
write_costs(now)
event('reap', done, #done)
local nxt = redis.call('ZRANGE', K_RUNNING, 0, 0, 'WITHSCORES')
return {#done, nxt[2] or ''}
