-- fence.lua (leader, at the start of a term): raises the shard's fence for
-- an election to the new leader's token, so a deposed leader's writes to
-- this shard are refused from now on — not only from the new leader's first
-- real write here (on a Redis Cluster each shard keeps its own fence).
-- KEYS: 1-8 see lib.lua; 9 fence key.
-- ARGV: 1 clock, 2 fencing token.
-- Returns: {RC.FENCED} fenced (a newer leader exists); else {RC.OK}.
if not fence(KEYS[9], ARGV[2]) then return {RC.FENCED} end
return {RC.OK}
