-- progress.lua: the lease holder records how far its attempt got (lib.lua
-- set_progress); the task's reads show it as its progress.
-- KEYS: 1-8 see lib.lua.
-- ARGV: 1 clock, 2 id, 3 token, 4 percent (0..100), 5 message.
-- Returns: {RC.OK}; {RC.LEASE_LOST, state} lease lost; {RC.NOT_FOUND} not found.
local now = clock(ARGV[1])
local id, token = ARGV[2], ARGV[3]
local tk = tkey(id)
local r = redis.call('HMGET', tk, 'st', 'lt', 'at', 'pg')
if not r[1] then return {RC.NOT_FOUND} end
if r[1] ~= 'U' or r[2] ~= token then return {RC.LEASE_LOST, r[1]} end
set_progress(tk, r[3], r[4], ARGV[4], ARGV[5], now)
event('progress', {id}, 1)
return {RC.OK}
