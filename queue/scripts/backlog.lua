-- backlog.lua: reserve room in a tenant's backlog for tasks that will be
-- created later under known ids (a DAG run's nodes), or give
-- such room back. The reservation counts in bl (lib.lua backlog) as if the
-- tasks existed, and blr (task id → tenant) remembers which ids hold it:
-- submit.lua, for a task with flag 'v' whose id is in blr, takes the id
-- out of blr instead of counting the task again (and does not check it).
-- KEYS: 1-8 see lib.lua.
-- ARGV: 1 clock (unused), 2 'r' reserve or 'u' give back, 3 tenant ('' the
--   default), 4 cap (reserve: this shard's share of max_backlog), 5.. ids.
-- Returns: reserve: RC.OK reserved; RC.REFUSED refused (the tenant's count here plus
--   the ids would pass cap; nothing changed). Give back: how many ids held
--   room (each is taken out of blr and away from its tenant's count; the
--   others, released already or never reserved, change nothing).
local rkey = K_PREFIX .. 'blr'
if ARGV[2] == 'r' then
  local tn, cap, k = ARGV[3], tonumber(ARGV[4]), #ARGV - 4
  if backlog_now(tn) + k > cap then return RC.REFUSED end
  local f = {}
  for i = 5, #ARGV do
    f[#f + 1] = ARGV[i]; f[#f + 1] = tn
  end
  if k > 0 then redis.call('HSET', rkey, unpack(f)) end
  backlog(tn, k)
  return RC.OK
end
local n = 0
for i = 5, #ARGV do
  local tn = redis.call('HGET', rkey, ARGV[i])
  if tn then
    redis.call('HDEL', rkey, ARGV[i])
    backlog(tn, -1)
    n = n + 1
  end
end
return n
