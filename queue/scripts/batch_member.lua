-- batch_member.lua: count members' ends in their batch, each once, and
-- complete the batch with its last one. A member's first report counts;
-- a report again (the reporter resent a list it could not trim, or a
-- member's end came from two regions) changes nothing. Sealing (ARGV[2]
-- '1') marks the batch as holding all its members: before that, a batch
-- whose recorded members all ended is not complete (more are coming).
-- The call that completes the batch sets its state COMPLETED, its end
-- time, and its callback due (cb = 'due', when it has one) in the same
-- step, so a completion is never without its callback to send: whoever
-- sends it marks it sent (field cb 'sent') and the home region leader
-- sends any left due (package batch, Batches.Recover).
-- KEYS: 1 batch hash, 2 member → code hash (the batch's hash tag
--   {batch:<id>}; KEYS[1..8] of lib.lua do not apply).
-- ARGV: 1 clock, 2 seal '1'|'0', then pairs: member id, code (S, F or C).
-- Returns: {RC.BATCH_NOT_FOUND} no such batch (expired, or never stored);
--   {RC.OK, applied, completed (1: this call completed it), state, cb}.
local r = redis.call('HMGET', KEYS[1], 'st', 'n', 'ok', 'fl', 'cx', 'sl', 'cb')
if not r[1] then return {RC.BATCH_NOT_FOUND} end
local field = {S = 'ok', F = 'fl', C = 'cx'}
local c = {ok = tonumber(r[3] or '0'), fl = tonumber(r[4] or '0'), cx = tonumber(r[5] or '0')}
local applied = 0
for i = 3, #ARGV, 2 do
  local f = field[ARGV[i + 1]]
  if f and redis.call('HSETNX', KEYS[2], ARGV[i], ARGV[i + 1]) == 1 then
    c[f] = c[f] + 1
    applied = applied + 1
  end
end
if applied > 0 then redis.call('HSET', KEYS[1], 'ok', c.ok, 'fl', c.fl, 'cx', c.cx) end
local sealed = r[6] == '1'
if ARGV[2] == '1' and not sealed then
  redis.call('HSET', KEYS[1], 'sl', '1')
  sealed = true
end
local cb = r[7] or ''
if r[1] ~= 'RUNNING' or not sealed or c.ok + c.fl + c.cx < tonumber(r[2] or '0') then
  return {RC.OK, applied, 0, r[1], cb}
end
if cb == 'none' then
  redis.call('HSET', KEYS[1], 'st', 'COMPLETED', 'fa', fmt(clock(ARGV[1])))
else
  cb = 'due'
  redis.call('HSET', KEYS[1], 'st', 'COMPLETED', 'fa', fmt(clock(ARGV[1])), 'cb', cb)
end
return {RC.OK, applied, 1, 'COMPLETED', cb}
