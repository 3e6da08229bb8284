-- workers.lua (leader, fenced): forget workers of a pool whose last
-- heartbeat is older than the cutoff, and report the live ones with the
-- task types they serve. Their tasks are reaped by lease expiry.
-- KEYS: 1-8 see lib.lua; 9 fence key, 10 workers:<pool>, 11 slots:<pool>,
--       12 types:<pool>.
-- ARGV: 1 clock, 2 fencing token, 3 cutoff age ms.
-- Returns: {RC.FENCED} fenced; else {removed, live workers, live slots, any, then
-- each live worker's type list (',a,b,')}; any is 1 when a live worker
-- serves every type or did not say (then no lists follow).
local now = clock(ARGV[1])
if not fence(KEYS[9], ARGV[2]) then return {RC.FENCED} end
local cutoff = now - tonumber(ARGV[3])
local gone = redis.call('ZRANGEBYSCORE', KEYS[10], '-inf', '(' .. fmt(cutoff))
for _, w in ipairs(gone) do
  redis.call('ZREM', KEYS[10], w)
  redis.call('HDEL', KEYS[11], w)
  redis.call('HDEL', KEYS[12], w)
end
local live = redis.call('ZRANGE', KEYS[10], 0, -1)
local slots, any, lists = 0, 0, {}
for _, w in ipairs(live) do
  slots = slots + tonumber(redis.call('HGET', KEYS[11], w) or '0')
  if any == 0 then
    local ty = redis.call('HGET', KEYS[12], w)
    if not ty or ty == '*' then any = 1 else lists[#lists + 1] = ty end
  end
end
local out = {#gone, #live, slots, any}
if any == 0 then
  for _, l in ipairs(lists) do out[#out + 1] = l end
end
return out
