-- batch_add.lua: record members of an open batch (its create stores them
-- part by part as the submit pipeline accepts them).
-- KEYS: 1 batch hash, 2 member id list (the batch's hash tag
--   {batch:<id>}; KEYS[1..8] of lib.lua do not apply).
-- ARGV: member ids.
-- Returns: {RC.OK, members recorded}; {RC.BATCH_NOT_FOUND} no such batch.
if redis.call('EXISTS', KEYS[1]) == 0 then return {RC.BATCH_NOT_FOUND} end
if #ARGV > 0 then
  for i = 1, #ARGV, 1000 do
    redis.call('RPUSH', KEYS[2], unpack(ARGV, i, math.min(i + 999, #ARGV)))
  end
end
return {RC.OK, redis.call('HINCRBY', KEYS[1], 'n', #ARGV)}
