-- cold.lua: the cold tier of delayed tasks (queue/cold.go). A task due
-- later than the store's cold horizon, submitted without an idempotency key
-- or hand-off, has no record while it waits: its id sits in a time bucket
-- and in an id-sharded index, its spec once per submit call in a template.
--   cb:<bucket ms>   LIST  ids due in [bucket, bucket + size)
--   cx:<3 id chars>  HASH  id -> '<due ms> <template>' (small: listpack)
--   cs:<template>    HASH  the record's fields shared by the call's tasks
--                          (spec, pool, pr, ct) and '#', tasks still using it
--   KEYS[9]  cold    ZSET  bucket -> its start (ms), every non-empty bucket
--   KEYS[10] cseq    STRING template sequence
-- A cold task is PENDING (counted in cnt P from its submit, in cnt cold and
-- in its tenant's backlog, lib.lua). It becomes an
-- ordinary delayed task (a record and its place in d:<pool>:<p> or dn, as
-- submit.lua writes it) when the leader promotes its bucket ahead of time,
-- or at once when any caller thaws it (a read, cancel, priority change).
-- The index entry is removed in the same call that writes the record, so
-- a task is in exactly one tier; a bucket may keep ids thawed meanwhile:
-- promotion skips them.
-- KEYS: 1-8 see lib.lua; 9 cold; 10 cseq; 11 fence key (promote).
-- ARGV: 1 clock, 2 op:
--   'submit', 3 bucket size ms, 4 nspec, then per template nf and nf
--     field/value pairs, then n and per task id, template index (1-based),
--     due ms, then backlog caps as submit.lua's last ARGV ("<cap> <bytes>
--     <tenant>\n" per limited tenant): a task of such a tenant is stored
--     only while its backlog in this shard is below cap and its payload
--     fits in bytes beside the tenant's backlog's payloads there.
--     Returns one character per task: 'P' stored, else an item code
--     (IC.EXISTS, IC.BACKLOG_FULL, IC.BACKLOG_BYTES: queue/codes.go).
--   'promote' (leader, fenced), 3 token, 4 lead ms, 5 limit: thaws the
--     tasks of buckets starting before now + lead, at most limit.
--     Returns {RC.FENCED} fenced; else {moved, next bucket start ms or '', ids
--     taken from buckets (fewer than limit: no more are ahead)}.
--   'thaw', 3 id. Returns RC.OK when the id was cold (now hot), else
--     RC.NOT_FOUND.
local now = clock(ARGV[1])
local op = ARGV[2]
local K_COLD, K_CSEQ = KEYS[9], KEYS[10]
local function ixkey(id) return K_PREFIX .. 'cx:' .. string.sub(id, 14, 16) end
local function tplkey(t) return K_PREFIX .. 'cs:' .. t end

if op == 'submit' then
  local size = tonumber(ARGV[3])
  local nspec = tonumber(ARGV[4])
  local i = 5
  local tpl = {} -- index -> {fields, template id or nil, uses, tenant}
  for s = 1, nspec do
    local nf = tonumber(ARGV[i])
    local f, tn, pb = {}, '', 0
    for j = i + 1, i + 2 * nf, 2 do
      f[#f + 1] = ARGV[j]; f[#f + 1] = ARGV[j + 1]
      if ARGV[j] == 'tn' then tn = ARGV[j + 1] elseif ARGV[j] == 'pl' then pb = #ARGV[j + 1] end
    end
    tpl[s] = {f, nil, 0, tn, pb}
    i = i + 1 + 2 * nf
  end
  local snow = fmt(now)
  local codes, created = {}, {}
  local BUCKETS = {}
  local n = tonumber(ARGV[i])
  local BLCAP, BLBCAP = {}, {}
  for c, b, tn in string.gmatch(ARGV[i + 1 + 3 * n] or '', '(%d+) (%d+) ([^\n]*)\n') do
    if c ~= '0' then BLCAP[tn] = tonumber(c) end
    if b ~= '0' then BLBCAP[tn] = tonumber(b) end
  end
  i = i + 1
  for _ = 1, n do
    local id, s, due = ARGV[i], tonumber(ARGV[i + 1]), ARGV[i + 2]
    i = i + 3
    local ik = ixkey(id)
    local tn = tpl[s][4]
    if redis.call('EXISTS', tkey(id)) == 1 or redis.call('HEXISTS', ik, id) == 1 then
      codes[#codes + 1] = IC.EXISTS
    elseif BLCAP[tn] and backlog_now(tn) >= BLCAP[tn] then
      codes[#codes + 1] = IC.BACKLOG_FULL
    elseif BLBCAP[tn] and backlog_bytes_now(tn) + tpl[s][5] > BLBCAP[tn] then
      codes[#codes + 1] = IC.BACKLOG_BYTES
    else
      local t = tpl[s]
      if t[2] == nil then
        t[2] = fmt(redis.call('INCR', K_CSEQ))
        local f = t[1]
        f[#f + 1] = 'ct'; f[#f + 1] = snow
        redis.call('HSET', tplkey(t[2]), unpack(f))
      end
      t[3] = t[3] + 1
      backlog(t[4], 1, t[5])
      redis.call('HSET', ik, id, due .. ' ' .. t[2])
      local b = tonumber(due)
      b = fmt(b - b % size)
      local l = BUCKETS[b]
      if l == nil then l = {}; BUCKETS[b] = l end
      l[#l + 1] = id
      codes[#codes + 1] = 'P'
      created[#created + 1] = id
    end
  end
  for _, t in pairs(tpl) do
    if t[3] > 0 then redis.call('HINCRBY', tplkey(t[2]), '#', t[3]) end
  end
  for b, l in pairs(BUCKETS) do
    for j = 1, #l, 1000 do
      redis.call('RPUSH', K_PREFIX .. 'cb:' .. b, unpack(l, j, math.min(j + 999, #l)))
    end
    redis.call('ZADD', K_COLD, 'NX', b, b)
  end
  cnt('P', #created)
  cnt('cold', #created)
  event('submit', created, #created)
  return table.concat(codes)
end

-- thaw_one writes a cold task's record and puts it where submit.lua puts a
-- delayed task; false when the id is not cold (any more).
local TPL, USED, LOW = {}, {}, {}
local DN
local function thaw_one(id)
  local ik = ixkey(id)
  local v = redis.call('HGET', ik, id)
  if not v then return false end
  redis.call('HDEL', ik, id)
  cnt('cold', -1)
  local sp = string.find(v, ' ', 1, true)
  local due, t = string.sub(v, 1, sp - 1), string.sub(v, sp + 1)
  local tp = TPL[t]
  if tp == nil then
    local h = redis.call('HGETALL', tplkey(t))
    local f, pool, pinned, prio = {}, nil, false, '2'
    for j = 1, #h, 2 do
      local k = h[j]
      if k ~= '#' then
        f[#f + 1] = k; f[#f + 1] = h[j + 1]
        if k == 'po' then pool = h[j + 1] elseif k == 'pn' then pinned = h[j + 1] == '1' elseif k == 'pr' then prio = h[j + 1] end
      end
    end
    local base = #f
    f[base + 1] = 'st'; f[base + 2] = 'P'; f[base + 3] = 'rs'; f[base + 4] = 'SUBMITTED'; f[base + 5] = 'du'
    tp = {f, base + 6, pinned and pool, prio}
    TPL[t] = tp
    USED[#USED + 1] = t
  end
  tp[5] = (tp[5] or 0) + 1
  local f = tp[1]
  f[tp[2]] = due
  redis.call('HSET', tkey(id), unpack(f))
  local dueN = tonumber(due)
  if tp[3] then
    zadd(dkey(tp[3], tp[4]), due, id)
    local k = tp[3] .. ':' .. tp[4]
    local m = LOW[k]
    if m == nil then LOW[k] = {tp[3], tp[4], dueN} elseif dueN < m[3] then m[3] = dueN end
  else
    zadd(dnkey(), due, id)
    if DN == nil or dueN < DN then DN = dueN end
  end
  return true
end

-- settle lowers the markers of the hot sets written and releases templates.
local function settle()
  for _, m in pairs(LOW) do remark(m[1], m[2], fmt(m[3])) end
  if DN then redis.call('ZADD', K_DELAYED, 'LT', fmt(DN), '~') end
  for _, t in ipairs(USED) do
    if redis.call('HINCRBY', tplkey(t), '#', -TPL[t][5]) <= 0 then redis.call('DEL', tplkey(t)) end
  end
end

if op == 'thaw' then
  local ok = thaw_one(ARGV[3])
  settle()
  if ok then return RC.OK end
  return RC.NOT_FOUND
end

-- promote
if not fence(KEYS[11], ARGV[3]) then return {RC.FENCED} end
local upto = now + tonumber(ARGV[4])
local limit = tonumber(ARGV[5])
local moved, seen = 0, 0
local nxt = ''
while seen < limit do
  local b = redis.call('ZRANGE', K_COLD, 0, 0, 'WITHSCORES')
  if #b == 0 then break end
  if tonumber(b[2]) > upto then nxt = b[1]; break end
  local bk = K_PREFIX .. 'cb:' .. b[1]
  local ids = redis.call('LRANGE', bk, 0, limit - seen - 1)
  if #ids > 0 then redis.call('LTRIM', bk, #ids, -1) end
  seen = seen + #ids
  for _, id in ipairs(ids) do
    if thaw_one(id) then moved = moved + 1 end
  end
  if redis.call('EXISTS', bk) == 0 then redis.call('ZREM', K_COLD, b[1]) end
end
if nxt == '' then
  local b = redis.call('ZRANGE', K_COLD, 0, 0)
  if #b > 0 then nxt = b[1] end
end
settle()
return {moved, nxt, seen}
