-- claim.lua: take up to n READY tasks of one pool (READY→RUNNING), issue a
-- lease token for each, and return their records.
-- Order: priority 0 is a strict tier; among 1..4 the lowest
-- enqueue_ms + priority*aging_step wins, so a task gains one level per
-- aging_step of waiting but never reaches priority 0.
-- The price recorded on each task (px) is the pool's live price, which the
-- region leader keeps in the prices hash (overrides included, prices.lua);
-- the worker's configured price only when the leader has written none.
-- Types: a worker names the task types it serves (ARGV 9) and takes only
-- those; READY tasks of other types stay where they are, in order, for the
-- pool's other workers. Passing them over reads their type field, so a claim
-- passes over at most ARGV 10 of them per priority: behind more than that a
-- claimer sees nothing of that priority until the workers that serve them
-- drain them (placement sends a type only to pools whose workers serve it).
-- Limits (lib.lua, docs/limits.md): when the shard has limits, pauses or
-- parked tasks, a claim first unparks the keys whose time has come (at
-- most 8 keys), then checks each task it would take against its keys: a
-- limited one is parked (taken out of the ready set, RATE_LIMITED,
-- CONCURRENCY_LIMITED or RETRY_AFTER in the trail), at most 64 per claim,
-- and the claim goes on behind it.
-- Capacity window (docs/cost.md): a pool with a capacity schedule has the
-- key c:<pool>, a concurrency limit of its window's slots now (none while
-- closed), held by every task it runs, whatever its workers' slots.
-- Slow lane (docs/fairness.md): in a pool with one, a task of a type slow
-- for its tenant also has the key w:<pool>, a concurrency limit of the lane's slots: past
-- it the task is parked (SLOW_LANE_FULL) like a limited one, and a slow
-- task's end unparks the next, so quick tasks keep flowing behind them.
-- Room (docs/tasks.md "Fractional slots"): a claimer that counts slots
-- sends its free room in milli-slots (ARGV 11); each task takes its sl
-- (1000, a whole slot, when absent) out of it, and n only bounds the count.
-- A task that does not fit what is left ends the claim where it stands: it
-- keeps its place (no smaller task behind it jumps it), the answer says
-- the claim stopped for room, and the claimer claims again once a task of
-- its own ends.
-- KEYS: 1-8 see lib.lua; 9 prices.
-- ARGV: 1 clock, 2 pool, 3 worker, 4 n, 5 lease_ms, 6 aging_step_ms,
--       7 the worker's price per slot-hour ('' = none), 8 default timeout
--       ms (records omit fields equal to the region default), 9 served
--       types: '*' every type, else ',a,b,' (',' none), 10 per-priority
--       skip bound, 11 free room in milli-slots ('' or absent: none, every
--       task counts one of n).
-- Returns: {now_ms, first lease token, price recorded ('' = none), ms until
-- parked tasks are looked at again ('' = none of this pool parked), then per claimed
-- task: id, its record as HGETALL pairs before the claim}. The j-th
-- task (from 1) holds token first+j-1; a last '~' (before a fair
-- share's '!') says the claim stopped at a task its room could not fit; the caller applies what the claim
-- set (st U, wk, lt, sa now, at+1, px; for a task promoted untouched, rs
-- DUE and rt, eq its due time) to its copy.
local now = clock(ARGV[1])
local pool, worker, n = ARGV[2], ARGV[3], tonumber(ARGV[4])
local lease, step, price = tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7]
local filter = ARGV[9] ~= '*'
local bound, served = 0, {}
if filter then
  bound = tonumber(ARGV[10])
  for ty in string.gmatch(ARGV[9], '[^,]+') do served[ty] = true end
