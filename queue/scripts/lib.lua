-- lib.lua: the helpers every script shares. Not a script itself: scripts.go
-- loads it once with every script as one Redis Functions library (FUNCTION
-- LOAD, called with FCALL), or, where Redis has no Functions (< 7), puts
-- the part of it a script uses in front of that script (EVALSHA).
--
-- Nothing at this top level changes from one call to the next: what a call
-- builds up (the key names it was given, counters and set members queued
-- for finish(), memos) lives in its context C, which begin() makes anew at
-- the start of every call (scripts.go wraps each body: begin(KEYS), the
-- body, finish()). Tables of the context are made when first used.
--
-- Every script gets the same first eight KEYS, all sharing the shard's hash
-- tag {s}:
--   KEYS[1] shard prefix "ax:{s}:"   -- per-task and per-pool keys are built
--                                       from it (t:<id>, l:<id>, q:<pool>:<p>,
--                                       wake:<pool>): their names are only
--                                       known inside the script, and the
--                                       shared hash tag keeps them on KEYS[1]'s
--                                       Cluster slot.
--   KEYS[2] delayed  KEYS[3] due  KEYS[4] running  KEYS[5] dead
--   KEYS[6] cnt      KEYS[7] events  KEYS[8] seq
-- Scripts that need more declare them from KEYS[9] on. A body reads these
-- as K_PREFIX, K_DELAYED, ... (locals of its wrapper), lib.lua as C.K_PREFIX.
--
-- ARGV[1] is always the clock: '' means Redis TIME; an integer string is a
-- test-injected time in ms.
--
-- Numbers leave Lua only through fmt(): tostring keeps 14 digits.

-- The standard globals the scripts use, as locals of lib.lua: in a
-- Functions library every global read goes through the library's own empty
-- globals table to the real ones (~18 ns a read on Redis 7.0, thousands a
-- batch). They do not exist while the library loads, so begin() binds them
-- at the first call; they never change after.
local function globals() return redis, string, math, table, tonumber, tostring, ipairs, pairs, unpack, rawget, setmetatable end
local redis, string, math, table, tonumber, tostring, ipairs, pairs, unpack, rawget, setmetatable

-- C is the running call's context (begin). A table field of it that was
-- not set yet is an empty table, made on first use.
local CTX = {__index = function(t, k)
  local v = {}
  t[k] = v
  return v
end}
local C
local function begin(keys)
  if not redis then
    redis, string, math, table, tonumber, tostring, ipairs, pairs, unpack, rawget, setmetatable = globals()
  end
  C = setmetatable({K_PREFIX = keys[1] or false, K_DELAYED = keys[2] or false, K_DUE = keys[3] or false,
    K_RUNNING = keys[4] or false, K_DEAD = keys[5] or false, K_CNT = keys[6] or false,
    K_EVENTS = keys[7] or false, K_SEQ = keys[8] or false}, CTX)
end

local function fmt(n) return string.format('%d', n) end

-- fmt_now is fmt for the script's clock, which batch scripts format for
-- every task: once is enough.
local function fmt_now(n)
  local m = C.FMT
  if n ~= m[1] then m[1], m[2] = n, fmt(n) end
  return m[2]
end

local function clock(arg)
  if arg ~= nil and arg ~= '' then return tonumber(arg) end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function tkey(id) return C.K_PREFIX .. 't:' .. id end
local function lkey(id) return C.K_PREFIX .. 'l:' .. id end
-- qkey and rfield are memoized: batch scripts build them for every task,
-- and each concatenation is a new interned Lua string.
local function memo2(cache, a, b, make)
  local t = cache[a]
  if t == nil then t = {}; cache[a] = t end
  local v = t[b]
  if v == nil then v = make(a, b); t[b] = v end
  return v
end
local function make_qkey(pool, p) return C.K_PREFIX .. 'q:' .. pool .. ':' .. p end
local function make_rfield(pool, p) return 'r:' .. pool .. ':' .. p end
local function qkey(pool, p) return memo2(C.QKEYS, pool, p, make_qkey) end
-- rfield is the counter field of a pool's READY tasks of one priority.
local function rfield(pool, p) return memo2(C.RFIELDS, pool, p, make_rfield) end
local function wkey(pool) return C.K_PREFIX .. 'wake:' .. pool end

-- Pinned delayed tasks (state implied by structure). A task submitted with
-- a delay and pinned to a pool waits in that pool's delayed set of its
-- priority, d:<pool>:<p>, scored by due time; the shard's delayed set holds
-- one marker '~<pool>:<p>' per such set, scored by (at most) the set's
-- earliest due time, so promotion finds it in due-time order with the
-- other delayed tasks. Promotion moves due ids from d:<pool>:<p> to
-- q:<pool>:<p> with the due time as enqueue time and leaves their records
-- as submitted (st P, rs SUBMITTED): such a record in its ready set is
-- READY. is_lazy tells a record that may be there; lazy_state which it is.
local function make_dkey(pool, p) return C.K_PREFIX .. 'd:' .. pool .. ':' .. p end
local function make_mark(pool, p) return '~' .. pool .. ':' .. p end
local function dkey(pool, p) return memo2(C.DKEYS, pool, p, make_dkey) end
local function mark(pool, p) return memo2(C.MARKS, pool, p, make_mark) end
-- Unplaced tasks submitted with a delay wait in one set, dn, behind the
-- marker '~' in the delayed set; promotion moves their due ids to the due
-- set (placement) without reading their records: they stay PENDING.
local function dnkey() return C.K_PREFIX .. 'dn' end
local function is_lazy(st, rs, pn, ob) return st == 'P' and rs == 'SUBMITTED' and pn == '1' and not ob end
local function lazy_state(id, pool, p)
  if redis.call('ZSCORE', qkey(pool, p), id) then return 'R' end
  return 'P'
end
-- remark lowers a marker to due (ZADD LT: a lower score wins, a new member
-- is added). A marker scored before its set's head is harmless: promotion
-- re-scores it.
local function remark(pool, p, due)
  redis.call('ZADD', C.K_DELAYED, 'LT', due, mark(pool, p))
end

