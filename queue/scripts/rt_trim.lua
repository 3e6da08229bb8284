-- rt_trim.lua (leader, fenced): brings a shard's run-time hash (lib.lua
-- runtime) down to keep triples and each tenant's triples to tkeep, from
-- the tenants holding the most: every tenant keeps min(its triples, L),
-- L the highest level up to tkeep at which they fit keep, so no tenant's
-- triples push another's out. A tenant drops its least used first
-- (smallest count; the older last observation first among equal counts),
-- so a burst of one-off type names is what goes and the types that carry
-- the work stay. It rewrites the tenants' counts (rtt) from what is kept.
-- KEYS: 1-8 see lib.lua; 9 fence key, 10 run times, 11 tenants' counts.
-- ARGV: 1 clock, 2 fencing token, 3 keep, 4 keep per tenant.
-- Returns: {RC.FENCED} fenced; else {removed}.
if not fence(KEYS[9], ARGV[2]) then return {RC.FENCED} end
local keep, tkeep = tonumber(ARGV[3]), tonumber(ARGV[4])
local h = redis.call('HGETALL', KEYS[10])
local by, names = {}, {}
for i = 1, #h, 2 do
  local tn = string.match(h[i], ' ([^ ]*)$') or 'default'
  local l = by[tn]
  if l == nil then l = {}; by[tn] = l; names[#names + 1] = tn end
  local n, last = string.match(h[i + 1], '^(%d+) %d+ %d+ (%d+)')
  l[#l + 1] = {h[i], tonumber(n) or 0, tonumber(last) or 0}
end
local function fits(level)
  local s = 0
  for _, tn in ipairs(names) do s = s + math.min(#by[tn], level) end
  return s <= keep
end
local level = tkeep
if not fits(level) then
  local lo, hi = 0, tkeep
  while lo < hi do
    local mid = math.floor((lo + hi + 1) / 2)
    if fits(mid) then lo = mid else hi = mid - 1 end
  end
  level = lo
end
local drop, counts = {}, {}
for _, tn in ipairs(names) do
  local l = by[tn]
  if #l > level then
    table.sort(l, function(a, b)
      if a[2] ~= b[2] then return a[2] < b[2] end
      if a[3] ~= b[3] then return a[3] < b[3] end
      return a[1] < b[1]
    end)
    for i = 1, #l - level do drop[#drop + 1] = l[i][1] end
  end
  local kept = math.min(#l, level)
  if kept > 0 then counts[#counts + 1] = tn; counts[#counts + 1] = fmt(kept) end
end
for i = 1, #drop, 1000 do
  redis.call('HDEL', KEYS[10], unpack(drop, i, math.min(i + 999, #drop)))
end
redis.call('DEL', KEYS[11])
for i = 1, #counts, 1000 do
  redis.call('HSET', KEYS[11], unpack(counts, i, math.min(i + 999, #counts)))
end
return {#drop}
