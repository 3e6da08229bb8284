-- preempt.lua (leader, fenced): ask the worker running a task to stop it so
-- a more urgent task gets the slot. The worker learns it at its next
-- heartbeat (PREEMPTED), cancels the handler and gives the task back
-- without spending a retry (return.lua, reason PREEMPTED).
-- KEYS: 1-8 see lib.lua; 9 fence key.
-- ARGV: 1 clock, 2 fencing token, 3 id, 4 lease token the decision saw,
--       5 preemptor id (for the trail).
-- Returns: {RC.FENCED} fenced; {RC.OK} requested; {RC.ILLEGAL, why} refused (state changed,
--          not preemptible, already requested).
local now = clock(ARGV[1])
if not fence(KEYS[9], ARGV[2]) then return {RC.FENCED} end
local id = ARGV[3]
local r = redis.call('HMGET', tkey(id), 'st', 'lt', 'pe', 'pq', 'at', 'wk')
if r[1] ~= 'U' or r[2] ~= ARGV[4] then return {RC.ILLEGAL, 'NOT_RUNNING'} end
if r[3] ~= '1' then return {RC.ILLEGAL, 'NOT_PREEMPTIBLE'} end
if r[4] == '1' then return {RC.ILLEGAL, 'ALREADY_REQUESTED'} end
redis.call('HSET', tkey(id), 'pq', '1')
trail(id, now, 'U', 'U', 'PREEMPT_REQUESTED', 'leader', r[5] or '0', 'for ' .. ARGV[5])
event('preempt', {id}, 1)
return {RC.OK}
