// Package queue is the engine of the per-region task store, the only code
// (with its sub-packages) that touches a region's Redis: the client and its
// shards, the key layout, the Lua scripts and their runner. Each stage of a
// task's journey is a package over it (submit, claim, maint, handoffs,
// read, dagstore; store assembles them), and package record is the codec
// of the task hash.
//
// It owns the key layout and the Lua scripts that make
// every transition of the state machine (package task: states, reasons and
// the transition table) atomic in one round trip. It stores task.Task values
// and takes task.Spec values; it knows nothing of etcd, placement or HTTP:
// callers pass already-decided values (which pool, which fencing token) and
// get typed errors back (task.ErrNotFound, ErrLeaseLost, ErrFenced, …).
//
// Key layout, per shard: s below stands for "<region>:<shard>" (all keys of
// a shard share the hash tag {s}, so a script stays on one Redis Cluster
// slot; DAG runs have their own tag, see dag.go):
//
//	ax:{s}:t:<id>        HASH  task record (short field names, see package record)
//	ax:{s}:l:<id>        LIST  abnormal transitions of the task (the trail)
//	ax:{s}:delayed       ZSET  PENDING tasks by due time (ms), and one marker
//	                           ~<pool>:<p> per pinned delayed set below
//	ax:{s}:d:<pool>:<p>  ZSET  PENDING tasks pinned to a pool, submitted with a
//	                           delay, by due time; promotion moves them to
//	                           q:<pool>:<p> without writing their records
//	ax:{s}:dn            ZSET  PENDING unplaced tasks submitted with a delay,
//	                           by due time (marker ~); promotion moves them to
//	                           the due set without reading their records
//	ax:{s}:due           ZSET  PENDING tasks that are due and wait for placement
//	ax:{s}:cold          ZSET  cold tier (cold.go): start ms of every non-empty bucket
//	ax:{s}:cb:<ms>       LIST  cold tier: ids due within one 10 s bucket
//	ax:{s}:cx:<3 chars>  HASH  cold tier: id → "<due ms> <template>" (id chars 14-16)
//	ax:{s}:cs:<n>        HASH  cold tier: record fields shared by one submit call's
//	                           tasks, and "#": tasks still using it
//	ax:{s}:cseq          STRING cold tier: template sequence
//	ax:{s}:q:<pool>:<p>  ZSET  READY tasks of a pool and priority, by enqueue time
//	ax:{s}:running       ZSET  RUNNING tasks by lease expiry (ms)
//	ax:{s}:dead          ZSET  FAILED tasks (dead letters) by failure time
//	ax:{s}:rs:<minute>   LIST  ids of the tasks that SUCCEEDED in that minute
//	                           (since the epoch): their records and trails
//	                           have no TTL, the leader's sweep deletes them
//	                           past the retention (lib.lua retain_success)
//	ax:{s}:rsi           ZSET  minute → its start (ms), for each rs: list
//	ax:{s}:rsw           STRING a sweeper is alive (sweep.lua sets it, SweepAlive
//	                           TTL); without it successes get a TTL each
//	ax:{s}:wake:<pool>   LIST  at most one wake-up marker for idle claimers
//	ax:{s}:idem:<tenant>:<key> STRING id and spec hash, with the key's TTL
//	ax:{s}:uq:<tenant>:<key>   STRING id and unique_until of the task holding a unique key, TTL unique_for
//	ax:{s}:db:<tenant>:<key>   STRING id and first submit (ms) of a debounce key's waiting task, until a minute past its start
//	ax:{s}:cnt           HASH  O(1) counters by state, pool and priority
//	ax:{s}:seq           STRING lease token sequence
//	ax:{s}:fence:<name>  STRING highest fencing token seen per election
//	ax:{s}:events        STREAM one entry per script call, capped
//	ax:{s}:workers:<pool> ZSET worker id by last heartbeat (ms)
//	ax:{s}:slots:<pool>  HASH  worker id → slots
//	ax:{s}:types:<pool>  HASH  worker id → task types it serves (",a,b,";
//	                           "*" every type; absent: not said), shard 0
//	ax:{s}:outbox        ZSET  HANDED_OFF tasks not yet accepted by their
//	                           target region, by next send time (ms)
//	ax:{s}:rt            HASH  "<pool> <type>" → run-time count, moving mean
//	                           and spread (µs), last (ms); capped (runtime.go)
//	ax:{s}:px            HASH  pool → live price per slot-hour, which claims
//	                           record (the leader writes it, prices.go)
//	ax:{s}:cost:<day>    HASH  "<tenant>\t<type>\t<pool>\t<tags>" → runs,
//	                           failed, run ms, cost (1e-12 USD) of the attempts
//	                           that ended that UTC day (days since the epoch);
//	                           capped, expires after MaxCostDays (cost.go)
//	ax:{s}:lim|lb|lc|lp  HASH  limits by key (the leader's, limits.go), token
//	                           buckets, running counts, pauses (lib.lua)
//	ax:{s}:pkd           ZSET  limit keys with parked tasks → next look (ms)
//	ax:{s}:pk:<key>      ZSET  READY tasks parked by a limit of key
//	ax:{s}:bl            HASH  tenant ('' default) → its unfinished tasks in
//	                           the shard: the backlog (lib.lua, Submitter.Backlog),
//	                           room reserved for DAG nodes included
//	ax:{s}:blr           HASH  task id → tenant: ids holding backlog room
//	                           reserved, a DAG run's nodes not created yet
//	                           (backlog.lua, Engine.ReserveBacklog)
//	ax:{s}:qb:<tenant>   STRING the tenant's submit bucket, "<micro-tasks>
//	                           <ms>", in the shard its name hashes to; expires
//	                           once full again (quota.lua, Submitter.TakeQuota)
//	ax:fnlibs            ZSET  script library name → last load or use (ms),
//	                           one per server whatever the prefix: old
//	                           libraries are deleted by it (functions.go)
//
// State implied by structure: a pinned delayed task's record keeps st P and
// rs SUBMITTED after promotion; it is READY while it is in its ready set.
// Every script and read resolves that (lib.lua is_lazy/lazy_state,
// read.go ResolveLazy); the claim writes the READY step into the record.
// This makes promotion of a million such tasks cost ~4 µs of Redis a task
// instead of ~10 (docs/benchmarks.md).
//
// Time inside scripts comes from Redis TIME; tests inject time through
// Options.Now, which is passed to every script as an explicit argument.
// Numbers cross the Lua boundary as integer strings (string.format('%d')),
// never through tostring, which keeps only 14 significant digits.
package queue
