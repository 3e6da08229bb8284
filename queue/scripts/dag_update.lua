-- dag_update.lua: apply node transitions of one DAG run (region leader only,
-- fenced), each only while the node is still in the state it was read in, so
-- applying the same outcome or release twice changes nothing; end the run
-- when every node is terminal.
-- KEYS: 1 definition, 2 run, 3 nodes, 4 fence (all with the run's hash tag
--   {dag:<id>}; KEYS[1..8] of lib.lua do not apply).
-- ARGV: 1 clock, 2 fencing token, 3 retention ms of a SUCCESS run, 4 of a
--   FAILED run, 5 of a CANCELED run, 6 n, then n triples: node id, expected
--   state code (W or R), new value without its time
--   ("code|reason|attempts|region|pool").
-- Node codes: W waiting, R released, S success, F failed, C canceled,
--   K skipped. A run whose cancel was requested (run field cx, dag_cancel.lua)
--   ends CANCELED, and no step releases a node of it; otherwise a run ends
--   FAILED when any node is F or C, else SUCCESS. With a cancel requested the
--   end is checked even when no step applies (n may be 0), since the cancel
--   itself may have settled the last nodes.
-- Returns: {RC.FENCED} fenced (a newer leader exists); {RC.DAG_NOT_FOUND} no such run;
--   {applied, released, run state, ended, canceling} — released counts the
--   applied W→R steps, ended is 1 only for the call that ended the run,
--   canceling is 1 when a cancel was requested.
if not fence(KEYS[4], ARGV[2]) then return {RC.FENCED} end
local r = redis.call('HMGET', KEYS[2], 'st', 'cx')
local st, cx = r[1], r[2]
if not st then return {RC.DAG_NOT_FOUND} end
local canceling = 0
if cx then canceling = 1 end
if st ~= 'RUNNING' then return {0, 0, st, 0, canceling} end
local now = fmt(clock(ARGV[1]))
local n = tonumber(ARGV[6])
local applied, released = 0, 0
for i = 0, n - 1 do
  local node, from, val = ARGV[7 + 3 * i], ARGV[8 + 3 * i], ARGV[9 + 3 * i]
  local to = string.sub(val, 1, 1)
  local cur = redis.call('HGET', KEYS[3], node)
  if cur and string.sub(cur, 1, 1) == from and not (cx and to == 'R') then
    redis.call('HSET', KEYS[3], node, val .. '|' .. now)
    applied = applied + 1
    if to == 'R' then released = released + 1 end
  end
end
if applied == 0 and not cx then return {0, 0, st, 0, canceling} end
local failed = false
for _, v in ipairs(redis.call('HVALS', KEYS[3])) do
  local c = string.sub(v, 1, 1)
  if c == 'W' or c == 'R' then return {applied, released, st, 0, canceling} end
  if c == 'F' or c == 'C' then failed = true end
end
st = 'SUCCESS'
local ret = ARGV[3]
if cx then
  st, ret = 'CANCELED', ARGV[5]
elseif failed then
  st, ret = 'FAILED', ARGV[4]
end
redis.call('HSET', KEYS[2], 'st', st, 'fa', now)
for k = 1, 4 do redis.call('PEXPIRE', KEYS[k], ret) end
return {applied, released, st, 1, canceling}
