-- sweep.lua (leader, fenced): retention. Dead letters: the dead set's
-- entries older than the dead retention are dropped (their records expire
-- by their own TTL), at most limit per call. Successes (lib.lua
-- retain_success): the records and trails of the minutes that ended more
-- than the success retention ago are deleted, oldest minute first, at
-- most slimit per call (one call stays within a few ms; the leader calls
-- again at once while some are left). Every call renews rsw, the mark
-- that a sweeper is alive: complete.lua keeps successes for this sweep
-- only while it exists, and gives them a TTL otherwise.
-- KEYS: 1-8 see lib.lua; 9 fence key.
-- ARGV: 1 clock, 2 fencing token, 3 dead retention ms, 4 limit, 5 success
--       retention ms, 6 slimit, 7 rsw lifetime ms.
-- Returns: {RC.FENCED} fenced; else {dead removed, successes deleted, 1 when
-- successes past their retention are left, else 0, ms since the oldest
-- unswept minute became due (0: none due)}.
local now = clock(ARGV[1])
if not fence(KEYS[9], ARGV[2]) then return {RC.FENCED} end
local old = redis.call('ZRANGEBYSCORE', K_DEAD, '-inf', fmt(now - tonumber(ARGV[3])), 'LIMIT', 0, tonumber(ARGV[4]))
for _, id in ipairs(old) do redis.call('ZREM', K_DEAD, id) end
cnt('F', -#old)
redis.call('SET', K_PREFIX .. 'rsw', '1', 'PX', tonumber(ARGV[7]))
-- a minute m holds tasks finished in [m, m + 1 min): all past the
-- retention once m + 1 min <= now - retention
local keep = tonumber(ARGV[5]) + 60000
local cut = fmt(now - keep)
local slimit, done, left = tonumber(ARGV[6]), 0, 0
local idx = K_PREFIX .. 'rsi'
while true do
  local b = redis.call('ZRANGEBYSCORE', idx, '-inf', cut, 'LIMIT', 0, 1)
  if #b == 0 then break end
  if done >= slimit then left = 1; break end
  local k = K_PREFIX .. 'rs:' .. b[1]
  local ids = redis.call('LRANGE', k, 0, slimit - done - 1)
  if #ids > 0 then
    local keys = {}
    for i, id in ipairs(ids) do keys[2 * i - 1] = tkey(id); keys[2 * i] = lkey(id) end
    for i = 1, #keys, 2000 do redis.call('DEL', unpack(keys, i, math.min(i + 1999, #keys))) end
    redis.call('LTRIM', k, #ids, -1)
    done = done + #ids
  end
  if redis.call('EXISTS', k) == 0 then redis.call('ZREM', idx, b[1]) end
end
local lag = 0
local o = redis.call('ZRANGE', idx, 0, 0, 'WITHSCORES')
if #o > 0 and tonumber(o[2]) + keep <= now then lag = now - tonumber(o[2]) - keep end
return {#old, done, left, lag}
