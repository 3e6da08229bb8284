package config

import (
	"math"
	"net/url"
	"strings"
	"time"

	"github.com/ax-sched/ax/internal/config/quotas"
	"github.com/ax-sched/ax/queue"
	axregion "github.com/ax-sched/ax/region"
	"github.com/ax-sched/ax/worker/handlers"
)

// Region is the whole configuration of one region: what its servers listen
// on, where its etcd and Redis are, its worker pools and every tunable of
// the scheduler. Keys are lowercase snake_case; the YAML key of each field is
// in its tags. Load and Parse return a Region with every default applied and
// every rule checked, so its users read the fields as they are.
type Region struct {
	// Name is the region's name, a lowercase DNS label; required.
	Name string `mapstructure:"region" yaml:"region"`
	// Provider says where the region runs: aws, gcp, azure or other.
	// Informational: the provider label of ax_region_info.
	Provider string `mapstructure:"provider" yaml:"provider"`
	// Listen is the API's host:port.
	Listen string `mapstructure:"listen" yaml:"listen"`
	// PublicAddr is the URL other regions and clients use to reach this
	// region's API; http://<listen> when empty.
	PublicAddr string `mapstructure:"public_addr" yaml:"public_addr"`
	// DataDir is not used: files written for older ax, which documented it
	// as ax dev's state directory, still load (ax server logs a warning).
	// ax dev keeps its state under --dir.
	DataDir string `mapstructure:"data_dir" yaml:"data_dir"`
	// Regions names every region of the federation, this one included.
	// Keyed submits are routed by rendezvous hashing over this list, so every
	// region must list the same names. Defaults to just this region.
	Regions []string `mapstructure:"regions" yaml:"regions"`

	Etcd  Etcd   `mapstructure:"etcd" yaml:"etcd"`
	Redis Redis  `mapstructure:"redis" yaml:"redis"`
	Pools []Pool `mapstructure:"pools" yaml:"pools"`
	// Thresholds apply to every pool that has no thresholds of its own.
	Thresholds Thresholds `mapstructure:"thresholds" yaml:"thresholds"`
	Retry      Retry      `mapstructure:"retry" yaml:"retry"`
	Lease      Lease      `mapstructure:"lease" yaml:"lease"`
	Task       Task       `mapstructure:"task" yaml:"task"`
	// AgingStep is how long a ready task waits to gain one priority level.
	AgingStep time.Duration `mapstructure:"aging_step" yaml:"aging_step"`
	Retention Retention     `mapstructure:"retention" yaml:"retention"`
	// StarvationThreshold is the wait after which a task counts as starving
	// in the starvation gauge.
	StarvationThreshold time.Duration `mapstructure:"starvation_threshold" yaml:"starvation_threshold"`
	Placement           Placement     `mapstructure:"placement" yaml:"placement"`
	Preemption          Preemption    `mapstructure:"preemption" yaml:"preemption"`
	Auth                Auth          `mapstructure:"auth" yaml:"auth"`
	// HTTPServer bounds the API's connections (timeouts, header size, count).
	HTTPServer HTTPServer `mapstructure:"http_server" yaml:"http_server"`
	// Quotas bound what each tenant may ask of one server.
	Quotas quotas.Quotas `mapstructure:"quotas" yaml:"quotas"`
	// Tenants are per-tenant monthly budgets, by tenant name (docs/cost.md
	// "Budgets"). Every region's file should list the same: each server
	// judges the tenants its own file names.
	Tenants map[string]TenantBudget `mapstructure:"tenants" yaml:"tenants,omitempty"`
	// BudgetRefresh is how often each server rereads its tenants' spend
	// this month from every region (a budget is judged on spend that old).
	BudgetRefresh time.Duration `mapstructure:"budget_refresh" yaml:"budget_refresh"`
	Worker        Worker        `mapstructure:"worker" yaml:"worker"`
	// RemoteWorkers bounds docs/worker-protocol.md on every server.
	RemoteWorkers RemoteWorkers `mapstructure:"remote_workers" yaml:"remote_workers"`
	// Results bounds what a task gives back (docs/tasks.md).
	Results Results `mapstructure:"results" yaml:"results"`
	// Limits are rate and concurrency limits per task type, tenant or
	// limit_key, enforced at claim (docs/limits.md). SIGHUP reloads them.
	Limits []Limit `mapstructure:"limits" yaml:"limits"`
	// Tracing sends OpenTelemetry spans of every task (submit, hand-off,
	// receipt, each run) to an OTLP/HTTP collector; off without endpoint.
	Tracing Tracing `mapstructure:"tracing" yaml:"tracing"`

	// source names the file the region was read from, for error messages.
	source string
	// ignoredEnv are the AX_ variables nothing reads (IgnoredEnv);
	// overrideEnv those that set a key (OverrideEnv).
	ignoredEnv, overrideEnv []string
}

