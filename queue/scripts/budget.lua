-- budget.lua (leader, fenced): reads, and sets the cap of, a tenant's
-- budget ledger of one UTC month in this shard (lib.lua bgkey). A ledger
-- this makes starts with u = what the tenant's attempts cost in this
-- shard in the month so far (its cost records, lib.lua write_costs), so
-- a budget set up mid-month counts what was spent before it.
-- KEYS: 1-8 see lib.lua; 9 fence key, 10 the ledger.
-- ARGV: 1 clock, 2 fencing token, 3 tenant, 4 the month's first day and
--       5 today (days since the epoch), 6 cap: '' leaves it (and makes no
--       ledger), else a number: cap becomes max(u, it), so a lowered cap
--       never leaves u above it by a task admitted meanwhile.
-- Returns: {RC.FENCED} fenced; else {RC.OK, u, cap ('' none), rf}.
if not fence(KEYS[9], ARGV[2]) then return {RC.FENCED} end
local k = KEYS[10]
if ARGV[6] ~= '' then
  if redis.call('EXISTS', k) == 0 then
    local pico, prefix = 0, ARGV[3] .. '\t'
    for day = tonumber(ARGV[4]), tonumber(ARGV[5]) do
      local h = redis.call('HGETALL', K_PREFIX .. 'cost:' .. fmt(day))
      for j = 1, #h, 2 do
        if string.sub(h[j], 1, #prefix) == prefix then
          pico = pico + (tonumber(string.match(h[j + 1], '(%d+)$')) or 0)
        end
      end
    end
    redis.call('HSET', k, 'u', string.format('%.12f', pico / 1e12))
    -- Kept past the month's end, for the finishes of its tasks.
    redis.call('PEXPIRE', k, 40 * 86400000)
  end
  local u = tonumber(redis.call('HGET', k, 'u') or '0')
  redis.call('HSET', k, 'cap', string.format('%.12f', math.max(u, tonumber(ARGV[6]))))
end
local l = redis.call('HMGET', k, 'u', 'cap', 'rf')
return {RC.OK, l[1] or '0', l[2] or '', l[3] or '0'}
