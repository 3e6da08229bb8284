-- submit.lua: accept a batch of new tasks (—→PENDING or —→READY).
-- KEYS: 1-8 see lib.lua; 9 outbox; 10.. the idempotency keys of the keyed tasks, in order.
-- ARGV: 1 clock, 2 n, then per task:
--   id, pool ('' = unplaced), priority, due_ms ('' = now), idem_index (0 = none,
--   else KEYS[8+idem_index]), idem_ttl_ms, spec_hash, handoff region ('' = none:
--   else the task waits in the outbox to be handed to pool in that region),
--   nf, then nf field/value pairs.
-- Returns: per task 3 values: code, id, state
--   code 0 created; 1 duplicate of an earlier task with the same key and spec
--   (id and state are that task's); 2 key reused with another spec (id of the
--   first task); 3 a task with this id already exists.
local now = clock(ARGV[1])
local n = tonumber(ARGV[2])
local out = {}
local created = {}
local i = 3
for _ = 1, n do
  local id, pool, prio, due = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  local idx, ttl, hash, target = tonumber(ARGV[i + 4]), ARGV[i + 5], ARGV[i + 6], ARGV[i + 7]
  local nf = tonumber(ARGV[i + 8])
  local fstart = i + 9
  i = fstart + 2 * nf
  local done = false
  if idx > 0 then
    local v = redis.call('GET', KEYS[9 + idx])
    if v then
      local sep = string.find(v, '|', 1, true)
      local eid, eh = string.sub(v, 1, sep - 1), string.sub(v, sep + 1)
      if eh == hash then
        local est = redis.call('HGET', tkey(eid), 'st') or ''
        out[#out + 1] = 1; out[#out + 1] = eid; out[#out + 1] = est
      else
        out[#out + 1] = 2; out[#out + 1] = eid; out[#out + 1] = ''
      end
      done = true
    end
  end
  if not done and redis.call('EXISTS', tkey(id)) == 1 then
    out[#out + 1] = 3; out[#out + 1] = id; out[#out + 1] = redis.call('HGET', tkey(id), 'st') or ''
    done = true
  end
  if not done then
    local f = {}
    for j = fstart, fstart + 2 * nf - 1 do f[#f + 1] = ARGV[j] end
    f[#f + 1] = 'ct'; f[#f + 1] = fmt(now)
    f[#f + 1] = 'pr'; f[#f + 1] = prio
    redis.call('HSET', tkey(id), unpack(f))
    local dueN = tonumber(due)
    local st
    if dueN and dueN > now then
      redis.call('HSET', tkey(id), 'st', 'P', 'rs', 'SUBMITTED', 'du', due)
      redis.call('ZADD', K_DELAYED, due, id)
      cnt('P', 1)
      st = 'P'
    elseif target ~= '' then
      redis.call('HSET', tkey(id), 'st', 'P', 'rs', 'SUBMITTED', 'ob', target, 'po', pool)
      redis.call('ZADD', KEYS[9], fmt(now), id)
      cnt('P', 1)
      st = 'P'
    elseif pool ~= '' then
      local eq = fmt(now)
      redis.call('HSET', tkey(id), 'st', 'R', 'po', pool, 'eq', eq, 'rt', eq) -- reason PLACED implied
      redis.call('ZADD', qkey(pool, prio), eq, id)
      cnt('R', 1)
      cnt('r:' .. pool .. ':' .. prio, 1)
      wake(pool)
      st = 'R'
    else
      redis.call('HSET', tkey(id), 'st', 'P', 'rs', 'SUBMITTED')
      redis.call('ZADD', K_DUE, fmt(now), id)
      cnt('P', 1)
      st = 'P'
    end
    if idx > 0 then
      redis.call('SET', KEYS[9 + idx], id .. '|' .. hash, 'PX', ttl)
    end
    created[#created + 1] = id
    out[#out + 1] = 0; out[#out + 1] = id; out[#out + 1] = st
  end
end
event('submit', created, #created)
return out