// Source returns the name given to Load or Parse (the file's path).
func (r *Region) Source() string { return r.source }

// Pool returns the pool called name, or false.
func (r *Region) Pool(name string) (Pool, bool) {
	for _, p := range r.Pools {
		if p.Name == name {
			return p, true
		}
	}
	return Pool{}, false
}

// Etcd names the two etcd roles. They may be the same cluster (ax dev, small
// setups): the regional one elects this region's leader, the global one holds
// registrations, the federation election, schedules and price overrides.
type Etcd struct {
	Regional EtcdCluster `mapstructure:"regional" yaml:"regional"`
	// Global is a copy of Regional when its endpoints are empty.
	Global EtcdCluster `mapstructure:"global" yaml:"global"`
	// Prefix starts every key ax writes; it begins and ends with "/".
	Prefix string `mapstructure:"prefix" yaml:"prefix"`
	// SessionTTL is the TTL of the lease behind elections and registrations,
	// in whole seconds (etcd's unit).
	SessionTTL time.Duration `mapstructure:"session_ttl" yaml:"session_ttl"`
}

// EtcdCluster is how to reach one etcd cluster.
type EtcdCluster struct {
	Endpoints   []string      `mapstructure:"endpoints" yaml:"endpoints"`
	DialTimeout time.Duration `mapstructure:"dial_timeout" yaml:"dial_timeout"`
	Username    string        `mapstructure:"username" yaml:"username"`
	Password    string        `mapstructure:"password" yaml:"password"`
	TLS         TLS           `mapstructure:"tls" yaml:"tls"`
}

// TLS holds PEM file paths. CA alone verifies the server; Cert and Key
// (both or neither) add a client certificate.
type TLS struct {
	CA   string `mapstructure:"ca" yaml:"ca"`
	Cert string `mapstructure:"cert" yaml:"cert"`
	Key  string `mapstructure:"key" yaml:"key"`
}

// Enabled reports whether any TLS file is set.
func (t TLS) Enabled() bool { return t.CA != "" || t.Cert != "" || t.Key != "" }

// Redis is how to reach this region's Redis, in exactly one of three modes:
// a single Addr, Sentinel, or Cluster.
type Redis struct {
	// Addr is host:port, or a redis:// or rediss:// (TLS) URL of one.
	Addr     string `mapstructure:"addr" yaml:"addr"`
	Username string `mapstructure:"username" yaml:"username"`
	Password string `mapstructure:"password" yaml:"password"`
	// PasswordFile is a file holding Password (readSecretFiles).
	PasswordFile string `mapstructure:"password_file" yaml:"password_file"`
	DB           int    `mapstructure:"db" yaml:"db"`
	// Sentinel mode is on when MasterName or Addrs is set.
	Sentinel Sentinel `mapstructure:"sentinel" yaml:"sentinel"`
	// Cluster mode is on when Addrs is set.
	Cluster RedisCluster `mapstructure:"cluster" yaml:"cluster"`
	// Shards is the number of hash-tagged key groups tasks are spread over;
	// match it to the number of Redis masters (more on one Redis buys nothing).
	Shards int `mapstructure:"shards" yaml:"shards"`
	// WaitReplicas > 0 makes every task write wait (Redis WAIT) for that many
	// replicas, so an accepted task survives a failover.
	WaitReplicas int           `mapstructure:"wait_replicas" yaml:"wait_replicas"`
	WaitTimeout  time.Duration `mapstructure:"wait_timeout" yaml:"wait_timeout"`
	// TLS to Redis: the data nodes, the sentinels and every cluster node.
	TLS RedisTLS `mapstructure:"tls" yaml:"tls"`
}

// RedisTLS is TLS to Redis. It is on when Enabled, when any file is set or
// when addr is a rediss:// URL.
type RedisTLS struct {
	Enabled bool `mapstructure:"enabled" yaml:"enabled"`
	// CA verifies Redis' certificate; the system roots when empty.
	CA string `mapstructure:"ca" yaml:"ca"`
	// Cert and Key (both or neither) are a client certificate, for a Redis
	// with tls-auth-clients yes.
	Cert string `mapstructure:"cert" yaml:"cert"`
	Key  string `mapstructure:"key" yaml:"key"`
	// ServerName is the name checked in Redis' certificate; the host
	// dialled when empty.
	ServerName string `mapstructure:"server_name" yaml:"server_name"`
	// InsecureSkipVerify accepts any certificate (anyone on the path can
	// then read the traffic); refused unless AllowInsecure says so too.
	InsecureSkipVerify bool `mapstructure:"insecure_skip_verify" yaml:"insecure_skip_verify"`
	AllowInsecure      bool `mapstructure:"allow_insecure" yaml:"allow_insecure"`
}