end
local skipped = 0
-- ROOM: the claimer's free room left (milli-slots), nil when it sends none;
-- FULL: a task did not fit it, which ends the claim.
local ROOM = ARGV[11] and ARGV[11] ~= '' and tonumber(ARGV[11]) or nil
local FULL = false
-- LIM: the shard has limits, pauses, slow lanes or parked tasks (one
-- EXISTS a claim); otherwise no limit code runs.
local LIM = redis.call('EXISTS', lmkey('lim'), lmkey('lp'), lmkey('pkd'), lmkey('sln')) > 0
local LANE = LIM and lim_cfg('w:' .. pool) and 'w:' .. pool -- this pool's slow lane key, if any
-- CAP: the pool's capacity window (the leader's limit c:<pool>, its
-- window's slots now, none while closed): every task of the pool holds it
local CAP = LIM and lim_cfg('c:' .. pool) and 'c:' .. pool
if LIM then
  for _, key in ipairs(redis.call('ZRANGEBYSCORE', lmkey('pkd'), '-inf', fmt(now), 'LIMIT', 0, 8)) do
    local room, again = lim_room(key, now)
    if room > 0 and unpark(key, room) > 0 then
      local c = lim_cfg(key)
      -- the rest: after the next token, or a safety look (freed slots unpark)
      again = now + 1000
      if c and c.rate > 0 then again = now + math.ceil(1e6 / c.rate) end
      if not c then again = now end
    end
    if room <= 0 or redis.call('ZSCORE', lmkey('pkd'), key) then
      redis.call('ZADD', lmkey('pkd'), again, key)
    end
  end
