-- progress.lua: the lease holder records how far its attempt got (a remote
-- worker's report); the task's reads show it as its progress.
-- KEYS: 1-8 see lib.lua.
-- ARGV: 1 clock, 2 id, 3 token, 4 progress (JSON text).
-- Returns: {RC.OK}; {RC.LEASE_LOST, state} lease lost; {RC.NOT_FOUND} not found.
local id, token = ARGV[2], ARGV[3]
local tk = tkey(id)
local r = redis.call('HMGET', tk, 'st', 'lt')
if not r[1] then return {RC.NOT_FOUND} end
if r[1] ~= 'U' or r[2] ~= token then return {RC.LEASE_LOST, r[1]} end
redis.call('HSET', tk, 'pg', ARGV[4])
return {RC.OK}