// TLSOn reports whether r's connections use TLS.
func (r Redis) TLSOn() bool {
	t := r.TLS
	return t.Enabled || t.CA != "" || t.Cert != "" || t.Key != "" || t.ServerName != "" || strings.HasPrefix(r.Addr, "rediss://")
}

// HostPort is addr without its redis:// or rediss:// scheme.
func (r Redis) HostPort() string {
	if u, err := url.Parse(r.Addr); err == nil && (u.Scheme == "redis" || u.Scheme == "rediss") {
		return u.Host
	}
	return r.Addr
}

// Mode returns "addr", "sentinel" or "cluster".
func (r Redis) Mode() string {
	switch {
	case r.Sentinel.MasterName != "" || len(r.Sentinel.Addrs) > 0:
		return "sentinel"
	case len(r.Cluster.Addrs) > 0:
		return "cluster"
	}
	return "addr"
}

// Sentinel names a Sentinel-managed master and the sentinels to ask.
// Username and Password are the sentinels' own (their requirepass or ACL
// user), apart from the data nodes' redis.username and redis.password.
type Sentinel struct {
	MasterName string   `mapstructure:"master_name" yaml:"master_name"`
	Addrs      []string `mapstructure:"addrs" yaml:"addrs"`
	Username   string   `mapstructure:"username" yaml:"username"`
	Password   string   `mapstructure:"password" yaml:"password"`
	// PasswordFile is a file holding Password (readSecretFiles).
	PasswordFile string `mapstructure:"password_file" yaml:"password_file"`
}

// RedisCluster lists seed nodes of a Redis Cluster.
type RedisCluster struct {
	Addrs []string `mapstructure:"addrs" yaml:"addrs"`
}

// Pool is a group of interchangeable workers: a task may run in a pool only
// if the pool carries every one of the task's tags.
type Pool struct {
	Name string            `mapstructure:"name" yaml:"name"`
	Tags map[string]string `mapstructure:"tags" yaml:"tags"`
	// Slots is how many tasks the pool runs at once (one per vCPU or GPU).
	// The leader publishes these capped by the live workers' concurrency
	// (also inside a capacity window); workers offering more are a warning.
	Slots int `mapstructure:"slots" yaml:"slots"`
	// QueueCapacity is the number of READY tasks at which the queue counts
	// as full; the thresholds are fractions of it.
	QueueCapacity int `mapstructure:"queue_capacity" yaml:"queue_capacity"`
	// PricePerSlotHour is in US dollars, before Discount.
	PricePerSlotHour float64 `mapstructure:"price_per_slot_hour" yaml:"price_per_slot_hour"`
	Spot             bool    `mapstructure:"spot" yaml:"spot"`
	// Discount is a negotiated fraction off the price, 0 ≤ d < 1.
	Discount float64 `mapstructure:"discount" yaml:"discount"`
	// ScaleFromZero lets placement pick the pool while it has no live slots.
	ScaleFromZero bool `mapstructure:"scale_from_zero" yaml:"scale_from_zero"`
	// Thresholds, when set, replace the region's for this pool; keys it
	// leaves out are taken from the region's thresholds.
	Thresholds       *Thresholds      `mapstructure:"thresholds" yaml:"thresholds,omitempty"`
	CapacitySchedule CapacitySchedule `mapstructure:"capacity_schedule" yaml:"capacity_schedule"`
	// MaxWait is the target for a task's expected wait in this pool (its
	// queue ÷ its measured drain rate); 0: placement.max_wait applies.
	MaxWait time.Duration `mapstructure:"max_wait" yaml:"max_wait"`
	// FairShare, when set, shares the pool's slots among tenants by weight,
	// with floors and ceilings (docs/fairness.md). SIGHUP reloads it.
	FairShare *FairShare `mapstructure:"fair_share" yaml:"fair_share,omitempty"`
	// SlowLane, when set, keeps the pool's slow tasks to a share of its
	// slots, so quick tasks keep flowing (docs/fairness.md). SIGHUP
	// reloads it.
	SlowLane *SlowLane `mapstructure:"slow_lane" yaml:"slow_lane,omitempty"`
	// Tenants, when set, makes the pool these tenants' own: placement
	// never puts another tenant's task there.
	Tenants []string `mapstructure:"tenants" yaml:"tenants,omitempty"`
}

