-- handoff.lua: the definite answer of a hand-off's receiver, for a task in
-- the outbox. accepted: PENDING→HANDED_OFF (the record now forwards to the
-- region); refused: the task leaves the outbox and waits for placement
-- again (due set). Anything else keeps it in the outbox: the sender retries
-- the same target with the same id (see Store.HandOffRetry).
-- KEYS: 1-8 see lib.lua; 9 outbox.
-- ARGV: 1 clock, 2 id, 3 'accepted'|'refused', 4 forwarding retention ms.
-- Returns: {0} done; {1, state} not in the outbox (nothing changed).
local now = clock(ARGV[1])
local id, outcome = ARGV[2], ARGV[3]
local tk = tkey(id)
local r = redis.call('HMGET', tk, 'st', 'ob', 'at', 'po')
if r[1] ~= 'P' or not r[2] or redis.call('ZSCORE', KEYS[9], id) == false then
  return {1, r[1] or ''}
end
redis.call('ZREM', KEYS[9], id)
if outcome == 'accepted' then
  redis.call('HSET', tk, 'st', 'H', 'rs', 'HANDED_OFF', 'ho', r[2], 'fa', fmt(now))
  redis.call('HDEL', tk, 'ob')
  cnt('P', -1)
  cnt('tH', 1)
  trail(id, now, 'P', 'H', 'HANDED_OFF', r[2] .. '/' .. (r[4] or ''), r[3] or '0', '')
  retain(id, ARGV[4])
  event('handoff', {id}, 1)
else
  redis.call('HDEL', tk, 'ob', 'po')
  redis.call('ZADD', K_DUE, fmt(now), id)
  trail(id, now, 'P', 'P', 'HANDOFF_REFUSED', r[2], r[3] or '0', '')
end
return {0}