end
local PARK_MAX, parked = 64, 0
-- keys_of: a task's limit keys, built once
-- per (type, tenant, limit_key) and claim.
local KC = {}
local function keys_of(ty, tn, lk)
  local a = KC[ty]
  if a == nil then a = {}; KC[ty] = a end
  local b = a[tn]
  if b == nil then b = {}; a[tn] = b end
  local ks = b[lk]
  if ks == nil then
    -- the pause first: a paused task waits for the pause, not a token
    ks = {pause_key(tn, lk, ty), 'y:' .. ty, 'n:' .. tn}
    if lk ~= '' then ks[#ks + 1] = 'k:' .. lk end
    if LANE and slow_type(pool, ty, tn) then ks[#ks + 1] = LANE end
    if CAP then ks[#ks + 1] = CAP end
    b[lk] = ks
  end
  return ks
end
local held = {} -- id -> ',key,...,' of the concurrency it takes
local rec = {}  -- id -> its record as read by admit (limits on)
local pre = {}  -- id -> {to, at, st, du, sl} of rec[id], read with what admit checks
-- admit: 'take' this task, 'skip' it (not a type this claimer serves: it
-- stays, counting towards the bound), 'park' it (limited) or 'full' (it
-- does not fit the room left: it stays, and the claim ends).
local F = fair(pool) -- the pool's fair share (lib.lua), false when it has none
local TN = {}         -- id -> tenant, for fs (F only)
local function admit(id, p, pool, score, tn)
  local ty, lk, sl
  local h = rec[id]
  if h == nil and (LIM or ROOM) then
    -- the record, read once: the claim returns it (rec) if it takes the task
    h = redis.call('HGETALL', tkey(id))
    rec[id] = h
  end
  -- the record is parsed only for what is checked: its type (the
  -- claimer's types), its keys (limits); a fair share gave its tenant
  if h and (LIM or ROOM or filter or not tn) then
    -- what the claim's write needs too (one walk over the record)
    local to, at, st, du
    for x = 1, #h, 2 do
      local f = h[x]
      if f == 'ty' then ty = h[x + 1] elseif f == 'tn' then tn = h[x + 1] elseif f == 'at' then at = h[x + 1]
      elseif f == 'st' then st = h[x + 1] elseif f == 'to' then to = h[x + 1] elseif f == 'lk' then lk = h[x + 1]
      elseif f == 'sl' then sl = h[x + 1] elseif f == 'du' then du = h[x + 1] end
    end
    pre[id] = {to, at, st, du, sl}
  elseif filter and (tn or not F) then
    ty = redis.call('HGET', tkey(id), 'ty')
  elseif F and not tn then
    local r = redis.call('HMGET', tkey(id), 'ty', 'tn')
    ty, tn = r[1], r[2]
  end
  if filter and not (ty and served[ty]) then
    skipped = skipped + 1
    return 'skip'
  end
  local need = 0
  if ROOM then
    need = slot_milli(sl)
    if need > ROOM then
      FULL = true
      return 'full'
    end
  end
  if not LIM then
    if ROOM then ROOM = ROOM - need end
    return 'take', tn
  end
  local ks = keys_of(ty or '', tn or 'default', lk or '')
  for _, key in ipairs(ks) do
    local room, again, kind = lim_room(key, now)
    if room <= 0 then
      park(id, pool, score, key, kind, now, again, true)
      parked = parked + 1
      return 'park'
    end
  end
  -- the keys whose concurrency the task counts, for its record: the same
  -- for every task of these keys in this claim
  local hl = ks.held
  if hl == nil then
    hl = false
    for _, key in ipairs(ks) do
      local c = lim_cfg(key)
      if c and c.conc > 0 then hl = (hl or ',') .. key .. ',' end
    end
    ks.held = hl
  end
  for _, key in ipairs(ks) do lim_take(key, now) end
  if hl then held[id] = hl end
  if ROOM then ROOM = ROOM - need end
  return 'take', tn
end

local chosen = {} -- {id, prio}
local gone = {}   -- prio -> ids taken or parked, removed from that ready set with one ZREM
local function remove(p, id)
  local l = gone[p]
  if l == nil then l = {}; gone[p] = l end
  l[#l + 1] = id
end
-- FT: per tenant of a fair pool, its share and running milli-slots as
-- read, and the milli-slots this claim gave it (d: each task's slots as
-- far as the claim read them, a whole slot where it did not; the record
-- walk below counts them exactly, FX).
local FT = {}
local function ft(tn)
  local e = FT[tn]
  if e == nil then
    local r, v, m = fair_running(pool, tn)
    local c = fair_of(F, tn)
    e = {c = c, r = r, v = v, m = m, d = 0, inc = fair_inc(c)}
    FT[tn] = e
  end
  return e
end
-- milli: the milli-slots of task id as far as the claim read its record.
local function milli(id)
  local v = pre[id]
  return slot_milli(v and v[5])
end
local function take(p, id, tn)
  chosen[#chosen + 1] = {id, p}
  remove(p, id)
  if F then
    tn = tn or 'default'
    TN[id] = tn
    local e = ft(tn)
    e.d = e.d + milli(id)
  end
end

-- Each priority's head is read `left` at a time and read further only once
-- tasks were passed over or parked, so a claimer that serves what it finds
-- reads no more than an unfiltered claim.
local off0, passed = 0, 0
while #chosen < n and passed < math.max(bound, 1) and parked < PARK_MAX and not FULL do
  local want = n - #chosen
  local top = redis.call('ZRANGE', qkey(pool, 0), off0, off0 + want - 1, 'WITHSCORES')
  off0 = off0 + #top / 2
  local parked0 = parked
  for i = 1, #top, 2 do
    local id = top[i]
    local a, tn = admit(id, 0, pool, top[i + 1])
    if a == 'take' then
      take(0, id, tn)
    elseif a == 'park' then
      remove(0, id)
      if parked >= PARK_MAX then break end
    elseif a == 'full' then
      break
    else
      passed = passed + 1
      if passed >= bound then break end
    end
  end
  if #top < 2 * want or (not filter and parked == parked0) then break end
end

local left = n - #chosen
-- Fair share (docs/fairness.md): priorities 1..4 go by tenant. The index
-- fi:<pool> is read a few tenants at a time from its lowest score (one
-- HMGET for their running counts and priority masks). The claim's slots
-- are first shared out on the tenants' scores alone: one at a time to the
-- tenant with the lowest score (below its floor first, then running ÷
-- weight, none at its max), its score recomputed with the slots given. Then
-- each tenant's tasks are drawn, as many as it was given, from its own
-- sets fq of the priorities in its mask, merged by aging as below, each
-- set's head read no longer than that. A tenant that has fewer (its sets
-- run out, stale entries, tasks parked or passed over) is out, and the
-- slots it left are shared again among the others: the same tenants get the
-- same slots as giving them one by one. A claimer with room gets no more
-- shared out at a time than the whole slots its room holds (one at least),
-- and again for what room is left after the draws: shared out by N, the
-- tenant drawn first would fill the room with slots the share gave it
-- beyond it (a floor's tenant took every slot). What a tenant's draw consumed is a
-- prefix of each of its sets, removed by rank; a claimer that filters types
-- removes by id (a task passed over stays). An index with no tenant (tasks
-- READY before the pool's fair share began) leaves the claim to the plain
-- merge.
local fcand, fair_on = {}, false
local sp = {'1', '2', '3', '4'}
-- EX: the tenant sets hold only READY tasks ('!' in fr, lib.lua) and no
-- limit runs, so a head is taken as read: the ready-set removal of what
-- the claim took (below) is the check, and no score is read but for
-- merging a tenant's priorities. With limits a task's admission writes
-- (tokens, counts) before that removal, so heads are checked as read.
local EX = false
if F and left > 0 and parked < PARK_MAX and not FULL then
  local fik, frk = K_PREFIX .. 'fi:' .. pool, K_PREFIX .. 'fr:' .. pool
  local exact = redis.call('HGET', frk, '!') == '1'
  EX = exact and not LIM
  local ioff, imore = 0, false
  local function read_index()
    local w = left + 3
    local got = redis.call('ZRANGE', fik, ioff, ioff + w)
    if ioff == 0 and #got == 0 and not exact then
      -- no tenant indexed: no set holds an entry, stale or not
      redis.call('HSET', frk, '!', '1')
    end
    ioff = ioff + #got
    imore = #got == w + 1
    fair_prefetch(pool, got)
    for _, tn in ipairs(got) do
      fcand[#fcand + 1] = {tn = tn, e = ft(tn), a = 0, over = 0}
    end
    return #got
  end
  -- c: a candidate tenant; c.ps its priorities (numbers), per priority
  -- the ids of its head read (h) and their scores in the pool's ready set
  -- (hs, one ZMSCORE a read: false for an entry not READY in this pool
  -- and priority any more, removals being lazy, lib.lua), the next
  -- position (pos), next offset (off), whether the set may hold more
  -- (more), the aging key of its next live task (key, false: none), the
  -- entries consumed (used; their ids in rm when the claimer filters) and
  -- whether one was passed over (skip).
  local function start(c)
    local m = c.e.m
    c.ps, c.h, c.hs, c.pos, c.off, c.more, c.key, c.used, c.rm, c.skip = {}, {}, {}, {}, {}, {}, {}, {}, {}, {}
    for p = 1, 4 do
      if m == false or string.find(m, sp[p], 1, true) then
        c.ps[#c.ps + 1] = p
        c.off[p], c.used[p], c.rm[p] = 0, 0, {}
      end
    end
  end
  local function consumed(c, p, id)
    if filter then c.rm[p][#c.rm[p] + 1] = id else c.used[p] = c.used[p] + 1 end
  end
  -- heads reads the next size entries of the tenant's set of priority p
  -- and their scores in the pool's ready set.
  local function heads(c, p, size)
    local o = c.off[p]
    local k = fqkey(pool, p, c.tn)
    local h, hs
    if not EX then
      h = redis.call('ZRANGE', k, o, o + size - 1)
      hs = #h > 0 and redis.call('ZMSCORE', qkey(pool, p), unpack(h)) or h
    elseif #c.ps == 1 then
      h = redis.call('ZRANGE', k, o, o + size - 1)
      hs = h -- live, and its score is not needed: one priority, no limits
    else
      local w = redis.call('ZRANGE', k, o, o + size - 1, 'WITHSCORES')
      h, hs = {}, {}
      for j = 1, #w, 2 do h[#h + 1] = w[j]; hs[#hs + 1] = w[j + 1] end
    end
    c.h[p], c.hs[p], c.pos[p], c.off[p], c.more[p] = h, hs, 1, o + #h, #h == size
    return h
  end
  -- fnext: the tenant's next live task by aging (its id, priority and
  -- ready-set score), or nil when it has none left; the stale entries on
  -- the way are consumed. size: how many to read when a head runs out.
  local function fnext(c, size)
    local bp, bk
    local ps = c.ps
    for j = 1, #ps do
      local p = ps[j]
      local k = c.key[p]
      if k == nil then
        k = false
        while true do
          local h, i = c.h[p], c.pos[p]
          if h == nil or (i > #h and c.more[p]) then
            h, i = heads(c, p, h and math.max(size, 8) or size), 1
          end
          if i > #h then break end
          local sc = c.hs[p][i]
          if sc then
            k = tonumber(sc) + p * step
            break
          end
          consumed(c, p, h[i]) -- stale: the lazy removal
          c.pos[p] = i + 1
        end
        c.key[p] = k
      end
      if k and (bk == nil or k < bk) then bp, bk = p, k end
    end
    if bp == nil then return nil end
    local i = c.pos[bp]
    c.pos[bp] = i + 1
    c.key[bp] = nil
    return c.h[bp][i], bp, c.hs[bp][i]
  end
  -- draw takes up to want tasks of tenant c.
  local function draw(c, want)
    if not c.ps then start(c) end
    local e, got = c.e, 0
    local one = #c.ps == 1 and c.ps[1] -- one priority: no merge
    if one and EX and not filter and not ROOM then
      -- every head is READY and taken as it is (admit would only say so)
      local p = one
      local g = gone[p]
      if g == nil then g = {}; gone[p] = g end
      while got < want do
        local h, i = c.h[p], c.pos[p]
        if h == nil or (i > #h and c.more[p]) then
          h, i = heads(c, p, h and math.max(want - got, 8) or want - got), 1
        end
        if i > #h then c.out = true; return end
        local last = math.min(#h, i + want - got - 1)
        local tn = c.tn
        for j = i, last do
          local id = h[j]
          chosen[#chosen + 1] = {id, p}
          g[#g + 1] = id
          TN[id] = tn
        end
        local k = last - i + 1
        c.pos[p], c.used[p] = last + 1, c.used[p] + k
        got, left, e.d = got + k, left - k, e.d + 1000 * k
      end
      return
    end
    while got < want and parked < PARK_MAX do
      local id, p, sc
      if one then
        p = one
        local h, i = c.h[p], c.pos[p]
        if h == nil or (i > #h and c.more[p]) then
          h, i = heads(c, p, h and math.max(want - got, 8) or want - got), 1
        end
        if i > #h then c.out = true; return end
        c.pos[p] = i + 1
        id, sc = h[i], c.hs[p][i]
      else
        id, p, sc = fnext(c, want - got)
        if id == nil then c.out = true; return end
      end
      local a = 'stale'
      if sc then a = admit(id, p, pool, sc, c.tn) end
      if a == 'stale' then
        consumed(c, p, id) -- not READY in this pool and priority: the lazy removal
      elseif a == 'take' then
        chosen[#chosen + 1] = {id, p}
        remove(p, id)
        TN[id] = c.tn
        e.d = e.d + milli(id)
        got = got + 1
        left = left - 1
        consumed(c, p, id)
      elseif a == 'park' then
        remove(p, id)
        consumed(c, p, id)
      elseif a == 'full' then
        c.skip[p] = true -- it stays in the tenant's set
        return
      else
        c.skip[p] = true
        c.over = c.over + 1
        if c.over >= bound then c.out = true; return end
      end
    end
  end
  if read_index() > 0 then
    fair_on = true
    -- Ties: a tenant's count includes tasks whose worker finished them
    -- but has not recorded it yet (its acks lag its claims by a few ms), so
    -- equal scores are mostly stale ones. They go to the tenant furthest
    -- behind in starts ÷ weight (v, lib.lua), which keeps the starts in
    -- proportion whoever's task freed the slot; an idle tenant's lead is
    -- cut to 2 starts of weight 1, so it cannot bank a long idle spell.
    local vmax = 0
    for _, c in ipairs(fcand) do vmax = math.max(vmax, c.e.v) end
    for _, c in ipairs(fcand) do
      local e = c.e
      if e.v < vmax - 2000 then e.v, e.vset = vmax - 2000, true end
    end
    while left > 0 and parked < PARK_MAX and not FULL do
      -- share out `left` slots: c.a each, on (score, v) with the slots given
      local act = 0
      for _, c in ipairs(fcand) do
        c.a = 0
        if not c.out then
          local e = c.e
          c.sc, c.v = fair_score(e.c, e.r + e.d), e.v + e.d * e.inc / 1000
          if c.sc < 1e12 then act = act + 1 end
        end
      end
      if act == 0 then
        if not imore or read_index() == 0 then break end
      else
        local nc = #fcand
        -- with room: its whole slots at a time (above)
        local share = left
        if ROOM then share = math.min(left, math.max(1, math.floor(ROOM / 1000))) end
        for _ = 1, share do
          local best, bs, bv = nil, nil, nil
          for j = 1, nc do
            local c = fcand[j]
            local sc = c.sc
            if sc < 1e12 and not c.out and (bs == nil or sc < bs - 1e-9 or (sc <= bs + 1e-9 and c.v < bv)) then
              best, bs, bv = c, sc, c.v
            end
          end
          if best == nil then break end
          local a, e = best.a + 1, best.e
          best.a = a
          best.sc, best.v = fair_score(e.c, e.r + e.d + 1000 * a), best.v + e.inc
        end
        for _, c in ipairs(fcand) do
          if c.a > 0 and parked < PARK_MAX and not FULL then draw(c, c.a) end
        end
      end
    end
  end
end
if left > 0 and parked < PARK_MAX and not fair_on and not FULL then
  -- heads of priorities 1..4, merged by key; a priority that passed over
  -- `bound` tasks is done for this claim.
  local heads, pos, off, over, more, pkn = {}, {}, {}, {}, {}, {}
  local function refill(p)
    heads[p] = redis.call('ZRANGE', qkey(pool, p), off[p], off[p] + left - 1, 'WITHSCORES')
    pos[p] = 1
    off[p] = off[p] + #heads[p] / 2
    more[p] = #heads[p] == 2 * left -- a full read: the set may hold more
  end
  for p = 1, 4 do
    off[p], over[p], pkn[p] = 0, 0, 0
    refill(p)
  end
  while left > 0 and parked < PARK_MAX and not FULL do
    local best, bestKey = nil, nil
    for p = 1, 4 do
      local h = heads[p]
      if pos[p] >= #h and more[p] and ((over[p] > 0 and over[p] < bound) or pkn[p] > 0) then
        refill(p) -- read on past what this claim passed over or parked
        h = heads[p]
      end
      if pos[p] < #h and (not filter or over[p] < bound) then
        local key = tonumber(h[pos[p] + 1]) + p * step
        if bestKey == nil or key < bestKey then best, bestKey = p, key end
      end
    end
    if best == nil then break end
    local id = heads[best][pos[best]]
    local a, tn = admit(id, best, pool, heads[best][pos[best] + 1])
    pos[best] = pos[best] + 2
    if a == 'take' then
      take(best, id, tn)
      left = left - 1
    elseif a == 'park' then
      remove(best, id)
      pkn[best] = pkn[best] + 1
    elseif a == 'full' then
      break
    else
      over[best] = over[best] + 1
    end
  end
end
-- unexact: the ready-set removal took fewer than the claim drew, so the
-- tenant sets were not exact after all (a server of an older ax removed
-- a task lazily during an upgrade, or a fault). The claim drops what the
-- record says is not READY in this pool and priority (running, finished,
-- cancelled, parked, moved, waiting for a retry), its fq entry consumed,
-- and the pool's heads are checked again from now on.
local function unexact(p, g)
  redis.call('HDEL', K_PREFIX .. 'fr:' .. pool, '!')
  local bad, sp = {}, tostring(p)
  for _, id in ipairs(g) do
    local r = redis.call('HMGET', tkey(id), 'st', 'po', 'pr', 'pk', 'rs', 'pn', 'ob')
    local ok = r[1] == 'R' and r[2] == pool and r[3] == sp and not r[4]
    if not ok and is_lazy(r[1], r[5], r[6], r[7]) and r[2] == pool and r[3] == sp then
      ok = not redis.call('ZSCORE', dkey(pool, sp), id) -- promoted untouched, not waiting
    end
    if not ok then bad[id] = true end
  end
  local keep = {}
  for _, c in ipairs(chosen) do
    local id = c[1]
    if bad[id] then
      local tn = TN[id]
      if tn then FT[tn].d = FT[tn].d - 1 end
      TN[id] = nil
    else
      keep[#keep + 1] = c
    end
  end
  chosen = keep
  cnt('fst', 1) -- claims that met a stale entry of an exact set
  redis.log(redis.LOG_WARNING, 'ax: pool ' .. pool .. ': a fair claim met stale tenant-set entries; checking heads from now on')
end
for p = 0, 4 do
  local g = gone[p]
  if g and #g > 0 and redis.call('ZREM', qkey(pool, p), unpack(g)) < #g and EX then unexact(p, g) end
end
-- FW: the fair-share writes, made once the record walk below counted
-- each tenant's milli-slots exactly (FX).
local FW, FX = nil, {}
if F then
  local hs, za, zr, emptied = {}, {'XX'}, {}, {}
  FW = {hs = hs, za = za, zr = zr, emptied = emptied}
  for _, c in ipairs(fcand) do
    if c.ps then
      -- what the draw consumed goes; a set it read to the end (and passed
      -- nothing over in) is empty now and leaves the tenant's mask
      local m, was, add = '', c.e.m, fair_added(pool, c.tn)
      for _, p in ipairs(c.ps) do
        local k = fqkey(pool, p, c.tn)
        if filter then
          if #c.rm[p] > 0 then redis.call('ZREM', k, unpack(c.rm[p])) end
        elseif c.used[p] > 0 then
          redis.call('ZREMRANGEBYRANK', k, 0, c.used[p] - 1)
        end
        local h = c.h[p]
        if not (h and not c.more[p] and c.pos[p] > #h and not c.skip[p]) or (add and add[sp[p]]) then
          m = m .. p
        end
      end
      if m ~= was then
        hs[#hs + 1] = '^' .. c.tn; hs[#hs + 1] = m
      end
      -- a tenant with no set left leaves the index (it comes back with
      -- its next READY task, fair_add)
      if m == '' then
        zr[#zr + 1] = c.tn
        emptied[c.tn] = true
      end
    end
  end
end

-- The reason CLAIMED is implied by st U (nothing else sets rs while RUNNING),
-- so rs keeps why the task became READY, which the trail shows.
local k = #chosen
local out, ids = {fmt(now), '0', '', ''}, {}
if k > 0 then
  price = redis.call('HGET', KEYS[9], pool) or price
  out[3] = price
  -- Lease tokens: one INCRBY for the batch.
  local first = redis.call('INCRBY', K_SEQ, k) - k + 1
  out[2] = fmt(first)
  local snow = fmt(now)
  for j, c in ipairs(chosen) do
    local id, p = c[1], c[2]
    local tk = tkey(id)
    -- The record as it was: the caller applies what this claim sets.
    local h = rec[id] or redis.call('HGETALL', tk)
    local to, at, st, du, sl
    local v = pre[id]
    if v then
      to, at, st, du, sl = v[1], v[2], v[3], v[4], v[5]
    else
      for x = 1, #h, 2 do
        local f = h[x]
        if f == 'to' then to = h[x + 1] elseif f == 'at' then at = h[x + 1]
        elseif f == 'st' then st = h[x + 1] elseif f == 'du' then du = h[x + 1]
        elseif f == 'sl' then sl = h[x + 1] end
      end
    end
    slot_gap(pool, sl, 1)
    if st == 'P' and du then
      -- Promoted with its record untouched (lib.lua): it became READY at
      -- its due time, which is also its enqueue time.
      redis.call('HSET', tk, 'rs', 'DUE', 'rt', du, 'eq', du)
    end
    local dl = now + tonumber(to or ARGV[8])
    local exp = now + lease
    if dl < exp then exp = dl end
    local hl = held[id]
    if F then
      -- fs: the tenant whose slots of the pool's fair share the task holds
      local fs = TN[id] or 'default'
      FX[fs] = (FX[fs] or 0) + slot_milli(sl)
      if hl and price ~= '' then
        redis.call('HSET', tk, 'st', 'U', 'wk', worker, 'lt', fmt(first + j - 1), 'sa', snow,
          'at', fmt(tonumber(at or '0') + 1), 'fs', fs, 'px', price, 'lc', hl)
      elseif hl then
        redis.call('HSET', tk, 'st', 'U', 'wk', worker, 'lt', fmt(first + j - 1), 'sa', snow,
          'at', fmt(tonumber(at or '0') + 1), 'fs', fs, 'lc', hl)
      elseif price ~= '' then
        redis.call('HSET', tk, 'st', 'U', 'wk', worker, 'lt', fmt(first + j - 1), 'sa', snow,
          'at', fmt(tonumber(at or '0') + 1), 'fs', fs, 'px', price)
      else
        redis.call('HSET', tk, 'st', 'U', 'wk', worker, 'lt', fmt(first + j - 1), 'sa', snow,
          'at', fmt(tonumber(at or '0') + 1), 'fs', fs)
      end
    elseif price ~= '' and hl then
      redis.call('HSET', tk, 'st', 'U', 'wk', worker, 'lt', fmt(first + j - 1), 'sa', snow,
        'at', fmt(tonumber(at or '0') + 1), 'px', price, 'lc', hl)
    elseif price ~= '' then
      redis.call('HSET', tk, 'st', 'U', 'wk', worker, 'lt', fmt(first + j - 1), 'sa', snow,
        'at', fmt(tonumber(at or '0') + 1), 'px', price)
    elseif hl then
      redis.call('HSET', tk, 'st', 'U', 'wk', worker, 'lt', fmt(first + j - 1), 'sa', snow,
        'at', fmt(tonumber(at or '0') + 1), 'lc', hl)
    else
      redis.call('HSET', tk, 'st', 'U', 'wk', worker, 'lt', fmt(first + j - 1), 'sa', snow,
        'at', fmt(tonumber(at or '0') + 1))
    end
    zadd(K_RUNNING, fmt(exp), id)
    cnt(rfield(pool, p), -1)
    out[#out + 1] = id
    out[#out + 1] = h
    ids[j] = id
  end
  cnt('R', -k)
  cnt('U', k)
  cnt('u:' .. pool, k)
end
if FW then
  local hs, za, zr = FW.hs, FW.za, FW.zr
  for tn, e in pairs(FT) do
    local d = FX[tn] or 0
    if d > 0 then
      -- the script's view of both is current: nothing ran in between
      hs[#hs + 1] = tn; hs[#hs + 1] = fmt(e.r + d)
      hs[#hs + 1] = '~' .. tn; hs[#hs + 1] = fmt(math.floor(e.v + d * e.inc / 1000))
      if not FW.emptied[tn] then za[#za + 1] = fair_score(e.c, e.r + d); za[#za + 1] = tn end
    elseif e.vset then
      hs[#hs + 1] = '~' .. tn; hs[#hs + 1] = fmt(e.v)
    end
  end
  if #hs > 0 then redis.call('HSET', K_PREFIX .. 'fr:' .. pool, unpack(hs)) end
  if #za > 1 then redis.call('ZADD', K_PREFIX .. 'fi:' .. pool, unpack(za)) end
  if #zr > 0 then redis.call('ZREM', K_PREFIX .. 'fi:' .. pool, unpack(zr)) end
end

-- Chain the wake-up: if work remains, leave a marker for the next idle
-- claimer; tasks passed over are work for another worker of the pool (the
-- worker backs off when such wake-ups keep finding it nothing to take).
if skipped > 0 or parked >= PARK_MAX or ((k == n or FULL) and redis.call('EXISTS', qkey(pool, 0), qkey(pool, 1), qkey(pool, 2), qkey(pool, 3), qkey(pool, 4)) > 0) then
  wake(pool)
end
if LIM then
  lim_flush(now)
  -- Only a claimer of a pool with parked tasks is told when to come back:
  -- its claims release them (and other pools', which they wake).
  local mine = tonumber(redis.call('HGET', K_CNT, 'pk:' .. pool) or '0') + (CNT['pk:' .. pool] or 0)
  if mine > 0 then
    local nx = redis.call('ZRANGE', lmkey('pkd'), 0, 0, 'WITHSCORES')
    if #nx > 0 then out[4] = fmt(math.max(tonumber(nx[2]) - now, 0)) end
  end
end
event('claim', ids, k)
if FULL then out[#out + 1] = '~' end
-- A fair share counts what runs (a floor's part may be on any shard): the
-- claimer should record its ended tasks before it claims their slots.
if F then out[#out + 1] = '!' end
return out