// SlowLane is a pool's slow lane: tasks of a type whose learnt run time in
// the pool (or whose running task's time so far) is at least Threshold
// hold at most MaxShare of the pool's slots at once (the share's floor, at
// least 1); the rest wait READY until one of them ends.
type SlowLane struct {
	Threshold time.Duration `mapstructure:"threshold" yaml:"threshold"`
	// MaxShare is a fraction of the pool's slots, 0 < max_share < 1.
	MaxShare float64 `mapstructure:"max_share" yaml:"max_share"`
}

// FairShare is a pool's sharing of its slots among tenants: each tenant
// with work waiting gets slots in proportion to its weight, first up to its
// floor, never past its max; slots a tenant leaves idle go to the others.
type FairShare struct {
	// DefaultWeight weighs every tenant not in Tenants; default 1.
	DefaultWeight float64 `mapstructure:"default_weight" yaml:"default_weight"`
	// Tenants are the tenants with a share of their own, by tenant name.
	Tenants map[string]TenantShare `mapstructure:"tenants" yaml:"tenants"`
}

// TenantShare is one tenant's part of a pool's fair share.
type TenantShare struct {
	// Weight, > 0; the pool's default_weight when left out.
	Weight float64 `mapstructure:"weight" yaml:"weight"`
	// Floor is how many slots the tenant gets before any other tenant's
	// work takes a freed slot, while it has work waiting (0: none).
	Floor int `mapstructure:"floor" yaml:"floor"`
	// Max is the most slots it holds at once, even when the rest are idle
	// (0: no ceiling).
	Max int `mapstructure:"max" yaml:"max"`
}

// EffectivePrice is the price per slot-hour after the discount.
func (p Pool) EffectivePrice() float64 { return p.PricePerSlotHour * (1 - p.Discount) }

// CapacitySchedule limits when a pool takes work. With no windows the pool
// is always open with Slots slots. With windows it is open only inside one,
// with that window's slots (at most the pool's Slots); outside every window
// placement rejects it (NO_CAPACITY_WINDOW).
type CapacitySchedule struct {
	// Timezone is an IANA name (Europe/Amsterdam) the windows are read in.
	Timezone string   `mapstructure:"timezone" yaml:"timezone"`
	Windows  []Window `mapstructure:"windows" yaml:"windows"`
}

// Window is a daily span of local time, "HH:MM" to "HH:MM"; an end before
// the start wraps past midnight (20:00–08:00), and End may be "24:00".
// Windows of one pool must not overlap.
type Window struct {
	Start string `mapstructure:"start" yaml:"start"`
	End   string `mapstructure:"end" yaml:"end"`
	Slots int    `mapstructure:"slots" yaml:"slots"`
}

// Thresholds are fractions of a pool's queue capacity (queue fill = ready ÷
// queue_capacity): at Alert the alert fires and priorities 3–4 are deferred,
// at Spill non-critical work goes elsewhere or gets 429, at Pause low
// priorities pause until fill drops below Resume.
type Thresholds struct {
	Alert  float64 `mapstructure:"alert" yaml:"alert"`
	Spill  float64 `mapstructure:"spill" yaml:"spill"`
	Pause  float64 `mapstructure:"pause" yaml:"pause"`
	Resume float64 `mapstructure:"resume" yaml:"resume"`
}

// Retry is the default retry policy: min(Cap, Base·2^n) + jitter.
// MaxPause is the pause budget of a task whose spec names none
// (task.Spec.MaxPause): a retry after past it fails the attempt.
type Retry struct {
	MaxRetries int           `mapstructure:"max_retries" yaml:"max_retries"`
	Base       time.Duration `mapstructure:"base" yaml:"base"`
	Cap        time.Duration `mapstructure:"cap" yaml:"cap"`
	MaxPause   time.Duration `mapstructure:"max_pause" yaml:"max_pause"`
}

// Lease is how long a claim lives without a heartbeat and how often workers
// heartbeat; Heartbeat < Duration/2, so one lost heartbeat does not expire it.
type Lease struct {
	Duration  time.Duration `mapstructure:"duration" yaml:"duration"`
	Heartbeat time.Duration `mapstructure:"heartbeat" yaml:"heartbeat"`
}

// Task holds defaults for task specs.
type Task struct {
	DefaultTimeout time.Duration `mapstructure:"default_timeout" yaml:"default_timeout"`
	// MaxPayload is the largest payload accepted, in bytes.
	MaxPayload int64 `mapstructure:"max_payload" yaml:"max_payload"`
	// ColdHorizon: delayed tasks due later than this wait in the compact
	// cold tier until the leader moves them to the hot delayed sets, half a
	// horizon ahead of their time. 0 keeps every delayed task hot.
	ColdHorizon time.Duration `mapstructure:"cold_horizon" yaml:"cold_horizon"`
}

