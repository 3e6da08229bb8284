package queue

import (
	"fmt"
	"strconv"
	"strings"
)

// The key layout of one shard. Every key of a shard begins with the shard's
// prefix p, "<Options.Prefix>:{<region>:<shard>}:" (Engine.Prefix), so all
// keys of a shard share the hash tag {<region>:<shard>} and a script stays
// on one Redis Cluster slot; DAG runs have their own tag (dag.go). These
// functions are the one place Go code names a shard's keys; lib.lua builds
// the same names from KEYS[1], the prefix. In the layout below s stands for
// "<region>:<shard>":
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
//	ax:{s}:bdone         LIST  "<batch> <id> <S|F|C>": ends of batch members
//	                           this shard ended, until the leader reports them
//	                           (lib.lua batch_end; package batch)
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
//	ax:{s}:held          ZSET  hand-offs received and held until their sender's
//	                           word, by when to ask it (ms)
//	ax:{s}:rtn           HASH  "<pool> <type> <tenant>" → run-time count, moving
//	                           mean and spread (µs), last (ms); capped (runtime.go)
//	ax:{s}:rtt           HASH  tenant → its triples in rtn (each tenant's cap)
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
//	ax:{s}:fsp           SET   pools with a fair share; fs:<pool> its parts,
//	                           fr:<pool> what runs, fi:<pool> and
//	                           fq:<pool>:<p>:<tenant> the waiting tasks
//	ax:{s}:sln, slt:<pool> slow lanes (slowlane.go)
//	ax:{s}:bl            HASH  tenant ('' default) → its unfinished tasks in
//	                           the shard: the backlog (lib.lua, Submitter.Backlog),
//	                           room reserved for DAG nodes included
//	ax:{s}:blb           HASH  tenant → payload bytes of its unfinished tasks
//	ax:{s}:blr           HASH  task id → tenant: ids holding backlog room
//	                           reserved, a DAG run's nodes not created yet
//	                           (backlog.lua, dagstore.DAGs.ReserveBacklog)
//	ax:{s}:qb:<tenant>   STRING the tenant's submit bucket, "<micro-tasks>
//	                           <ms>", in the shard its name hashes to; expires
//	                           once full again (quota.lua, Submitter.TakeQuota)
//	ax:fnlibs            ZSET  script library name → last load or use (ms),
//	                           one per server whatever the prefix: old
//	                           libraries are deleted by it (functions.go)
//
// The first eight (KEYS[1..8] of every script, Engine.KeysWith) are the
// prefix and the keys named by baseKeySuffixes.

// baseKeySuffixes follow the prefix in KEYS[2..8] of every script, in this
// order (lib.lua reads them by position).
var baseKeySuffixes = [...]string{"delayed", "due", "running", "dead", "cnt", "events", "seq"}

// shardPrefix is the prefix of every key of one shard.
func shardPrefix(prefix, region string, shard int) string {
	return fmt.Sprintf("%s:{%s:%d}:", prefix, region, shard)
}

// Keys of one shard, each from its prefix p (Engine.Prefix); the layout
// above says what each holds.
func TaskKey(p, id string) string              { return p + "t:" + id }
func TrailKey(p, id string) string             { return p + "l:" + id }
func TaskPattern(p string) string              { return p + "t:*" }
func TaskID(p, key string) string              { return strings.TrimPrefix(key, p+"t:") } // the id in a TaskPattern key
func DelayedKey(p string) string               { return p + "delayed" }
func DelayedUnplacedKey(p string) string       { return p + "dn" }
func PinnedDelayedPattern(p string) string     { return p + "d:*" }
func DueKey(p string) string                   { return p + "due" }
func ReadyKey(p, pool string, prio int) string { return p + "q:" + pool + ":" + strconv.Itoa(prio) }
func ReadyPattern(p, pool string) string       { return p + "q:" + pool + ":*" } // pool: a glob
func RunningKey(p string) string               { return p + "running" }
func DeadKey(p string) string                  { return p + "dead" }
func CountsKey(p string) string                { return p + "cnt" }
func EventsKey(p string) string                { return p + "events" }
func FenceKey(p string, f Fence) string        { return p + "fence:" + f.Name }
func WakeKey(p, pool string) string            { return p + "wake:" + pool }
func WorkersKey(p, pool string) string         { return p + "workers:" + pool }
func SlotsKey(p, pool string) string           { return p + "slots:" + pool }
func TypesKey(p, pool string) string           { return p + "types:" + pool }
func IdemKey(p, tenant, key string) string     { return p + "idem:" + tenant + ":" + key }
func UniqueKey(p, tenant, key string) string   { return p + "uq:" + tenant + ":" + key }
func DebounceKey(p, tenant, key string) string { return p + "db:" + tenant + ":" + key }
func OutboxKey(p string) string                { return p + "outbox" }
func HeldKey(p string) string                  { return p + "held" }
func RunTimesKey(p string) string              { return p + "rtn" }
func RunTimeTenantsKey(p string) string        { return p + "rtt" }
func PricesKey(p string) string                { return p + "px" }
func CostKey(p string, day int64) string       { return p + "cost:" + strconv.FormatInt(day, 10) }
func LimitsKey(p string) string                { return p + "lim" }
func LimitRunningKey(p string) string          { return p + "lc" }
func LimitPausedKey(p string) string           { return p + "lp" }
func ParkedKey(p, limitKey string) string      { return p + "pk:" + limitKey }
func ParkedPattern(p string) string            { return p + "pk:*" }
func FairPoolsKey(p string) string             { return p + "fsp" }
func FairPartsKey(p, pool string) string       { return p + "fs:" + pool }
func FairRunningKey(p, pool string) string     { return p + "fr:" + pool }
func FairIndexKey(p, pool string) string       { return p + "fi:" + pool }
func SlowLanesKey(p string) string             { return p + "sln" }
func SlowTypesKey(p, pool string) string       { return p + "slt:" + pool }
func BacklogKey(p string) string               { return p + "bl" }
func BacklogBytesKey(p string) string          { return p + "blb" }
func QuotaKey(p, tenant string) string         { return p + "qb:" + tenant }
func ColdKey(p string) string                  { return p + "cold" }
func ColdSeqKey(p string) string               { return p + "cseq" }
func ColdIndexKey(p, id string) string         { return p + "cx:" + id[13:16] } // id: a task id
func ColdIndexPattern(p string) string         { return p + "cx:*" }
func ColdTemplateKey(p, ref string) string     { return p + "cs:" + ref }
func FairQueueKey(p, pool string, prio int, tenant string) string {
	return p + "fq:" + pool + ":" + strconv.Itoa(prio) + ":" + tenant
}
