-- rewake.lua: give back a wake-up marker that a cluster Waker's pop took
-- after every waiter had left (queue/waker.go), so that another idle
-- claimer of the pool still hears it. lib.lua's wake keeps at most one.
-- KEYS: lib.lua's eight (the wake list is built from KEYS[1], the shard
--   prefix, like every script's).
-- ARGV: 1 clock (unused), 2 pool.
-- Returns: RC.OK.
wake(ARGV[2])
return RC.OK