// Retention is how long terminal records are kept, per final state.
type Retention struct {
	Success  time.Duration `mapstructure:"success" yaml:"success"`
	Canceled time.Duration `mapstructure:"canceled" yaml:"canceled"`
	Dead     time.Duration `mapstructure:"dead" yaml:"dead"`
}

// Placement tunes the placement filters and score.
type Placement struct {
	// StaleAfter: a region whose figures are older is skipped (STALE_STATUS).
	StaleAfter time.Duration `mapstructure:"stale_after" yaml:"stale_after"`
	// UnhealthyGrace: READY tasks of a pool without workers this long are
	// re-placed (0: 30s); a region's health change counts after it too.
	UnhealthyGrace time.Duration `mapstructure:"unhealthy_grace" yaml:"unhealthy_grace"`
	// CrossRegionPenalty is added, in dollars, to the score of every pool
	// outside the task's home region.
	CrossRegionPenalty float64 `mapstructure:"cross_region_penalty" yaml:"cross_region_penalty"`
	// DefaultDuration is the expected run time of a task type not yet seen.
	DefaultDuration time.Duration `mapstructure:"default_duration" yaml:"default_duration"`
	// MaxWait is the default target for a task's expected wait in a pool:
	// placement takes the cheapest pool whose expected wait stays within
	// its target (the pool's max_wait when set, in place of this one),
	// else the pool with the least expected wait. 0: no target, cost and
	// fill alone decide.
	MaxWait time.Duration `mapstructure:"max_wait" yaml:"max_wait"`
	// HandOffHorizon: a hand-off that may have reached a region that stays
	// unreachable this long is placed again (HANDOFF_REVOKED); that region
	// drops its copy unrun when it returns (docs/architecture.md, hand-off).
	HandOffHorizon time.Duration `mapstructure:"handoff_horizon" yaml:"handoff_horizon"`
	// ReplaceOnPriceRise: when a pool's live price reaches this multiple of
	// its configured price (a spot spike), the leader re-places its READY
	// tasks that placement now sends elsewhere (REPLACED_COST), as it does
	// when the pool's capacity window closes. 0: only on a window closing;
	// else > 1.
	ReplaceOnPriceRise float64 `mapstructure:"replace_on_price_rise" yaml:"replace_on_price_rise"`
}

// Preemption bounds when the leader may stop a running task for a more
// urgent one.
type Preemption struct {
	Enabled bool `mapstructure:"enabled" yaml:"enabled"`
	// MinPriorityGap: the victim is at least this many levels lower.
	MinPriorityGap int `mapstructure:"min_priority_gap" yaml:"min_priority_gap"`
	// MaxRuntime: only victims that have run less than this.
	MaxRuntime time.Duration `mapstructure:"max_runtime" yaml:"max_runtime"`
	// MaxPerTask: a task is preempted fewer than this many times.
	MaxPerTask      int           `mapstructure:"max_per_task" yaml:"max_per_task"`
	ReadmitDelayMin time.Duration `mapstructure:"readmit_delay_min" yaml:"readmit_delay_min"`
	ReadmitDelayMax time.Duration `mapstructure:"readmit_delay_max" yaml:"readmit_delay_max"`
	// ReadmitRate is the most preempted tasks re-admitted per second.
	ReadmitRate           float64 `mapstructure:"readmit_rate" yaml:"readmit_rate"`
	MaxPerWorkerPerMinute int     `mapstructure:"max_per_worker_per_minute" yaml:"max_per_worker_per_minute"`
}

// RemoteWorkers bounds a claim's wait, the claims waiting at once on a
// server and of one token. MaxResultBytes is the old name of
// results.max_bytes, used when that key is not set; afterwards both hold
// the region's limit.
type RemoteWorkers struct {
	MaxResultBytes       int           `mapstructure:"max_result_bytes" yaml:"max_result_bytes"`
	MaxWait              time.Duration `mapstructure:"max_wait" yaml:"max_wait"`
	MaxLongPolls         int           `mapstructure:"max_long_polls" yaml:"max_long_polls"`
	MaxLongPollsPerToken int           `mapstructure:"max_long_polls_per_token" yaml:"max_long_polls_per_token"`
}

// Results bounds the results of the region's tasks: a result over
// MaxBytes (1..1 MiB) fails its attempt (RESULT_TOO_LARGE), direct and
// remote workers alike; it is never cut. A SUCCESS record and its result
// are kept for the task's result_ttl, by default retention.success.
type Results struct {
	MaxBytes int `mapstructure:"max_bytes" yaml:"max_bytes"`
}

