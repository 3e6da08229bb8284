-- dag_cancel.lua: a user's cancel of one DAG run, run by any server of the
-- home region (not fenced: see Store.CancelDAG for why that is safe). On a
-- RUNNING run it records the request once (cx, cb) and moves every WAITING
-- node to CANCELED at once, so no node is released afterwards: the leader's
-- releases are compare-and-set on WAITING (dag_update.lua) and find the node
-- moved on. RELEASED nodes are left to their tasks: the caller cancels those,
-- and the leader records their outcomes and ends the run CANCELED. A run that
-- ended, or another tenant's, is left as it is.
-- KEYS: 1 run, 2 nodes (both with the run's hash tag {dag:<id>}; KEYS[1..8]
--   of lib.lua do not apply).
-- ARGV: 1 clock, 2 tenant ('' = any; another tenant's run answers as
--   missing), 3 by (who asked), 4 value of a node canceled here without its
--   time ("C|CANCELED_BY_USER|0||").
-- Returns: {RC.DAG_NOT_FOUND} no such run (or another tenant's); {first, canceled, run
--   state, cx} — first is 1 only for the call that recorded the request,
--   canceled counts the WAITING nodes this call moved, cx is the time of the
--   request in ms ('' when the run ended without one).
local r = redis.call('HMGET', KEYS[1], 'st', 'tn', 'cx')
local st, tn, cx = r[1], r[2], r[3]
if not st then return {RC.DAG_NOT_FOUND} end
if ARGV[2] ~= '' and tn ~= ARGV[2] then return {RC.DAG_NOT_FOUND} end
if st ~= 'RUNNING' then return {0, 0, st, cx or ''} end
local now = fmt(clock(ARGV[1]))
local first = 0
if not cx then
  cx, first = now, 1
  redis.call('HSET', KEYS[1], 'cx', now, 'cb', ARGV[3])
end
-- After the first call no node is WAITING (nothing moves a node back to
-- WAITING), so a repeat writes nothing.
local f, canceled = {}, 0
local all = redis.call('HGETALL', KEYS[2])
for i = 1, #all, 2 do
  if string.sub(all[i + 1], 1, 1) == 'W' then
    f[#f + 1] = all[i]
    f[#f + 1] = ARGV[4] .. '|' .. now
    canceled = canceled + 1
  end
end
-- At most 1 000 nodes a run: 2 000 values, well within unpack's limit.
if #f > 0 then redis.call('HSET', KEYS[2], unpack(f)) end
return {first, canceled, st, cx}
