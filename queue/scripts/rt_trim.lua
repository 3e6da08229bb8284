-- rt_trim.lua (leader, fenced): brings a shard's run-time hash (lib.lua
-- runtime) down to keep pairs, dropping the least used first (smallest
-- count; the older last observation first among equal counts), so a burst
-- of one-off type names is what goes and the types that carry the work
-- stay.
-- KEYS: 1-8 see lib.lua; 9 fence key, 10 run times.
-- ARGV: 1 clock, 2 fencing token, 3 keep.
-- Returns: {RC.FENCED} fenced; else {removed}.
if not fence(KEYS[9], ARGV[2]) then return {RC.FENCED} end
local keep = tonumber(ARGV[3])
if redis.call('HLEN', KEYS[10]) <= keep then return {0} end
local h = redis.call('HGETALL', KEYS[10])
local entries = {}
for i = 1, #h, 2 do
  local n, last = string.match(h[i + 1], '^(%d+) %d+ %d+ (%d+)')
  entries[#entries + 1] = {h[i], tonumber(n) or 0, tonumber(last) or 0}
end
table.sort(entries, function(a, b)
  if a[2] ~= b[2] then return a[2] < b[2] end
  if a[3] ~= b[3] then return a[3] < b[3] end
  return a[1] < b[1]
end)
local drop = {}
for i = 1, #entries - keep do drop[i] = entries[i][1] end
for i = 1, #drop, 1000 do
  redis.call('HDEL', KEYS[10], unpack(drop, i, math.min(i + 999, #drop)))
end
return {#drop}