// Auth is API authentication. Tokens are kept only as SHA-256 hashes.
type Auth struct {
	Enabled bool `mapstructure:"enabled" yaml:"enabled"`
	// ClusterToken authenticates servers to each other (hand-off); best set
	// through AX_AUTH_CLUSTER_TOKEN.
	ClusterToken string  `mapstructure:"cluster_token" yaml:"cluster_token"`
	Tokens       []Token `mapstructure:"tokens" yaml:"tokens"`
	// AllowInsecurePeers lets servers send the cluster token to another
	// region over plain http (a peer on the loopback interface is always
	// allowed). Off, such calls are refused and logged.
	AllowInsecurePeers bool `mapstructure:"allow_insecure_peers" yaml:"allow_insecure_peers"`
	// FailuresPerMinute is how many failed authentications (a wrong or
	// expired token) one client IP may make in a burst, and then per
	// minute; beyond that its requests are answered 429 with Retry-After,
	// whatever their token. Failures are logged at most once every 10 s.
	FailuresPerMinute int `mapstructure:"failures_per_minute" yaml:"failures_per_minute"`
}

// Token is one API credential. A file gives either TokenSHA256 (hex) or the
// plain Token; a plain token is hashed on load and Token is left empty.
type Token struct {
	Name        string `mapstructure:"name" yaml:"name"`
	TokenSHA256 string `mapstructure:"token_sha256" yaml:"token_sha256"`
	Token       string `mapstructure:"token" yaml:"token,omitempty"`
	// Role is submitter, operator, admin or worker (the worker protocol only).
	Role string `mapstructure:"role" yaml:"role"`
	// Tenant owns the tasks the token submits; required for submitters,
	// empty on operator and admin tokens means every tenant.
	Tenant string `mapstructure:"tenant" yaml:"tenant"`
	// Tenants and Pools (required) and Types (empty: any) scope a worker token.
	Tenants []string `mapstructure:"tenants" yaml:"tenants,omitempty"`
	Pools   []string `mapstructure:"pools" yaml:"pools,omitempty"`
	Types   []string `mapstructure:"types" yaml:"types,omitempty"`
	// ExpiresAt (RFC 3339), when set, is when the token stops working.
	ExpiresAt string `mapstructure:"expires_at" yaml:"expires_at,omitempty"`
}

// Expires is ExpiresAt parsed; zero when it is not set (or invalid, which
// Validate reports).
func (t Token) Expires() time.Time {
	e, _ := time.Parse(time.RFC3339, t.ExpiresAt)
	return e
}

// Worker configures `ax worker` and its built-in handlers.
type Worker struct {
	// Concurrency is the most handlers one worker runs at once.
	Concurrency int `mapstructure:"concurrency" yaml:"concurrency"`
	// ClaimBatch is the most tasks claimed in one round trip.
	ClaimBatch int `mapstructure:"claim_batch" yaml:"claim_batch"`
	// ShutdownGrace is how long running handlers get to finish on shutdown
	// before their tasks are handed back.
	ShutdownGrace time.Duration `mapstructure:"shutdown_grace" yaml:"shutdown_grace"`
	// Types give task types concurrency pools of their own, by type: a
	// type listed runs in at most its concurrency slots, taken out of
	// Concurrency, and the other types share the rest, so handlers of one
	// type that all block never stall the others.
	Types map[string]WorkerType `mapstructure:"types" yaml:"types,omitempty"`
	Exec  Exec                  `mapstructure:"exec" yaml:"exec"`
	HTTP  HTTP                  `mapstructure:"http" yaml:"http"`
}

// WorkerType is one task type's concurrency pool in a worker.
type WorkerType struct {
	// Concurrency is the type's own slots, > 0.
	Concurrency int `mapstructure:"concurrency" yaml:"concurrency"`
}

// TypeConcurrency is Types as slots by type.
func (w Worker) TypeConcurrency() map[string]int {
	if len(w.Types) == 0 {
		return nil
	}
	out := make(map[string]int, len(w.Types))
	for t, c := range w.Types {
		out[t] = c.Concurrency
	}
	return out
}

// Exec is the built-in exec handler: it runs only the commands listed here.
type Exec struct {
	// RunAs is the user (and group) every command runs as, "" the
	// worker's own (handlers.ExecRule.RunAs).
	RunAs string `mapstructure:"run_as" yaml:"run_as"`
	// Allow maps a task type to the command that handles it.
	Allow map[string]ExecRule `mapstructure:"allow" yaml:"allow"`
}

// ExecRule is one allowed command. Argv elements after the first, and Env
// values, are text/template strings filled from the task's JSON payload
// ({{.msg}}); the program itself, Argv[0], is fixed.
type ExecRule struct {
	Argv []string `mapstructure:"argv" yaml:"argv"`
	// Env is the command's whole environment (besides AX_TASK_ID...):
	// "NAME=value" entries, value a template, and "NAME" entries passed
	// through from the worker's environment. Nothing else of the worker's
	// environment reaches the command.
	Env []string `mapstructure:"env" yaml:"env"`
	// Args constrain the payload's args by name. Without an entry a value
	// still may not start with '-' nor contain ".." (nor a NUL byte).
	Args map[string]ExecArg `mapstructure:"args" yaml:"args"`
	// Timeout caps one run; 0 means the task's own timeout.
	Timeout time.Duration `mapstructure:"timeout" yaml:"timeout"`
}

