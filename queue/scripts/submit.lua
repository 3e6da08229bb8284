-- submit.lua: accept a batch of new tasks (—→PENDING or —→READY).
-- KEYS: 1-8 see lib.lua; 9 outbox; 10.. the idempotency keys of the keyed tasks, in order.
-- ARGV: 1 clock, 2 n, 3 admission limits "pool max pool max ..." ('' none:
--   the READY tasks a pool may hold in this shard for a task with flag 'a'
--   to be admitted into it), then per task:
--   id, pool ('' = unplaced), flags ('p' pinned, 'r' may replace a HANDED_OFF
--   record of the same id: a hand-off coming back), priority, due_ms ('' = now),
--   idem_index (0 = none,
--   else KEYS[8+idem_index]), idem_ttl_ms, spec_hash, handoff region ('' = none:
--   else the task waits in the outbox to be handed to pool in that region),
--   nf, then nf field/value pairs (field '~' is not a record field: its
--   value is a trail line to append, see flag 'h'). Flag 'h': a hand-off
--   received with its history — ct, at, pc, er come in the fields, the '~'
--   lines are the sender's trail (they replace a returning task's list), and
--   a RECEIVED step is added. Flag 'k': held for the sending region's word
--   (held.lua; the fields carry hf, that region). Flag 'a': admitted READY into pool only while
--   the pool holds fewer READY tasks in this shard than its limit in ARGV[3]
--   (counted with the tasks this call made READY there), else code 4. A pinned task with a delay waits in its
--   pool's delayed set (see lib.lua: state implied by structure), an
--   unplaced one in dn.
--   The last ARGV (after the tasks): backlog caps, "<cap> <bytes> <tenant>\n"
--   per limited tenant ('' none; 0: that cap none): a task of such a tenant
--   is created only while the tenant's backlog in this shard (lib.lua
--   backlog, counted with this call's) is below cap, else code 5, and its
--   payload fits in bytes beside the payloads the tenant's backlog holds
--   in this shard, else code 6; flag 'g': its field br ("<month> <usd>", its
--   estimated cost) is reserved on its tenant's budget ledger of that month
--   (lib.lua bgkey) while the ledger's u plus it is within cap, else
--   IC.BUDGET (no ledger: IC.BUDGET too); br without 'g' (a hand-off received) is carried
--   unreserved: its sender holds it. Every task created is counted, its payload
--   too, but one with flag 'v' whose id holds room reserved (backlog.lua)
--   takes its reservation instead (and is not checked; its payload is
--   counted).
-- Returns: {codes, then id, state for each task not created}. codes has one
--   character per task, in order: its state code (P, R) when created, else
--   an item code (IC, queue/codes.go, which says what its id, state pair
--   holds). A created task's id is the one sent.
-- Flag 'u': KEYS[9+idem_index] is a unique key ("uq:<tenant>:<key>", value
--   "<id>|<mode>"), idem_ttl_ms its unique_for and spec_hash its mode: 's'
--   held while its task waits to start, 'f' while it waits or runs, 'w'
--   for the whole TTL; after the mode letter, the id of a task the caller
--   found past the mode where it was handed off (its key is taken). A
--   held key answers code 1 with its task's id and state (the caller
--   decides between that task and a conflict); a key whose task is gone
--   or past its mode is taken by the new task.
-- Flag 'b': KEYS[9+idem_index] is a debounce key ("db:<tenant>:<key>",
--   value "<id>|<first ms>"), idem_ttl_ms the debounce and spec_hash
--   "<max_wait ms> <retention ms>" (max_wait 0: none). The key's task, while
--   PENDING unplaced, never attempted and not yet due, is CANCELED (DEBOUNCED, kept
--   for the retention) and the new task waits until now + debounce, at most
--   first + max_wait, where first is the replaced run's first submit (now
--   when none was replaced). The task is created as with a due_ms.
local now = clock(ARGV[1])
local snow = fmt(now)
local n = tonumber(ARGV[2])
local out = {''} -- out[1] becomes the codes
local codes = {}
local created = {}
local LOW = {} -- '<pool>:<p>' -> {pool, p, earliest due} of pinned delayed tasks
local DN         -- earliest due of unplaced delayed tasks
-- Admission: the limits, and each limited pool's READY count in
-- this shard, read once and counted on as this call adds to it.
local ADMIT, READY = {}, {}
for p, v in string.gmatch(ARGV[3], '(%S+) (%d+)') do ADMIT[p] = tonumber(v) end
local function ready_in(pool)
  local r = READY[pool]
  if r == nil then
    r = 0
    for p = 0, 4 do r = r + tonumber(redis.call('HGET', K_CNT, rfield(pool, p)) or '0') end
    READY[pool] = r
  end
  return r