-- Counter deltas add up in a table and reach Redis once per field when the
-- script ends (scripts.go runs every body as a function, then finish()):
-- one HINCRBY per field and call instead of several per task.
local function cnt(field, d)
  local v = C.CNT[field]
  if v == nil then C.CNT_FIELDS[#C.CNT_FIELDS + 1] = field; v = 0 end
  C.CNT[field] = v + d
end

-- zadd queues a sorted-set member; finish() writes each key with one ZADD.
-- Only for keys the rest of the script does not read again.
local function zadd(key, score, member)
  local t = C.ZADDS[key]
  if t == nil then t = {}; C.ZADDS[key] = t; C.ZKEYS[#C.ZKEYS + 1] = key end
  t[#t + 1] = score
  t[#t + 1] = member
end

-- Backlog (docs/security.md "max_backlog"): per tenant, this shard's
-- tasks that were accepted and have not finished — PENDING (cold and in
-- the outbox too), READY, RUNNING — in one hash, bl: tenant ('' the
-- default) → count, and their payload bytes in another, blb: tenant →
-- bytes. submit.lua and cold.lua add each task they create (hand-offs
-- received included); every step to SUCCESS, FAILED or CANCELED and an
-- accepted hand-off take one away; a replay adds one. Deltas add up in BL
-- (BLB) and reach Redis once per tenant when the script ends; a count
-- never goes below 0 (tasks accepted before the count existed).
local function blkey() return C.K_PREFIX .. 'bl' end
local function blbkey() return C.K_PREFIX .. 'blb' end
-- backlog adds d tasks of tenant tn holding nb payload bytes (nb has d's
-- sign; nil: none).
local function backlog(tn, d, nb)
  tn = tn or ''
  local v = C.BL[tn]
  if v == nil then C.BL_T[#C.BL_T + 1] = tn; v = 0 end
  C.BL[tn] = v + d
  if nb and nb ~= 0 then C.BLB[tn] = (C.BLB[tn] or 0) + nb end
end
-- payload_bytes is the size of task id's payload as stored.
local function payload_bytes(id) return redis.call('HSTRLEN', tkey(id), 'pl') end
-- backlog_task adds (d = 1) or takes away (d = -1) task id of tenant tn,
-- its payload's bytes with it.
local function backlog_task(tn, d, id) backlog(tn, d, d * payload_bytes(id)) end
-- backlog_end takes away a task whose script did not read its tenant.
local function backlog_end(id) backlog_task(redis.call('HGET', tkey(id), 'tn'), -1, id) end
-- backlog_now is tenant's count in this shard, with this script's deltas.
local function backlog_now(tn)
  local v = C.BL_READ[tn]
  if v == nil then
    v = tonumber(redis.call('HGET', blkey(), tn) or '0')
    C.BL_READ[tn] = v
  end
  return v + (C.BL[tn] or 0)
end
-- backlog_bytes_now is tenant's payload bytes in this shard, with this
-- script's deltas.
local function backlog_bytes_now(tn)
  local v = C.BLB_READ[tn]
  if v == nil then
    v = tonumber(redis.call('HGET', blbkey(), tn) or '0')
    C.BLB_READ[tn] = v
  end
  return v + (C.BLB[tn] or 0)
end

-- Budget ledgers (queue/budget.go): for each tenant with a refuse budget,
-- per UTC month, each shard has a hash bg:<YYYY-MM>:<tenant> with u, the
-- USD its tasks hold: the estimate reserved by each task admitted here
-- (submit.lua, flag 'g'), the actual cost of every attempt run here
-- (write_costs), less the estimate of each task that ended here (a task
-- handed off here brings its reservation, br "<month> <usd>", in its
-- record: the sender's u keeps it, this shard's takes it off at the end);
-- cap, what u may reach for a task to be admitted (the region leader's
-- share of the budget); rf, the submits refused over cap. Only a ledger
-- that exists is written: a tenant without one has no budget here.
local function bgkey(month, tenant) return C.K_PREFIX .. 'bg:' .. month .. ':' .. tenant end
-- month_of is the UTC "YYYY-MM" of ms since the epoch (days to civil date,
-- H. Hinnant's algorithm).
local function month_of(ms)
  local z = math.floor(ms / 86400000) + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524) - math.floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local m, y = mp + 3, yoe + era * 400
  if mp >= 10 then m = mp - 9 end
  if m <= 2 then y = y + 1 end
  return string.format('%04d-%02d', y, m)
end
-- budget_end takes off its ledger the estimate task id reserved (br, its
-- record's "<month> <usd>"; false: none), as it ends (its actual cost is
-- booked attempt by attempt); tn is the record's tenant.
local function budget_end(id, br, tn)
  if not br then return end
  local month, usd = string.match(br, '^(%S+) (%S+)$')
  local k = bgkey(month or '', tn or 'default')
  if tonumber(usd) and redis.call('EXISTS', k) == 1 then redis.call('HINCRBYFLOAT', k, 'u', string.format('%.12f', -tonumber(usd))) end
  redis.call('HDEL', tkey(id), 'br')
end

-- Batches (package batch): a member's record carries its batch's id (bt).
-- Every step of a member to SUCCESS, FAILED or CANCELED, in whichever
-- region ends it, queues "<batch> <id> <code>" (code S, F or C) on the
-- shard's bdone list in the same script; the region leader's reporter
-- applies the list to each batch in its home region, where the member's
-- first report counts (batch_member.lua), and trims it.
-- The task of a single-task schedule's slot carries se (task.ScheduleEndOf,
-- "s/<tenant>/<schedule>/<period ms>"): its end is queued on the same list
-- as "<se> <id> <code>", and the reporter records it in the global etcd for
-- the gates waiting for it (package batch, schedule/ends).
-- batch_end queues task id's end (code) when it is a member or a
-- schedule's run; bt, se, br and tn are its record's when the caller read
-- them (false: none), bt nil to read them all here in one HMGET. Every end
-- also releases the task's budget reservation (budget_end).
local function batch_end(id, code, bt, se, br, tn)
  if bt == nil then
    local r = redis.call('HMGET', tkey(id), 'bt', 'se', 'br', 'tn')
    bt, se, br, tn = r[1], r[2], r[3], r[4]
  end
  budget_end(id, br, tn)
  if bt then redis.call('RPUSH', C.K_PREFIX .. 'bdone', bt .. ' ' .. id .. ' ' .. code) end
  if se then redis.call('RPUSH', C.K_PREFIX .. 'bdone', se .. ' ' .. id .. ' ' .. code) end
end

-- finish writes what cnt, zadd and backlog queued, and the tenants that
-- got fair-share work (fair_add queues them in FIDX: {index key, score,
-- tenant}, added after the sets they name, ZADD NX); the call ends with it.
local function finish()
  local l = rawget(C, 'BL_T')
  if l then
    for _, t in ipairs(l) do
      local d = C.BL[t]
      if d ~= 0 and redis.call('HINCRBY', blkey(), t, fmt(d)) <= 0 then redis.call('HDEL', blkey(), t) end
      local b = rawget(C, 'BLB') and C.BLB[t]
      if b and b ~= 0 and redis.call('HINCRBY', blbkey(), t, fmt(b)) <= 0 then redis.call('HDEL', blbkey(), t) end
    end
  end
  l = rawget(C, 'ZKEYS')
  if l then
    for _, k in ipairs(l) do
      local t = C.ZADDS[k]
      -- unpack breaks near 8 000 values: write in chunks.
      for i = 1, #t, 2000 do
        redis.call('ZADD', k, unpack(t, i, math.min(i + 1999, #t)))
      end
    end
  end
  l = rawget(C, 'FIDX')
  if l then
    for _, e in ipairs(l) do redis.call('ZADD', e[1], 'NX', e[2], e[3]) end
  end
  l = rawget(C, 'CNT_FIELDS')
  if l then
    for _, f in ipairs(l) do
      local d = C.CNT[f]
      if d ~= 0 then redis.call('HINCRBY', C.K_CNT, f, fmt(d)) end
    end
  end
  C = nil
end

-- Run times (docs/architecture.md §5): how long a pool takes to run a
-- tenant's task type, learnt from completions and published by the region
-- leader for placement. One hash per shard (the caller's key), one field
-- per triple, "<pool> <type> <tenant>" ("default" for a record without
-- one) → "n mean_us sd_us last_ms": the count, an exponentially weighted
-- mean and standard deviation of the run time, and the last observation.
-- Per tenant, so that one tenant's runs never move the estimate another
-- tenant's tasks are placed by. The weight of a new observation is
-- max(alpha, 1/n), so the estimate is the plain mean until n reaches
-- 1/alpha. runtime() queues an observation; write_runtimes() folds them,
-- one HGET and one HSET per triple and script whatever the batch. The hash
-- holds at most cap triples, and each tenant at most a quarter of cap
-- (rt_tenant_cap; counted in rtt, tenant → its triples): a new one is
-- dropped while the hash or its tenant's share is full (the leader trims
-- the least used of the tenants holding most, rt_trim.lua), so a flood of
-- new type names costs an HLEN and an HGET each, grows nothing, and
-- neither fills another tenant's share nor pushes its triples out.
local function rt_tenant_cap(cap) return math.max(1, math.floor(cap / 4)) end
local function runtime(pool, ty, tenant, ms)
  if not pool or not ty or ms == nil then return end
  local f = pool .. ' ' .. ty .. ' ' .. (tenant or 'default')
  local t = C.RT[f]
  if t == nil then t = {}; C.RT[f] = t; C.RT_PAIRS[#C.RT_PAIRS + 1] = {f, t} end
  t[#t + 1] = ms
end
local function write_runtimes(key, now, cap, alpha)
  local rtt = C.K_PREFIX .. 'rtt'
  for _, pair in ipairs(C.RT_PAIRS) do
    local f, obs = pair[1], pair[2]
    local n, mean, sd
    local v = redis.call('HGET', key, f)
    if v then
      local a, b, c = string.match(v, '^(%d+) (%d+) (%d+)')
      n, mean, sd = tonumber(a), tonumber(b), tonumber(c)
    end
    local new = false
    if not n and redis.call('HLEN', key) < cap then
      local tn = string.match(f, ' ([^ ]*)$')
      if tonumber(redis.call('HGET', rtt, tn) or '0') < rt_tenant_cap(cap) then
        redis.call('HINCRBY', rtt, tn, 1)
        new = true
      end
    end
    if n or new then
      n, mean = n or 0, mean or 0
      local var = (sd or 0) ^ 2
      for _, ms in ipairs(obs) do
        local x = math.max(ms, 0) * 1000
        n = n + 1
        local w = math.max(alpha, 1 / n)
        local d = x - mean
        mean = mean + w * d
        var = (1 - w) * (var + w * d * d)
      end
      redis.call('HSET', key, f, string.format('%d %d %d %d', n, math.floor(mean + 0.5),
        math.floor(math.sqrt(var) + 0.5), now))
    end
  end
end

-- fence checks a leader's token against the highest one seen for this
-- election on this shard, and raises the record when the token is higher.
-- false means a newer leader exists: the caller changes nothing.
local function fence(key, tok)
  local t = tonumber(tok)
  local cur = tonumber(redis.call('GET', key) or '0')
  if t == nil or t < cur then return false end
  if t > cur then redis.call('SET', key, fmt(t)) end
  return true
end

-- wake leaves one marker for idle claimers of a pool; never more than one.
-- Once per pool and script is enough.
local function wake(pool)
  if C.WOKEN[pool] then return end
  C.WOKEN[pool] = true
  if redis.call('LLEN', wkey(pool)) == 0 then redis.call('RPUSH', wkey(pool), '1') end
end

-- trail appends one abnormal transition. Fields are tab-separated; the
-- caller has removed tabs and newlines from err.
-- The record's field lg marks that the trail list exists, so completing a
-- task that never left the happy path need not touch a list it has not.
local function trail(id, ts, from, to, reason, by, attempt, err)
  local n = redis.call('RPUSH', lkey(id), fmt(ts) .. '\t' .. from .. '\t' .. to .. '\t' .. reason ..
    '\t' .. (by or '') .. '\t' .. (attempt or '0') .. '\t' .. (err or ''))
  if n == 1 then redis.call('HSET', tkey(id), 'lg', '1') end
end

-- flush writes the happy steps of the current attempt (READY, CLAIMED) to
-- the trail before an abnormal step overwrites their timestamps.
-- The READY step keeps its reason (rs: DUE or PLACED); a task placed at
-- submit has none and was born READY: that step is written as its birth
-- ('' → R PLACED), which the trail reader takes instead of a PENDING birth.
-- A task received from another region has its RECEIVED step logged.
local function flush(id, rt, sa, wk, at)
  if rt then
    local v = redis.call('HMGET', tkey(id), 'rs', 'hx')
    local rs = v[1]
    if rs == 'RECEIVED' or (v[2] and v[2] == rt) then
      -- the step is in the trail already: RECEIVED (submit.lua), or
      -- COMMITTED, logged when the sender's word released it (held.lua:
      -- hx = rt)
    elseif rs then
      trail(id, tonumber(rt), 'P', 'R', rs, '', at, '')
    else
      trail(id, tonumber(rt), '', 'R', 'PLACED', 'api', at, '')
    end
    redis.call('HDEL', tkey(id), 'rt')
  end
  if sa then trail(id, tonumber(sa), 'R', 'U', 'CLAIMED', wk, at, '') end
end

-- event adds one entry per script call to the region's stream, capped. It
-- names the first 8 ids only: a batch's full list made every entry ~1 KB
-- and cost the busiest scripts a few % of their time.
local function event(op, ids, n)
  if n == 0 then return end
  local shown = {}
  for i = 1, math.min(#ids, 8) do shown[i] = ids[i] end
  redis.call('XADD', C.K_EVENTS, 'MAXLEN', '~', '10000', '*', 'op', op, 'n', fmt(n),
    'ids', table.concat(shown, ','))
end

-- retain sets retention on a terminal record and its trail. has_log is the
-- record's lg field when the caller read it (nil: not read).
local function retain(id, ms, has_log)
  redis.call('PEXPIRE', tkey(id), ms)
  if has_log ~= false then redis.call('PEXPIRE', lkey(id), ms) end
end

-- Retention of successes. No TTL per record: a PEXPIRE in every complete
-- costs Redis time on the drain's path and fills the expires dict that
-- every key lookup then checks. A SUCCESS task's id goes instead into a
-- minute's list, rs:<minute> (minutes since the epoch, by the script's
-- clock), one RPUSH per list per script call; the index rsi holds those
-- minutes (score: the minute's start, ms). The leader's sweep (sweep.lua)
-- deletes the records and trails of the minutes older than the region's
-- retention ms, in bounded batches, without reading them: a SUCCESS record
-- never changes state again. The minute is the one the task finished in,
-- shifted by its own result_ttl less ms when it has one (ttls[i], ms), so
-- that the sweep, which knows only ms, removes it once its ttl is past.
-- Only while a sweeper is alive (rsw, renewed by every sweep.lua call for a
-- few minutes): while none is (a leader of a build without the sweep, in a
-- rolling upgrade or after a downgrade; a leaderless region), each success
-- gets a TTL of its retention, so that nothing outlives it for want of a
-- sweep. One EXISTS a call.
local function retain_success(now, ids, ms, ttls)
  if #ids == 0 then return end
  if redis.call('EXISTS', C.K_PREFIX .. 'rsw') == 0 then
    for i, id in ipairs(ids) do retain(id, ttls[i] or ms) end
    return
  end
  local lists, order = {}, {}
  for i, id in ipairs(ids) do
    local m = math.floor(now / 60000)
    if ttls[i] then m = math.floor((now + ttls[i] - tonumber(ms)) / 60000) end
    local l = lists[m]
    if not l then l = {}; lists[m] = l; order[#order + 1] = m end
    l[#l + 1] = id
  end
  for _, m in ipairs(order) do
    local l, k = lists[m], C.K_PREFIX .. 'rs:' .. fmt(m)
    for i = 1, #l, 2000 do redis.call('RPUSH', k, unpack(l, i, math.min(i + 1999, #l))) end
    redis.call('ZADD', C.K_PREFIX .. 'rsi', 'NX', fmt(m * 60000), fmt(m))
  end
end

-- Progress of a running attempt: the record's pg is "<attempt> <percent>
-- <updated ms> <message>" (tab-separated). set_progress writes pct
-- (0..100) and msg for attempt at; within one attempt the percent never
-- goes down (a lower one keeps the higher, with the new message), so what
-- readers see is monotonic until a new attempt, which starts again at 0.
-- old is the record's pg (nil: none). Returns true.
local function set_progress(tk, at, old, pct, msg, now)
  pct = tonumber(pct) or 0
  if pct < 0 then pct = 0 elseif pct > 100 then pct = 100 end
  if old then
    local oa, op = string.match(old, '^(%d+)\t([%d.]+)\t')
    if oa == at and tonumber(op) and tonumber(op) > pct then pct = tonumber(op) end
  end
  redis.call('HSET', tk, 'pg', (at or '0') .. '\t' .. tostring(pct) .. '\t' .. fmt(now) .. '\t' .. msg)
  return true
end

-- backoff is min(cap, base*2^(attempt-1)) plus up to 25% jitter (j in 0..999).
local function backoff(base, cap, attempt, j)
  local d = base
  for _ = 2, attempt do
    d = d * 2
    if d >= cap then break end
  end
  if d > cap then d = cap end
  return d + math.floor(d * j / 4000)
end

-- retry_or_dead moves a task that left RUNNING unsuccessfully on: back to
-- PENDING with backoff while retries are left (and retryable), else FAILED.
-- Returns the new state code and the due time (0 when FAILED).
local function retry_or_dead(id, now, at, mr, rb, rc, from, reason, by, err, retryable, j, dead_ret)
  if retryable and at <= mr then
    local due = now + backoff(rb, rc, at, j)
    redis.call('HSET', tkey(id), 'st', 'P', 'rs', 'RETRY_BACKOFF', 'du', fmt(due))
    redis.call('ZADD', C.K_DELAYED, fmt(due), id)
    cnt('P', 1)
    trail(id, now, from, 'P', reason, by, fmt(at), err)
    return 'P', due
  end
  -- a final failure keeps a reason that says why it is final: its own when
  -- the reason names a limit the task met, else how its retries ended
  local r = (reason == 'RESULT_TOO_LARGE' or reason == 'MAX_PAUSE_EXCEEDED') and reason or
    (retryable and 'RETRIES_EXHAUSTED' or 'NON_RETRYABLE')
  redis.call('HSET', tkey(id), 'st', 'F', 'rs', r, 'fa', fmt(now))
  redis.call('ZADD', C.K_DEAD, fmt(now), id)
  backlog_end(id)
  batch_end(id, 'F')
  cnt('F', 1)
  cnt('tF', 1)
  trail(id, now, from, 'F', r, by, fmt(at), err)
  retain(id, dead_ret)
  return 'F', 0
end

-- Fair share (docs/fairness.md, queue/fairshare.go). Per shard and pool
-- with a fair share, every key built from the prefix:
--   fs:<pool>         HASH  tenant → "weight_milli floor max" ('*': any
--                           other tenant); no hash: no fair share, and no
--                           other fair-share key is read or written
--   fr:<pool>         HASH  tenant → the slots its tasks RUNNING in the
--                           pool hold, in milli-slots (a task of slots
--                           0.125 holds 125: eight hold one slot);
--                           '~'<tenant> → its starts ÷ weight (ties);
--                           '^'<tenant> → its priority mask: the
--                           priorities of its non-empty fq sets ("24");
--                           '!' → '1': the fq sets hold only READY tasks
--   fi:<pool>         ZSET  tenants that may have work waiting, by score
--   fq:<pool>:<p>:<t> ZSET  tenant t's READY tasks of priority p (1-4) by
--                           their ready-set score: a second index of
--                           q:<pool>:<p>, which stays the truth
-- Adds and removals are exact (fair_add, fair_drop); sets of an older ax
-- may hold stale entries: until '!' a claim checks its heads (claim.lua).
-- The mask is exact: fair_add sets a digit, a claim clears it for a set it
-- emptied. No '^' field (indexed before masks) is unknown: a claim reads
-- all four sets and writes what it found.
-- The score orders tenants: below its floor a tenant comes first (r/floor
-- - 1 < 0), then by running ÷ weight, and at its max it is out (≥ 1e12);
-- running r is in milli-slots, floors and maxes in slots.
local function fair(pool)
  local f = C.FAIR[pool]
  if f == nil then
    f = false
    local h = redis.call('HGETALL', C.K_PREFIX .. 'fs:' .. pool)
    if #h > 0 then
      f = {}
      for x = 1, #h, 2 do
        local w, fl, mx, z = string.match(h[x + 1], '^(%d+) (%d+) (%d+)( ?z?)')
        f[h[x]] = {w = math.max(tonumber(w), 1), fl = tonumber(fl), mx = tonumber(mx), no = z == ' z'}
      end
      f['*'] = f['*'] or {w = 1000, fl = 0, mx = 0}
    end
    C.FAIR[pool] = f
  end
  return f
end
local function fair_of(f, tn) return f[tn] or f['*'] end
local function fair_score(c, r)
  if c.no or c.mx > 0 and r >= c.mx * 1000 then return 1e12 + r end
  if r < c.fl * 1000 then return r / (c.fl * 1000) - 1 end
  return r / c.w
end
-- slot_milli is the milli-slots a task of record field sl holds (nil: a
-- whole slot).
local function slot_milli(sl)
  local m = tonumber(sl or '')
  if m and m > 0 then return m end
  return 1000
end
-- fair_running: the tenant's running milli-slots in the pool, starts ÷
-- weight (v, '~<tenant>': 1000 a whole slot's start of weight 1) and mask
-- (false: unknown);
-- fair_prefetch reads them for several tenants with one HMGET.
local function fair_prefetch(pool, tns)
  local m = C.FRUN[pool]
  if m == nil then m = {}; C.FRUN[pool] = m end
  local a, want = {}, {}
  for _, tn in ipairs(tns) do
    if m[tn] == nil then
      want[#want + 1] = tn
      a[#a + 1] = tn; a[#a + 1] = '~' .. tn; a[#a + 1] = '^' .. tn
    end
  end
  if #want == 0 then return end
  local h = redis.call('HMGET', C.K_PREFIX .. 'fr:' .. pool, unpack(a))
  for i, tn in ipairs(want) do
    local j = 3 * i - 2
    m[tn] = {tonumber(h[j] or '0'), tonumber(h[j + 1] or '0'), h[j + 2] or false}
  end
end
local function fair_frun(pool, tn)
  local m = C.FRUN[pool]
  local r = m and m[tn]
  if r == nil then
    fair_prefetch(pool, {tn})
    r = C.FRUN[pool][tn]
  end
  return r
end
local function fair_running(pool, tn)
  local r = fair_frun(pool, tn)
  return r[1], r[2], r[3]
end
local function fair_inc(c) return math.floor(1e6 / c.w) end
local function fqkey(pool, p, tn) return C.K_PREFIX .. 'fq:' .. pool .. ':' .. p .. ':' .. tn end
-- fair_mask_add puts priority p (a digit) into the tenant's mask (learnt
-- from the sets when unknown).
local function fair_mask_add(pool, tn, p)
  local r = fair_frun(pool, tn)
  local m = r[3]
  if m and string.find(m, p, 1, true) then return end
  local n = ''
  for q = 1, 4 do
    local d = tostring(q)
    if d == p or (m and string.find(m, d, 1, true)) or (not m and redis.call('EXISTS', fqkey(pool, d, tn)) == 1) then
      n = n .. d
    end
  end
  r[3] = n
  redis.call('HSET', C.K_PREFIX .. 'fr:' .. pool, '^' .. tn, n)
end
-- fair_add indexes a task just put into q:<pool>:<p> with score (tn: its
-- tenant when the caller has it). Priority 0 is strict: not indexed.
local function fair_add(pool, p, score, id, tn)
  if p == 0 or p == '0' then return end
  local f = fair(pool)
  if not f then return end
  tn = tn or redis.call('HGET', tkey(id), 'tn') or 'default'
  p = tostring(p)
  zadd(fqkey(pool, p, tn), score, id)
  local k = pool .. '\t' .. tn
  local seen = C.FSEEN[k]
  if not seen then
    seen = {}
    C.FSEEN[k] = seen
    C.FIDX[#C.FIDX + 1] = {C.K_PREFIX .. 'fi:' .. pool, fair_score(fair_of(f, tn), fair_running(pool, tn)), tn}
  end
  if not seen[p] then
    seen[p] = true
    fair_mask_add(pool, tn, p)
  end
end
-- fair_drop takes a task out of its tenant's set when it leaves the ready
-- set q:<pool>:<p> another way than a fair claim (tn: its record's).
local function fair_drop(pool, p, id, tn)
  if p == 0 or p == '0' or not fair(pool) then return end
  redis.call('ZREM', fqkey(pool, tostring(p), tn or 'default'), id)
end
-- fair_added: the priorities (digit → true) this call added tasks of the
-- tenant in (fair_add's zadd lands at finish, after a claim's reads).
local function fair_added(pool, tn) return rawget(C, 'FSEEN') and C.FSEEN[pool .. '\t' .. tn] end
-- fair_release gives back the slots a RUNNING task held in its pool's fair
-- share (its record's fs field: the tenant; sl its slots, nil: a whole
-- one); fair_flush writes what the script gave back, one HINCRBY per
-- tenant, re-scores the tenant, and wakes the pool when the tenant was at
-- its max; it returns a pool where a tenant with work waiting is now below
-- its floor and by how many slots (whole ones, rounded up).
local function fair_release(pool, tn, sl)
  local k = pool .. '\t' .. tn
  local e = C.FREL[k]
  if e == nil then e = {pool, tn, 0}; C.FREL[k] = e; C.FREL_K[#C.FREL_K + 1] = k end
  e[3] = e[3] + slot_milli(sl)
end
local function fair_flush()
  local owed, by = nil, 0
  for _, k in ipairs(C.FREL_K) do
    local pool, tn, n = C.FREL[k][1], C.FREL[k][2], C.FREL[k][3]
    local frk = C.K_PREFIX .. 'fr:' .. pool
    local r = redis.call('HINCRBY', frk, tn, -n)
    if r <= 0 then redis.call('HDEL', frk, tn); r = 0 end
    local f = fair(pool)
    if f then
      local c = fair_of(f, tn)
      local sc = fair_score(c, r)
      if redis.call('ZADD', C.K_PREFIX .. 'fi:' .. pool, 'XX', 'CH', sc, tn) > 0 then
        if c.mx > 0 and r + n >= c.mx * 1000 then wake(pool) end
        local short = math.ceil((c.fl * 1000 - r) / 1000)
        if sc < 0 and short > by then owed, by = pool, short end
      end
    end
    C.FREL[k] = nil
  end
  C.FREL_K = {}
  return owed, by
end

-- Limits (docs/limits.md, queue/limits.go). A task has the limit
-- keys 'y:<type>', 'n:<tenant>' and, when it names one, 'k:<limit_key>'.
-- Per shard, every key built from the prefix (the shared hash tag keeps
-- them on the shard's Cluster slot):
--   lim  HASH  key → "rate burst concurrency" (the leader's, limits.lua;
--              rate in milli-tasks/s, 0 = none)
--   lb   HASH  key → "tokens last_ms": token buckets, 1 task = 1e6 tokens
--   lc   HASH  key → tasks RUNNING under its concurrency limit
--   lp   HASH  pause key → paused until (ms): a handler's retry after
--   pkd  ZSET  key → when its parked tasks are looked at again (ms)
--   pk:<key> ZSET parked READY tasks by their ready-set score
-- A claim that finds a task limited parks it (moves it from its ready set
-- to pk:<key>, record field pk) instead of passing over it, so the tasks
-- behind it flow; parked tasks go back to their ready sets, in order, when
-- the key has room again (claims look at pkd, a freed slot unparks one).
-- A pool's slow lane (docs/fairness.md, slowlane.lua) is the key
-- 'w:<pool>': a concurrency limit the tasks of its slow types take, set in
--   sln  HASH  pool → "threshold_ms slots" (the leader's)
--   slt:<pool> HASH "<type> <tenant>" ('default' for none) → 'e' slow
--              by that tenant's learnt run time of the type (the
--              leader's) or 'h' (a RUNNING task of theirs passed the
--              threshold: heartbeat). Per tenant: one tenant's slow
--              handler never puts another tenant's tasks of the type in
--              the lane.
local function lmkey(s) return C.K_PREFIX .. s end
-- pause_key is where a handler's retry after pauses a task: its tenant's
-- tasks of its limit_key, or of its type when it names none, so that a
-- tenant pauses only its own work.
local function pause_key(tn, lk, ty)
  if lk and lk ~= '' then return 'p:' .. (tn or 'default') .. '|k:' .. lk end
  return 'p:' .. (tn or 'default') .. '|y:' .. (ty or '')
end
-- lim_cfg is the key's limit {rate, burst, conc} or false (memoized).
local function lim_cfg(key)
  local c = C.LCFG[key]
  if c == nil then
    c = false
    local b1 = string.byte(key, 1)
    if b1 == 112 then return false end -- a pause key: no limit
    if b1 == 119 then -- 'w:', a slow lane
      local v = redis.call('HGET', lmkey('sln'), string.sub(key, 3))
      if v then
        local cap = string.match(v, '^%d+ (%d+)')
        -- 0 slots: this shard's part of the lane is none for now
        c = {rate = 0, burst = 0, conc = math.max(tonumber(cap), 0), slow = true}
      end
      C.LCFG[key] = c
      return c
    end
    local v = redis.call('HGET', lmkey('lim'), key)
    if v then
      local a, b, d, z = string.match(v, '^(%d+) (%d+) (%d+)( ?z?)')
      c = {rate = tonumber(a), burst = tonumber(b), conc = tonumber(d)}
      -- ' z': this shard's part is none for now (limits.go limitPart)
      if z == ' z' then c.conc, c.none = 0, true end
    end
    C.LCFG[key] = c
  end
  return c
end
-- lim_pause is when the key's pause ends (0: none; memoized).
local function lim_pause(key, now)
  local u = C.LPAUSE[key]
  if u == nil then
    u = tonumber(redis.call('HGET', lmkey('lp'), key) or '0')
    if u ~= 0 and u <= now then
      redis.call('HDEL', lmkey('lp'), key) -- over: the hash empties again
      u = 0
    end
    C.LPAUSE[key] = u
  end
  return u
end
local function lim_bucket(key, c, now)
  local b = C.LB[key]
  if b == nil then
    local full = c.burst * 1e6
    local v = redis.call('HGET', lmkey('lb'), key)
    local tok, last = full, now
    if v then
      local a, t = string.match(v, '^(%-?%d+) (%d+)')
      tok, last = tonumber(a), tonumber(t)
    end
    if now > last then tok = tok + (now - last) * c.rate end
    if tok > full then tok = full end
    b = {tok = tok}
    C.LB[key] = b
    C.LB_KEYS[#C.LB_KEYS + 1] = key
  end
  return b
end
local function lim_running(key)
  local n = C.LC[key]
  if n == nil then
    n = tonumber(redis.call('HGET', lmkey('lc'), key) or '0')
    C.LC[key] = n
  end
  return n
end
-- lim_room is how many tasks of key may start now (at most 64); when none,
-- also when to look again and the kind of limit (rate, concurrency, paused).
local function lim_room(key, now)
  if string.byte(key, 1) == 112 then -- 'p:', a pause key
    local u = lim_pause(key, now)
    if u > now then return 0, u, 'paused' end
    return 64, now
  end
  local c = lim_cfg(key)
  if not c then return 64, now end
  local room = 64
  if c.slow and c.conc <= 0 then return 0, now + 1000, 'slow' end
  if c.none then return 0, now + 1000, 'concurrency' end
  if c.conc > 0 then
    room = c.conc - lim_running(key)
    if room <= 0 then return 0, now + 1000, c.slow and 'slow' or 'concurrency' end
  end
  if c.rate > 0 then
    local b = lim_bucket(key, c, now)
    local t = math.floor(b.tok / 1e6)
    if t <= 0 then return 0, now + math.ceil((1e6 - b.tok) / c.rate), 'rate' end
    room = math.min(room, t)
  end
  return room, now
end
-- lim_take spends one task's worth of key; returns whether its
-- concurrency is counted (the record lists such keys in lc).
local function lim_take(key, now)
  local c = lim_cfg(key)
  if not c then return false end
  if c.rate > 0 then
    local b = lim_bucket(key, c, now)
    b.tok = b.tok - 1e6
  end
  if c.conc > 0 then
    if C.LC[key] == nil then lim_running(key) end
    if C.LC_KEYS[key] == nil then C.LC_KEYS[key] = C.LC[key] end -- the value read
    C.LC[key] = C.LC[key] + 1
    return true
  end
  return false
end
-- lim_flush writes the buckets and counters this script changed.
local function lim_flush(now)
  for _, key in ipairs(C.LB_KEYS) do
    redis.call('HSET', lmkey('lb'), key, string.format('%d %d', C.LB[key].tok, now))
  end
  for key, was in pairs(C.LC_KEYS) do
    if C.LC[key] ~= was then redis.call('HINCRBY', lmkey('lc'), key, fmt(C.LC[key] - was)) end
  end
end
local LIM_REASON = {rate = 'RATE_LIMITED', concurrency = 'CONCURRENCY_LIMITED', paused = 'RETRY_AFTER',
  slow = 'SLOW_LANE_FULL'}
-- slow_type: whether tenant tn's type ty is slow in pool's slow lane
-- (memoized); mark_slow makes it so (a RUNNING task of it passed the
-- threshold).
local function slow_type(pool, ty, tn)
  local f = ty .. ' ' .. (tn or 'default')
  local k = pool .. '\t' .. f
  local v = C.SLOWT[k]
  if v == nil then
    v = redis.call('HEXISTS', lmkey('slt:' .. pool), f) == 1
    C.SLOWT[k] = v
  end
  return v
end
local function mark_slow(pool, ty, tn)
  local f = ty .. ' ' .. (tn or 'default')
  redis.call('HSETNX', lmkey('slt:' .. pool), f, 'h')
  C.SLOWT[pool .. '\t' .. f] = true
end
-- park sets a READY task aside under key until the key has room, and
-- looks at key again at `again` (ms). score: its ready-set score. The
-- step is logged once per parking (log false: the caller logged it).
local function park(id, pool, score, key, kind, now, again, log)
  local tk = tkey(id)
  if log then
    local r = redis.call('HMGET', tk, 'st', 'du', 'rt', 'at')
    local rt = r[3]
    if r[1] == 'P' and r[2] then
      -- promoted with its record untouched (pinned delayed): READY since due
      redis.call('HSET', tk, 'st', 'R', 'rs', 'DUE', 'eq', r[2])
      rt = r[2]
    end
    flush(id, rt, nil, nil, r[4] or '0')
    trail(id, now, 'R', 'R', LIM_REASON[kind], 'limits', r[4] or '0', string.sub(key, 3) .. ' (' .. kind .. ')')
  end
  redis.call('HSET', tk, 'pk', key)
  redis.call('ZADD', lmkey('pk:' .. key), score, id)
  redis.call('ZADD', lmkey('pkd'), 'LT', again, key)
  cnt('pk:' .. pool, 1)
  cnt('lim:' .. kind .. ':' .. pool, 1)
end
-- unpark puts up to n of key's parked tasks back into their ready sets, in
-- order, and wakes their pools; it forgets key in pkd when none is left.
-- Returns how many are left.
local function unpark(key, n)
  local pk = lmkey('pk:' .. key)
  local got = redis.call('ZRANGE', pk, 0, n - 1, 'WITHSCORES')
  local ids = {}
  for i = 1, #got, 2 do
    local id = got[i]
    ids[#ids + 1] = id
    local r = redis.call('HMGET', tkey(id), 'st', 'pk', 'po', 'pr', 'tn')
    if r[3] then cnt('pk:' .. r[3], -1) end
    if r[1] == 'R' and r[2] == key then
      redis.call('HDEL', tkey(id), 'pk')
      redis.call('ZADD', qkey(r[3], r[4]), got[i + 1], id)
      fair_add(r[3], r[4], got[i + 1], id, r[5] or 'default')
      wake(r[3])
    end
  end
  if #ids > 0 then redis.call('ZREM', pk, unpack(ids)) end
  local left = redis.call('ZCARD', pk)
  if left == 0 then redis.call('ZREM', lmkey('pkd'), key) end
  return left
end
-- release_add queues giving back the concurrency a task held (its lc
-- field); release_flush gives it back, one HINCRBY per key and script, and
-- unparks as many tasks of each key as slots came back.
local function release_add(lcv)
  for key in string.gmatch(lcv, '[^,]+') do
    local n = C.REL[key]
    if n == nil then C.REL_KEYS[#C.REL_KEYS + 1] = key; n = 0 end
    C.REL[key] = n + 1
  end
end
local function release_flush()
  for _, key in ipairs(C.REL_KEYS) do
    local n = C.REL[key]
    if redis.call('HINCRBY', lmkey('lc'), key, -n) <= 0 then redis.call('HDEL', lmkey('lc'), key) end
    if redis.call('ZSCORE', lmkey('pkd'), key) then unpark(key, n) end
    C.REL[key] = nil
  end
  C.REL_KEYS = {}
end
local function release_slots(lcv)
  release_add(lcv)
  release_flush()
end
-- slot_gap counts a fractional task (sl, milli-slots, nil: a whole slot)
-- into or out of (d 1 / -1) its pool's uf:<pool>: the milli-slots its
-- RUNNING tasks leave free of the slots they would take whole, so the
-- pool's slot units busy are u:<pool> × 1000 − uf:<pool>.
local function slot_gap(pool, sl, d)
  local free = 1000 - slot_milli(sl)
  if free > 0 then cnt('uf:' .. pool, d * free) end
end
-- leave_running undoes a RUNNING task's bookkeeping.
local function leave_running(id, pool)
  redis.call('ZREM', C.K_RUNNING, id)
  local r = redis.call('HMGET', tkey(id), 'lc', 'fs', 'sl')
  local lcv = r[1]
  if lcv and lcv ~= '' then release_slots(lcv) end
  if r[2] then fair_release(pool, r[2], r[3]); fair_flush() end
  redis.call('HDEL', tkey(id), 'lt', 'pq', 'lc', 'fs')
  cnt('U', -1)
  cnt('u:' .. pool, -1)
  slot_gap(pool, r[3], -1)
end

-- make_ready puts a PENDING task into its pool's ready set. has_pool: the
-- record names this pool already.
local function make_ready(id, now, pool, prio, eq, reason, has_pool)
  if has_pool then
    redis.call('HSET', tkey(id), 'st', 'R', 'rs', reason, 'eq', eq, 'rt', fmt_now(now))
  else
    redis.call('HSET', tkey(id), 'st', 'R', 'rs', reason, 'po', pool, 'eq', eq, 'rt', fmt_now(now))
  end
  zadd(qkey(pool, prio), eq, id)
  fair_add(pool, prio, eq, id)
  cnt('R', 1)
  cnt(rfield(pool, prio), 1)
  wake(pool)
end

-- Cost records (docs/cost.md): what every ended attempt cost, in
-- the region that ran it. One hash per shard and UTC day, cost:<day> (days
-- since the Unix epoch, by the script's clock), one field per
-- "<tenant>\t<type>\t<pool>\t<tags>" → "runs failed run_ms pico_usd": the
-- attempts, how many of them did not succeed, their run time (claim to end)
-- and their cost, price at claim (px) × run time, in 1e-12 USD. cost()
-- queues an attempt; write_costs() folds them, one HGET and one HSET per
-- field and script. Each tenant has at most COST_CAP fields of a day's
-- hash: past them a new field of the tenant is counted under
-- "<tenant>\t_other\t<pool>\t" (pools are the operator's, so that grows by
-- at most one field per pool), so a tenant's spend is always its own row,
-- whatever other tenants record. The hash counts each tenant's fields
-- under "\tn\t<tenant>" (not a record: parseCost skips it). A day's hash
-- holds at most COST_TENANTS tenants' counts: past them a new tenant's
-- attempts are counted under tenant and type "_other" (only callers of
-- every tenant can name tenants). Every key expires COST_TTL_MS after its
-- last write: a submitter inventing types grows neither the key count nor
-- a key past its tenant's share.
local COST_CAP, COST_TENANTS, COST_TTL_MS = 512, 1024, 400 * 86400000
-- sl: the task's slots in milli-slots (nil: a whole slot); a fractional
-- task costs its share of the slot's price (run_ms stays wall time).
local function cost(tenant, ty, pool, tags, price, ms, failed, sl)
  if not pool or not ty or ms == nil then return end
  local share = math.min(slot_milli(sl), 1000) / 1000
  local f = (tenant or 'default') .. '\t' .. ty .. '\t' .. pool .. '\t' .. (tags or '')
  local c = C.COSTS[f]
  if c == nil then c = {0, 0, 0, 0, pool}; C.COSTS[f] = c; C.COST_FIELDS[#C.COST_FIELDS + 1] = f end
  ms = math.max(ms, 0)
  c[1] = c[1] + 1
  if failed then c[2] = c[2] + 1 end
  c[3] = c[3] + ms
  -- $/slot-hour × ms ÷ 3.6e6 ms/h × 1e12 p$/$
  local p = tonumber(price or '') or 0
  c[4] = c[4] + p * ms * 1e6 / 3.6 * share
  local t = tenant or 'default'
  C.SPEND[t] = (C.SPEND[t] or 0) + p * ms / 3.6e6 * share
end
local function write_costs(now)
  if #C.COST_FIELDS == 0 then return end
  local month = month_of(now)
  for t, usd in pairs(C.SPEND) do
    local k = bgkey(month, t)
    if usd > 0 and redis.call('EXISTS', k) == 1 then redis.call('HINCRBYFLOAT', k, 'u', string.format('%.12f', usd)) end
  end
  C.SPEND = {}
  local key = C.K_PREFIX .. 'cost:' .. fmt(math.floor(now / 86400000))
  for _, f in ipairs(C.COST_FIELDS) do
    local c = C.COSTS[f]
    local v = redis.call('HGET', key, f)
    if not v then
      local tenant = string.match(f, '^([^\t]*)\t')
      local nf = '\tn\t' .. tenant
      local n = tonumber(redis.call('HGET', key, nf) or '')
      if n == nil and redis.call('HLEN', key) >= COST_TENANTS * (COST_CAP + 1) then
        nf = '\tn\t_other'
        n = tonumber(redis.call('HGET', key, nf) or '') or 0
        f = '_other\t_other\t' .. c[5] .. '\t'
        v = redis.call('HGET', key, f)
      elseif (n or 0) >= COST_CAP then
        f = tenant .. '\t_other\t' .. c[5] .. '\t'
        v = redis.call('HGET', key, f)
      end
      if not v then redis.call('HSET', key, nf, fmt((n or 0) + 1)) end
    end
    local n, fl, ms, pico = 0, 0, 0, 0
    if v then
      local a, b, d, e = string.match(v, '^(%d+) (%d+) (%d+) (%d+)')
      n, fl, ms, pico = tonumber(a) or 0, tonumber(b) or 0, tonumber(d) or 0, tonumber(e) or 0
    end
    redis.call('HSET', key, f, string.format('%d %d %d %d', n + c[1], fl + c[2], ms + c[3],
      math.floor(pico + c[4] + 0.5)))
  end
  redis.call('PEXPIRE', key, COST_TTL_MS)
end