// ExecArg constrains one payload arg of an exec rule.
type ExecArg struct {
	// Pattern is a regular expression (RE2) the whole value must match.
	Pattern string `mapstructure:"pattern" yaml:"pattern"`
	// AllowLeadingDash lets the value start with '-'.
	AllowLeadingDash bool `mapstructure:"allow_leading_dash" yaml:"allow_leading_dash"`
	// AllowDotDot lets the value contain "..".
	AllowDotDot bool `mapstructure:"allow_dotdot" yaml:"allow_dotdot"`
}

// Handler is the rule as the exec handler takes it.
func (r ExecRule) Handler() handlers.ExecRule {
	h := handlers.ExecRule{Argv: r.Argv, Env: r.Env, Timeout: r.Timeout}
	if len(r.Args) > 0 {
		h.Args = make(map[string]handlers.ArgRule, len(r.Args))
		for k, a := range r.Args {
			h.Args[k] = handlers.ArgRule{Pattern: a.Pattern, AllowLeadingDash: a.AllowLeadingDash, AllowDotDot: a.AllowDotDot}
		}
	}
	return h
}

// HTTP is the built-in http handler: it calls only URLs under these
// prefixes, each an absolute http(s) URL with a path ("https://host/api/").
type HTTP struct {
	AllowPrefixes []string `mapstructure:"allow_prefixes" yaml:"allow_prefixes"`
	// DenyPrivate refuses loopback, private, link-local and other
	// non-public target addresses, checked at each connection after DNS
	// resolution.
	DenyPrivate bool `mapstructure:"deny_private" yaml:"deny_private"`
}

// HTTPServer bounds the API server's connections so that idle or slow
// clients cannot hold its memory or file descriptors.
type HTTPServer struct {
	// ReadHeaderTimeout is the time to send a request's headers.
	ReadHeaderTimeout time.Duration `mapstructure:"read_header_timeout" yaml:"read_header_timeout"`
	// ReadTimeout is the time to send a whole request, body included.
	ReadTimeout time.Duration `mapstructure:"read_timeout" yaml:"read_timeout"`
	// WriteTimeout is the time to answer a request; long-polls
	// (/v1/events?wait=) extend it by their wait.
	WriteTimeout time.Duration `mapstructure:"write_timeout" yaml:"write_timeout"`
	// IdleTimeout closes a keep-alive connection idle this long.
	IdleTimeout time.Duration `mapstructure:"idle_timeout" yaml:"idle_timeout"`
	// MaxHeaderBytes bounds a request's headers (and its request line).
	MaxHeaderBytes int `mapstructure:"max_header_bytes" yaml:"max_header_bytes"`
	// MaxConnections caps open API connections; more wait in the kernel's
	// backlog until one closes.
	MaxConnections int `mapstructure:"max_connections" yaml:"max_connections"`
	// MaxConnectionsPerClient caps one client IP's open API connections;
	// one more is closed as soon as it is accepted.
	MaxConnectionsPerClient int `mapstructure:"max_connections_per_client" yaml:"max_connections_per_client"`
	// FirstRequestTimeout bounds a new connection's life until one of its
	// requests authenticates (with auth off: until its first request to
	// an endpoint): an idle, slow or token-less connection is closed by then.
	FirstRequestTimeout time.Duration `mapstructure:"first_request_timeout" yaml:"first_request_timeout"`
	// MaxLongPolls caps concurrent /v1/events long-polls on one server, and
	// MaxLongPollsPerTenant those of one tenant (429 beyond): each holds a
	// Redis connection for its wait.
	MaxLongPolls          int    `mapstructure:"max_long_polls" yaml:"max_long_polls"`
	MaxLongPollsPerTenant int    `mapstructure:"max_long_polls_per_tenant" yaml:"max_long_polls_per_tenant"`
	TLS                   APITLS `mapstructure:"tls" yaml:"tls"`
	// PublicDetails serves /metrics and the details of /readyz (problems,
	// region) to callers without a token; off, they need a token of any
	// role (with auth on), and /readyz tells others only ready or not.
	PublicDetails bool `mapstructure:"public_details" yaml:"public_details"`
	// Profiling serves Go's runtime profiles (/debug/pprof/) to a token of
	// every tenant with the admin role, never publicly: off by default.
	Profiling bool `mapstructure:"profiling" yaml:"profiling"`
}

