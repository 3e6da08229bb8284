-- dag_create.lua: store a new DAG run — its definition, the run RUNNING and
-- every node's first state — unless a run with this id exists.
-- KEYS: 1 definition, 2 run, 3 nodes (every key has the run's hash tag
--   {dag:<id>}; KEYS[1..8] of lib.lua do not apply).
-- ARGV: 1 clock, 2 definition (JSON), 3 tenant, 4 name, 5 n, then n pairs:
--   node id, node value without its time ("code|reason|attempts|region|pool").
-- Returns: RC.OK created; RC.EXISTS a run with this id exists (nothing
--   changed).
if redis.call('EXISTS', KEYS[2]) == 1 then return RC.EXISTS end
local now = fmt(clock(ARGV[1]))
redis.call('SET', KEYS[1], ARGV[2])
redis.call('HSET', KEYS[2], 'st', 'RUNNING', 'tn', ARGV[3], 'nm', ARGV[4], 'ct', now)
local n = tonumber(ARGV[5])
local f = {}
for i = 1, n do
  f[#f + 1] = ARGV[4 + 2 * i]
  f[#f + 1] = ARGV[5 + 2 * i] .. '|' .. now
end
redis.call('HSET', KEYS[3], unpack(f))
return RC.OK
