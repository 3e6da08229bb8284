-- batch_idem.lua: a batch idempotency key (queue/batchstore/idem.go).
-- KEYS: 1 the key ("bidem:<tenant>:<key>"; KEYS[1..8] of lib.lua do not
--   apply). Its value is "<p|d> <hash> <batch id>": p while a create holds
--   it (a lease), d once that create stored its batch (the key's TTL).
-- ARGV: 1 op, 2 hash, 3 batch id, 4 ms.
--   claim: an absent key becomes "p <hash> <id>" for ms; a held key is
--     left as it is.
--   touch: the caller's pending value ("p <hash> <id>") lives ms more.
--   settle: the caller's pending value (or none: its lease lapsed) becomes
--     "d <hash> <id>" for ms.
--   release: the caller's pending value is deleted.
-- Returns: the value held before the call ('' none). touch, settle and
--   release change nothing when another value is held.
local v = redis.call('GET', KEYS[1]) or ''
local mine = 'p ' .. ARGV[2] .. ' ' .. ARGV[3]
local op = ARGV[1]
if op == 'claim' then
  if v == '' then redis.call('SET', KEYS[1], mine, 'PX', ARGV[4]) end
elseif op == 'touch' then
  if v == mine then redis.call('PEXPIRE', KEYS[1], ARGV[4]) end
elseif op == 'settle' then
  if v == mine or v == '' then redis.call('SET', KEYS[1], 'd ' .. ARGV[2] .. ' ' .. ARGV[3], 'PX', ARGV[4]) end
elseif op == 'release' then
  if v == mine then redis.call('DEL', KEYS[1]) end
end
return v