// APITLS is the API's TLS. With Cert and Key set the API serves https only;
// SIGHUP re-reads the files.
type APITLS struct {
	Cert string `mapstructure:"cert" yaml:"cert"`
	Key  string `mapstructure:"key" yaml:"key"`
	// ClientCA, when set, makes every client present a certificate it
	// signed (mutual TLS); servers offer their own Cert to each other.
	ClientCA string `mapstructure:"client_ca" yaml:"client_ca"`
	// CA verifies other regions' servers when their public_addr is https
	// (hand-off, forwarded requests); the system roots when empty.
	CA string `mapstructure:"ca" yaml:"ca"`
}

// On reports whether the API serves https.
func (t APITLS) On() bool { return t.Cert != "" }

// Limit is one rate and/or concurrency limit. Exactly one of Type, Tenant
// and Key names what it counts; Rate and Concurrency left out mean no such
// limit (0 is an error: a limit nothing passes).
type Limit struct {
	Type   string `mapstructure:"type" yaml:"type"`
	Tenant string `mapstructure:"tenant" yaml:"tenant"`
	Key    string `mapstructure:"key" yaml:"key"`
	// Rate is tasks started per second over every worker in scope; Burst
	// how many may start at once after a quiet spell (default max(1, rate)).
	Rate  *float64 `mapstructure:"rate" yaml:"rate"`
	Burst *int     `mapstructure:"burst" yaml:"burst"`
	// Concurrency is tasks RUNNING at once over every worker in scope.
	Concurrency *int `mapstructure:"concurrency" yaml:"concurrency"`
	// Scope is "region" (default: the numbers hold in this region) or
	// "federation": they hold over all regions, each region enforcing its
	// share, by Weights (region → weight; regions left out weigh 1).
	Scope   string             `mapstructure:"scope" yaml:"scope"`
	Weights map[string]float64 `mapstructure:"weights" yaml:"weights"`
}

// Kind is what l counts: "type", "tenant" or "key"; Name its name.
func (l Limit) Kind() (kind, name string) {
	switch {
	case l.Key != "":
		return "key", l.Key
	case l.Tenant != "":
		return "tenant", l.Tenant
	}
	return "type", l.Type
}

// LimitShare is what one region enforces of a limit.
type LimitShare = queue.Limit

// Share is region's part of l among regions (the federation's, in their
// order): all of it for scope region, region.FederationShare of it for
// scope federation. A rate without a burst bursts max(1, ⌈rate⌉).
func (l Limit) Share(region string, regions []string) LimitShare {
	kind, name := l.Kind()
	s := LimitShare{Kind: kind, Name: name}
	if l.Rate != nil {
		s.Rate = *l.Rate
	}
	if l.Burst != nil {
		s.Burst = *l.Burst
	} else if s.Rate > 0 {
		s.Burst = max(1, int(math.Ceil(s.Rate)))
	}
	if l.Concurrency != nil {
		s.Concurrency = *l.Concurrency
	}
	if l.Scope != "federation" {
		return s
	}
	return axregion.FederationShare(s, l.Weights, region, regions)
}

// Tracing is where spans go (internal/tracing).
type Tracing struct {
	// Endpoint is the collector's OTLP base URL (http/protobuf:
	// http://otel-collector:4318, grpc: http://otel-collector:4317); empty:
	// the standard OTEL_EXPORTER_OTLP_ENDPOINT, and no tracing without it.
	Endpoint string `mapstructure:"endpoint" yaml:"endpoint"`
	// Protocol is http/protobuf or grpc; empty: the standard
	// OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf.
	Protocol string `mapstructure:"protocol" yaml:"protocol"`
	// Redis adds a span per Redis command made within a traced request or
	// task (none for the background loops).
	Redis bool `mapstructure:"redis" yaml:"redis"`
	// SampleRatio of tasks traced, 0 < r ≤ 1 (default 1). The decision is
	// the task's trace id's, the same in every process.
	SampleRatio float64 `mapstructure:"sample_ratio" yaml:"sample_ratio"`
}

// TenantBudget is a tenant's monthly budget: its spend this UTC month (the
// cost records of every region) against MonthlyBudgetUSD. At 80 % a warning
// (metric, log line); past 100 %, OverBudget "cap" places its new tasks only
// on pools at or under PriceCap per slot-hour, "refuse" answers 429
// budget_exceeded.
type TenantBudget struct {
	MonthlyBudgetUSD float64 `mapstructure:"monthly_budget_usd" yaml:"monthly_budget_usd"`
	OverBudget       string  `mapstructure:"over_budget" yaml:"over_budget"`
	PriceCap         float64 `mapstructure:"price_cap" yaml:"price_cap,omitempty"`
}
