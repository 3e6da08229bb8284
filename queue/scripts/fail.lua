-- fail.lua: the lease holder reports a failed attempt. RUNNING→PENDING
-- (retry with backoff) or RUNNING→FAILED (dead letters); RUNNING→CANCELED
-- when a cancel was requested meanwhile; past the deadline RUNNING→TIMEOUT
-- →PENDING or →FAILED.
-- An attempt that ran into its deadline is a run-time observation of its
-- (pool, type, tenant) (lib.lua runtime): the work takes at least that long there.
-- Other failures are not: how soon a handler fails says nothing of how
-- long the work takes, and a pool failing a type at once would look the
-- fastest and draw all of it.
-- Every attempt that ran is a cost record (lib.lua cost), counted failed.
-- KEYS: 1-8 see lib.lua; 9 run times.
-- ARGV: 1 clock, 2 id, 3 token, 4 error, 5 retryable '1'|'0', 6 jitter 0..999,
--       7 dead retention ms, 8 canceled retention ms, 9 reason for the step
--       (HANDLER_ERROR, DEADLINE_EXCEEDED, ...), 10-12 region defaults for
--       max_retries, retry_base ms, retry_cap ms (for records that omit them),
--       13 run-time pairs cap, 14 run-time weight alpha.
-- Returns: {RC.OK, new state code, due_ms or '0'}; {RC.LEASE_LOST, state} lease lost; {RC.NOT_FOUND} not found.
local now = clock(ARGV[1])
local id, token, err = ARGV[2], ARGV[3], ARGV[4]
local tk = tkey(id)
local r = redis.call('HMGET', tk, 'st', 'lt', 'at', 'mr', 'rb', 'rc', 'po', 'rt', 'sa', 'wk', 'cx', 'ty', 'tn', 'tg', 'px', 'sl')
if not r[1] then return {RC.NOT_FOUND} end
if r[1] ~= 'U' or r[2] ~= token then return {RC.LEASE_LOST, r[1]} end
leave_running(id, r[7])
flush(id, r[8], r[9], r[10], r[3])
redis.call('HSET', tk, 'er', err)
if r[9] then
  cost(r[13], r[12], r[7], r[14], r[15], now - tonumber(r[9]), true, r[16])
  write_costs(now)
end
if r[11] == '1' then
  redis.call('HSET', tk, 'st', 'C', 'rs', 'CANCELED_BY_USER', 'fa', fmt(now))
  cnt('tC', 1)
  backlog_task(r[13], -1, id)
  batch_end(id, 'C')
  trail(id, now, 'U', 'C', 'CANCELED_BY_USER', r[10], r[3], err)
  retain(id, ARGV[8])
  event('cancel', {id}, 1)
  return {RC.OK, 'C', '0'}
end
if ARGV[9] == 'DEADLINE_EXCEEDED' and r[9] then
  runtime(r[7], r[12], r[13], now - tonumber(r[9]))
  write_runtimes(KEYS[9], now, tonumber(ARGV[13]), tonumber(ARGV[14]))
end
-- An attempt that ran past its deadline goes through TIMEOUT, as a reaped
-- one does, so the trail keeps DEADLINE_EXCEEDED also when it ends FAILED
-- with RETRIES_EXHAUSTED.
local from = 'U'
if ARGV[9] == 'DEADLINE_EXCEEDED' and ARGV[5] == '1' then
  trail(id, now, 'U', 'T', 'DEADLINE_EXCEEDED', r[10], r[3], err)
  from = 'T'
end
local st, due = retry_or_dead(id, now, tonumber(r[3]), tonumber(r[4] or ARGV[10]), tonumber(r[5] or ARGV[11]),
  tonumber(r[6] or ARGV[12]), from, ARGV[9], r[10], err, ARGV[5] == '1', tonumber(ARGV[6]), ARGV[7])
event(st == 'F' and 'dead' or 'retry', {id}, 1)
return {RC.OK, st, fmt(due)}