end
local BLCAP, BLBCAP = {}, {}
for c, b, t in string.gmatch(ARGV[#ARGV], '(%d+) (%d+) ([^\n]*)\n') do
  if c ~= '0' then BLCAP[t] = tonumber(c) end
  if b ~= '0' then BLBCAP[t] = tonumber(b) end
end
-- unique_holder is the task holding unique key k (id and state), nil
-- when the key is free: absent, its task gone, or its task past the mode.
local function unique_holder(k, sup)
  local v = redis.call('GET', k)
  if not v then return nil end
  local sep = string.find(v, '|', 1, true)
  local eid, mode = string.sub(v, 1, sep - 1), string.sub(v, sep + 1)
  if eid == sup then return nil end
  local est = redis.call('HGET', tkey(eid), 'st')
  if mode == 'w' then return eid, est or '' end
  if not est or est == 'S' or est == 'F' or est == 'C' then return nil end
  -- A HANDED_OFF record ('H') holds: its task waits or runs elsewhere.
  if mode == 's' and est ~= 'P' and est ~= 'R' and est ~= 'H' then return nil end
  return eid, est
end
-- debounce replaces the task of debounce key k while it waits unplaced,
-- unattempted and not yet due (CANCELED, DEBOUNCED); the answer is the run's
-- first submit (ms), now when nothing was replaced.
local function debounce(k, retention)
  local v = redis.call('GET', k)
  if not v then return now end
  local sep = string.find(v, '|', 1, true)
  local eid, first = string.sub(v, 1, sep - 1), tonumber(string.sub(v, sep + 1))
  local tk = tkey(eid)
  local r = redis.call('HMGET', tk, 'st', 'ob', 'pn', 'at', 'tn', 'po', 'du')
  if r[1] ~= 'P' or r[2] or r[3] == '1' or (r[4] and r[4] ~= '0') or r[6] or (tonumber(r[7] or '') or 0) <= now then
    return now
  end
  redis.call('ZREM', dnkey(), eid)
  redis.call('ZREM', K_DELAYED, eid)
  cnt('P', -1)
  redis.call('HSET', tk, 'st', 'C', 'rs', 'DEBOUNCED', 'fa', snow)
  cnt('tC', 1)
  backlog_task(r[5] or '', -1, eid)
  batch_end(eid, 'C')
  trail(eid, now, 'P', 'C', 'DEBOUNCED', 'submit', '0', '')
  retain(eid, retention)
  return first
end
local i = 4
for _ = 1, n do
  local id, pool, flags, prio, due = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4]
  local idx, ttl, hash, target = tonumber(ARGV[i + 5]), ARGV[i + 6], ARGV[i + 7], ARGV[i + 8]
  local nf = tonumber(ARGV[i + 9])
  local fstart = i + 10
  i = fstart + 2 * nf
  local done = false
  local uniq = idx > 0 and string.find(flags, 'u', 1, true) ~= nil
  local deb = idx > 0 and string.find(flags, 'b', 1, true) ~= nil
  if uniq then
    local eid, est = unique_holder(KEYS[9 + idx], string.sub(hash, 2))
    if eid then
      codes[#codes + 1] = IC.DUPLICATE; out[#out + 1] = eid; out[#out + 1] = est
      done = true
    end
  elseif idx > 0 and not deb then
    local v = redis.call('GET', KEYS[9 + idx])
    if v then
      local sep = string.find(v, '|', 1, true)
      local eid, eh = string.sub(v, 1, sep - 1), string.sub(v, sep + 1)
      if eh == hash then
        local est = redis.call('HGET', tkey(eid), 'st') or ''
        codes[#codes + 1] = IC.DUPLICATE; out[#out + 1] = eid; out[#out + 1] = est
      else
        codes[#codes + 1] = IC.KEY_REUSED; out[#out + 1] = eid; out[#out + 1] = ''
      end
      done = true
    end
  end
  local back = false
  local carried = string.find(flags, 'h', 1, true) ~= nil
  if not done and redis.call('EXISTS', tkey(id)) == 1 then
    local est = redis.call('HGET', tkey(id), 'st') or ''
    if est == 'H' and string.find(flags, 'r', 1, true) then
      -- Handed off from here earlier and now handed back: the live task
      -- replaces the forwarding record. Its trail goes on in the same list,
      -- or is replaced by the carried one, which holds this region's steps
      -- too.
      redis.call('DEL', tkey(id))
      if carried then
        redis.call('DEL', lkey(id))
      else
        back = redis.call('PERSIST', lkey(id)) == 1 or redis.call('EXISTS', lkey(id)) == 1
      end
    else
      codes[#codes + 1] = IC.EXISTS; out[#out + 1] = id; out[#out + 1] = est
      done = true
    end
  end
  if not done and ADMIT[pool] and string.find(flags, 'a', 1, true) and not (tonumber(due) and tonumber(due) > now)
      and ready_in(pool) >= ADMIT[pool] then
    codes[#codes + 1] = IC.POOL_FULL; out[#out + 1] = id; out[#out + 1] = ''
    done = true
  end
  local tn, pb, br = '', 0, nil
  for j = fstart, fstart + 2 * nf - 1, 2 do
    if ARGV[j] == 'tn' then tn = ARGV[j + 1] elseif ARGV[j] == 'pl' then pb = #ARGV[j + 1] elseif ARGV[j] == 'br' then br = ARGV[j + 1] end
  end
  -- Flag 'v': room may be reserved for this id (backlog.lua); it is
  -- counted already, so neither checked nor counted again.
  local reserved = not done and string.find(flags, 'v', 1, true) ~= nil
      and redis.call('HDEL', K_PREFIX .. 'blr', id) == 1
  if not done and not reserved and BLCAP[tn] and backlog_now(tn) >= BLCAP[tn] then
    codes[#codes + 1] = IC.BACKLOG_FULL; out[#out + 1] = id; out[#out + 1] = ''
    done = true
  end
  if not done and not reserved and BLBCAP[tn] and backlog_bytes_now(tn) + pb > BLBCAP[tn] then
    codes[#codes + 1] = IC.BACKLOG_BYTES; out[#out + 1] = id; out[#out + 1] = ''
    done = true
  end
  if not done and br and string.find(flags, 'g', 1, true) then
    local month, usd = string.match(br, '^(%S+) (%S+)$')
    local k = bgkey(month or '', tn ~= '' and tn or 'default')
    local l = redis.call('HMGET', k, 'u', 'cap')
    usd = tonumber(usd) or 0
    if not l[2] or (tonumber(l[1]) or 0) + usd > tonumber(l[2]) then
      if l[2] then redis.call('HINCRBY', k, 'rf', 1) end
      codes[#codes + 1] = IC.BUDGET; out[#out + 1] = id; out[#out + 1] = ''
      done = true
    else
      redis.call('HINCRBYFLOAT', k, 'u', string.format('%.12f', usd))
    end
  end
  local dbfirst
  if not done and deb then
    local mw, ret = string.match(hash, '(%d+) (%d+)')
    dbfirst = debounce(KEYS[9 + idx], ret)
    local d = now + tonumber(ttl)
    if tonumber(mw) > 0 then d = math.min(d, dbfirst + tonumber(mw)) end
    if d > now then due = fmt(d) else due = '' end
  end
  if not done then
    backlog(tn, reserved and 0 or 1, pb)
    -- One HSET per task: the spec's fields and the state's together.
    local f = {}
    local lines = {}
    for j = fstart, fstart + 2 * nf - 1, 2 do
      if ARGV[j] == '~' then
        lines[#lines + 1] = ARGV[j + 1]
      else
        f[#f + 1] = ARGV[j]; f[#f + 1] = ARGV[j + 1]
      end
    end
    if back then f[#f + 1] = 'lg'; f[#f + 1] = '1' end
    if not carried then f[#f + 1] = 'ct'; f[#f + 1] = snow end
    f[#f + 1] = 'pr'; f[#f + 1] = prio
    local born = 'SUBMITTED'
    if carried then born = 'RECEIVED' end
    local dueN = tonumber(due)
    local st
    if string.find(flags, 'k', 1, true) then
      -- A hand-off held until its sender's word (held.lua): PENDING in the
      -- held set, which nothing that claims, promotes or places reads; po
      -- and du say where it goes when released.
      f[#f + 1] = 'st'; f[#f + 1] = 'P'; f[#f + 1] = 'rs'; f[#f + 1] = born
      f[#f + 1] = 'po'; f[#f + 1] = pool
      if dueN and dueN > now then f[#f + 1] = 'du'; f[#f + 1] = due end
      zadd(K_PREFIX .. 'held', snow, id)
      cnt('P', 1)
      cnt('hd', 1)
      -- READY soon: counted for the admission of this call's others.
      if READY[pool] then READY[pool] = READY[pool] + 1 end
      st = 'P'
    elseif dueN and dueN > now then
      f[#f + 1] = 'st'; f[#f + 1] = 'P'; f[#f + 1] = 'rs'; f[#f + 1] = born
      f[#f + 1] = 'du'; f[#f + 1] = due
      if string.find(flags, 'p', 1, true) and pool ~= '' and target == '' then
        -- The record carries pn 1 and po (the spec fields): is_lazy holds.
        zadd(dkey(pool, prio), due, id)
        local m = LOW[pool .. ':' .. prio]
        if m == nil then
          LOW[pool .. ':' .. prio] = {pool, prio, dueN}
        elseif dueN < m[3] then
          m[3] = dueN
        end
      elseif pool == '' and target == '' then
        zadd(dnkey(), due, id)
        if DN == nil or dueN < DN then DN = dueN end
      else
        zadd(K_DELAYED, due, id)
      end
      cnt('P', 1)
      st = 'P'
    elseif target ~= '' then
      f[#f + 1] = 'st'; f[#f + 1] = 'P'; f[#f + 1] = 'rs'; f[#f + 1] = born
      f[#f + 1] = 'ob'; f[#f + 1] = target; f[#f + 1] = 'po'; f[#f + 1] = pool
      zadd(KEYS[9], snow, id)
      cnt('P', 1)
      st = 'P'
    elseif pool ~= '' then
      -- reason PLACED implied (RECEIVED recorded)
      f[#f + 1] = 'st'; f[#f + 1] = 'R'; f[#f + 1] = 'po'; f[#f + 1] = pool
      if carried then f[#f + 1] = 'rs'; f[#f + 1] = born end
      f[#f + 1] = 'eq'; f[#f + 1] = snow; f[#f + 1] = 'rt'; f[#f + 1] = snow
      zadd(qkey(pool, prio), snow, id)
      if fair(pool) then
        local tn = 'default'
        for j = 1, #f, 2 do if f[j] == 'tn' then tn = f[j + 1] end end
        fair_add(pool, prio, snow, id, tn)
      end
      cnt('R', 1)
      cnt(rfield(pool, prio), 1)
      if READY[pool] then READY[pool] = READY[pool] + 1 end
      wake(pool)
      st = 'R'
    else
      f[#f + 1] = 'st'; f[#f + 1] = 'P'; f[#f + 1] = 'rs'; f[#f + 1] = born
      zadd(K_DUE, snow, id)
      cnt('P', 1)
      st = 'P'
    end
    if carried then
      f[#f + 1] = 'hx'; f[#f + 1] = snow
      f[#f + 1] = 'lg'; f[#f + 1] = '1'
      local at = '0'
      for j = 1, #f, 2 do if f[j] == 'at' then at = f[j + 1] end end
      lines[#lines + 1] = snow .. '\tH\t' .. st .. '\tRECEIVED\thandoff\t' .. at .. '\t'
      for j = 1, #lines, 500 do
        redis.call('RPUSH', lkey(id), unpack(lines, j, math.min(j + 499, #lines)))
      end
    end
    redis.call('HSET', tkey(id), unpack(f))
    if uniq then
      redis.call('SET', KEYS[9 + idx], id .. '|' .. string.sub(hash, 1, 1), 'PX', ttl)
    elseif deb then
      -- Kept a minute past the task's start: replaceable until then.
      local left = (tonumber(due) or now) - now + 60000
      redis.call('SET', KEYS[9 + idx], id .. '|' .. fmt(dbfirst), 'PX', fmt(left))
    elseif idx > 0 then
      redis.call('SET', KEYS[9 + idx], id .. '|' .. hash, 'PX', ttl)
    end
    created[#created + 1] = id
    codes[#codes + 1] = st
  end
end
for _, m in pairs(LOW) do remark(m[1], m[2], fmt(m[3])) end
if DN then redis.call('ZADD', K_DELAYED, 'LT', fmt(DN), '~') end
event('submit', created, #created)
out[1] = table.concat(codes)
return out
