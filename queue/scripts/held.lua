-- held.lua: settle hand-offs held for their sender's word (submit.lua flag
-- 'k'). A received hand-off is stored PENDING in the held set, where no
-- claim, promotion or placement reads it, until the region that sent it
-- says what its own record became (docs/architecture.md, hand-off):
--   release — the sender recorded the hand-off (its record forwards here):
--     the task goes where it would have gone when it arrived: READY in its
--     pool, or the delayed set until its due time;
--   drop — the sender placed it elsewhere (it revoked the hand-off, or
--     recorded a refusal): the record and its trail go; this region never
--     ran it and never will;
--   forward — drop for the task's home region (a task handed back home):
--     the record becomes a forwarding record to the sender again
--     (HANDED_OFF), which knows where the task went, so its id still
--     leads to it.
-- The sender's record is the one decision: it moves to HANDED_OFF only
-- from "in the outbox for this region", and is placed again only from
-- there too, so at most one region ever runs the task.
-- KEYS: 1-8 see lib.lua; 9 held.
-- ARGV: 1 clock, 2 'release'|'drop'|'forward', 3 the sender's region,
--   4 forwarding retention ms, then ids.
-- Returns: one code per id, in order: '0' done; '1' not held from that
--   region (released or dropped before, canceled, or not here).
local now = clock(ARGV[1])
local snow = fmt_now(now)
local op, from = ARGV[2], ARGV[3]
local out = {}
local released = {}
for i = 5, #ARGV do
  local id = ARGV[i]
  local tk = tkey(id)
  local r = redis.call('HMGET', tk, 'st', 'hf', 'po', 'pr', 'du', 'at')
  if r[1] ~= 'P' or r[2] ~= from or redis.call('ZREM', KEYS[9], id) == 0 then
    out[#out + 1] = '1'
  elseif op == 'drop' then
    cnt('hd', -1)
    backlog_end(id) -- it leaves the region unrun
    redis.call('DEL', tk, lkey(id))
    cnt('P', -1)
    out[#out + 1] = '0'
  elseif op == 'forward' then
    cnt('hd', -1)
    backlog_end(id)
    redis.call('HSET', tk, 'st', 'H', 'rs', 'HANDED_OFF', 'ho', from, 'fa', snow)
    redis.call('HDEL', tk, 'hf', 'du')
    cnt('P', -1)
    trail(id, now, 'P', 'H', 'HANDED_OFF', from, r[6] or '0', 'the hand-off back was revoked by ' .. from)
    retain(id, ARGV[4])
    out[#out + 1] = '0'
  else
    cnt('hd', -1)
    redis.call('HDEL', tk, 'hf')
    local due = tonumber(r[5] or '')
    if due and due > now then
      redis.call('ZADD', K_DELAYED, r[5], id)
    else
      cnt('P', -1)
      make_ready(id, now, r[3], r[4] or '2', snow, 'COMMITTED', true)
      -- The READY step is logged (naming the sender); hx = rt tells the
      -- trail reader not to add it again from the record (read.go).
      redis.call('HSET', tk, 'hx', snow)
      trail(id, now, 'P', 'R', 'COMMITTED', from, r[6] or '0', '')
    end
    released[#released + 1] = id
    out[#out + 1] = '0'
  end
end
event('release', released, #released)
return out
