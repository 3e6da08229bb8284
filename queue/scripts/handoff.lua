-- handoff.lua: the definite answers of hand-off receivers, for tasks in the
-- outbox of one shard (one answer, or a batch's). accepted: PENDING→
-- HANDED_OFF (the record now forwards to the region); refused: the task
-- leaves the outbox and waits for placement again (due set). Anything else
-- keeps it in the outbox: the sender retries the same target with the same
-- id (see Store.HandOffRetry).
-- KEYS: 1-8 see lib.lua; 9 outbox; 10 fence key (when fenced).
-- A cancel requested while the hand-off was in flight (cx): an 'accepted'
-- answer that did not carry it out ('accepted-canceled' did) leaves the
-- task in the outbox, due now, to be sent again with the cancel; a refusal
-- cancels it here (PENDING→CANCELED) instead of placing it again.
-- The answers are the region leader's (its outbox loop), fenced: a leader
-- deposed while a request was in flight records nothing, so only one term's
-- answers about a task are ever recorded (two terms' differing answers
-- about one id, refused then accepted, would otherwise run it twice).
-- ARGV: 1 clock, 2 forwarding retention ms, 3 canceled retention ms,
--   4 fencing token ('' = not fenced), then per task: id,
--   'accepted'|'accepted-canceled'|'refused'|'revoked' (refused by the
--   sender itself: the target stayed unreachable past the horizon; the
--   target holds any copy it got until told, held.lua).
-- Returns: {RC.FENCED} fenced; else one entry per task, in order: '0' done; '2' to
--   be sent again with the cancel; '1' followed by its state code ('1' alone
--   when there is no record) when the task is not in the outbox (nothing
--   changed for it).
if ARGV[4] ~= '' and not fence(KEYS[10], ARGV[4]) then return {RC.FENCED} end
local now = clock(ARGV[1])
local snow = fmt_now(now)
local out = {}
local handed = {}
for i = 5, #ARGV, 2 do
  local id, outcome = ARGV[i], ARGV[i + 1]
  local tk = tkey(id)
  local r = redis.call('HMGET', tk, 'st', 'ob', 'at', 'po', 'cx', 'tn')
  local cx = r[5] == '1'
  if r[1] ~= 'P' or not r[2] or redis.call('ZSCORE', KEYS[9], id) == false then
    out[#out + 1] = '1' .. (r[1] or '')
  elseif outcome == 'accepted' and cx then
    redis.call('ZADD', KEYS[9], snow, id) -- again, now, with the cancel
    out[#out + 1] = '2'
  elseif outcome ~= 'accepted' and outcome ~= 'accepted-canceled' and cx then
    redis.call('ZREM', KEYS[9], id)
    redis.call('HSET', tk, 'st', 'C', 'rs', 'CANCELED_BY_USER', 'fa', snow)
    redis.call('HDEL', tk, 'ob', 'cx')
    cnt('P', -1)
    cnt('tC', 1)
    backlog_task(r[6], -1, id)
    batch_end(id, 'C')
    trail(id, now, 'P', 'C', 'CANCELED_BY_USER', r[2], r[3] or '0', 'the hand-off was refused after a cancel request')
    retain(id, ARGV[3])
    out[#out + 1] = '0'
  else
    redis.call('ZREM', KEYS[9], id)
    if outcome == 'accepted' or outcome == 'accepted-canceled' then
      redis.call('HSET', tk, 'st', 'H', 'rs', 'HANDED_OFF', 'ho', r[2], 'fa', snow)
      redis.call('HDEL', tk, 'ob', 'cx')
      cnt('P', -1)
      cnt('tH', 1)
      backlog_task(r[6], -1, id) -- it left the region
      trail(id, now, 'P', 'H', 'HANDED_OFF', r[2] .. '/' .. (r[4] or ''), r[3] or '0', '')
      retain(id, ARGV[2])
      handed[#handed + 1] = id
    else
      redis.call('HDEL', tk, 'ob', 'po')
      zadd(K_DUE, snow, id)
      local why = 'HANDOFF_REFUSED'
      if outcome == 'revoked' then why = 'HANDOFF_REVOKED' end
      trail(id, now, 'P', 'P', why, r[2], r[3] or '0', '')
    end
    out[#out + 1] = '0'
  end
end
event('handoff', handed, #handed)
return out
