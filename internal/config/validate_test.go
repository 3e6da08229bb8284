package config

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ax-sched/ax/internal/config/quotas"
)

// full is a valid file that switches on every optional part, so that each
// case below breaks exactly one rule.
const full = `
region: r1
regions: [r0, r1]
etcd:
  regional: {endpoints: ["http://e1:2379"], username: u, password: p, tls: {ca: ca.pem, cert: c.pem, key: k.pem}}
  global: {endpoints: ["g1:2379"]}
redis: {addr: "redis:6379", wait_replicas: 1}
pools:
  - name: cpu
    tags: {class: spot}
    slots: 8
    price_per_slot_hour: 0.01
    discount: 0.1
    thresholds: {spill: 0.7}
    capacity_schedule:
      timezone: Europe/Amsterdam
      windows:
        - {start: "20:00", end: "08:00", slots: 7}
        - {start: "12:00", end: "13:00", slots: 2}
  - {name: gpu, slots: 2}
auth:
  cluster_token: 0123456789abcdef0123
  tokens:
    - {name: ci, token: ci-token-0123456789, role: submitter, tenant: t1}
    - {name: ops, token: ops-token-0123456789, role: operator}
worker:
  exec:
    allow:
      echo:
        argv: [echo, "{{.msg}}"]
        env: [LANG=C, "GREETING=hi {{.msg}}", HOME]
        args: {msg: {pattern: "[a-z ]+", allow_leading_dash: true, allow_dotdot: true}}
        timeout: 1m
  http: {allow_prefixes: ["https://hooks.example.com/"]}
limits:
  - {key: stripe-api, rate: 50, burst: 5, concurrency: 5}
  - {tenant: default, concurrency: 4, scope: federation, weights: {r0: 2}}
  - {type: report.build, rate: 0.5}
`

func TestValidateEachRule(t *testing.T) {
	base := func(t *testing.T) *Region {
		t.Helper()
		r := mustParse(t, full)
		if err := r.Validate(); err != nil {
			t.Fatalf("Validate(full) = %v", err)
		}
		return r
	}
	tests := []struct {
		name   string
		change func(r *Region)
		want   string // the single problem, without "test.yaml: "
	}{
		{"region required", func(r *Region) { r.Name = "" }, "region: required"},
		{"region not a label", func(r *Region) { r.Name = "EU_West" },
			`region: must be a lowercase DNS label (a-z, 0-9 and '-', at most 63 characters), got "EU_West"`},
		{"provider", func(r *Region) { r.Provider = "ibm" }, `provider: must be one of aws, gcp, azure, other, got "ibm"`},
		{"listen", func(r *Region) { r.Listen = "8080" }, `listen: must be host:port, got "8080"`},
		{"public_addr unspecified host", func(r *Region) { r.PublicAddr = "http://0.0.0.0:8080" },
			`public_addr: must name a host others can reach, got "http://0.0.0.0:8080" (set it when listen has no host)`},
		{"public_addr scheme", func(r *Region) { r.PublicAddr = "ftp://x" }, `public_addr: must be an absolute http or https URL, got "ftp://x"`},
		{"regions without this one", func(r *Region) { r.Regions = []string{"r0"} },
			`regions: must include this region "r1" (every region lists the whole federation)`},
		{"regions duplicate", func(r *Region) { r.Regions = []string{"r0", "r1", "r0"} }, `regions[2]: duplicate of regions[0] "r0"`},
		{"etcd endpoints empty", func(r *Region) { r.Etcd.Regional.Endpoints = nil }, "etcd.regional.endpoints: at least one endpoint is required"},
		{"etcd endpoint scheme", func(r *Region) { r.Etcd.Global.Endpoints = []string{"grpc://g:2379"} },
			`etcd.global.endpoints[0]: scheme must be http, https, unix or unixs, got "grpc://g:2379"`},
		{"etcd dial timeout", func(r *Region) { r.Etcd.Regional.DialTimeout = 0 }, "etcd.regional.dial_timeout: must be > 0, got 0s"},
		{"etcd password alone", func(r *Region) { r.Etcd.Global.Password = "p" }, "etcd.global.password: set without username"},
		{"etcd cert without key", func(r *Region) { r.Etcd.Regional.TLS.Key = "" }, "etcd.regional.tls: set cert and key together, or neither"},
		{"etcd prefix", func(r *Region) { r.Etcd.Prefix = "ax" }, `etcd.prefix: must begin and end with "/", got "ax"`},
		{"etcd session ttl fraction", func(r *Region) { r.Etcd.SessionTTL = 1500 * time.Millisecond },
			"etcd.session_ttl: must be whole seconds (etcd lease TTLs are), got 1.5s"},
		{"redis no mode", func(r *Region) { r.Redis.Addr = "" }, "redis: set one of addr, sentinel or cluster"},
		{"redis addr", func(r *Region) { r.Redis.Addr = "redis" }, `redis.addr: must be host:port, got "redis"`},
		{"redis sentinel without master", func(r *Region) { r.Redis.Addr = ""; r.Redis.Sentinel.Addrs = []string{"s:26379"} },
			"redis.sentinel.master_name: required with sentinel addrs"},
		{"redis sentinel without addrs", func(r *Region) { r.Redis.Addr = ""; r.Redis.Sentinel.MasterName = "m" },
			"redis.sentinel.addrs: at least one sentinel is required with master_name"},
		{"redis cluster db", func(r *Region) { r.Redis.Addr = ""; r.Redis.Cluster.Addrs = []string{"c:7000"}; r.Redis.DB = 2 },
			"redis.db: must be 0 with cluster (Redis Cluster has only db 0), got 2"},
		{"redis shards", func(r *Region) { r.Redis.Shards = 0 }, "redis.shards: must be between 1 and 16384, got 0"},
		{"redis wait timeout", func(r *Region) { r.Redis.WaitTimeout = 0 }, "redis.wait_timeout: must be > 0, got 0s"},
		{"no pools", func(r *Region) { r.Pools = nil }, "pools: at least one pool is required"},
		{"pool name", func(r *Region) { r.Pools[1].Name = "" }, "pools[1].name: required"},
		{"pool name label", func(r *Region) { r.Pools[1].Name = "GPU" },
			`pools[1].name: must be a lowercase DNS label (a-z, 0-9 and '-', at most 63 characters), got "GPU"`},
		{"pool tag key", func(r *Region) { r.Pools[0].Tags["Zone"] = "a" },
			"pools[0].tags[Zone]: tag keys are lowercase letters, digits, '-', '.', '_' and '/'"},
		{"pool tag value", func(r *Region) { r.Pools[0].Tags["zone"] = "" }, "pools[0].tags[zone]: must not be empty"},
		{"pool queue capacity", func(r *Region) { r.Pools[1].QueueCapacity = 0 }, "pools[1].queue_capacity: must be > 0"},
		{"pool price", func(r *Region) { r.Pools[0].PricePerSlotHour = -1 }, "pools[0].price_per_slot_hour: must be ≥ 0, got -1"},
		{"pool price NaN", func(r *Region) { r.Pools[0].PricePerSlotHour = math.NaN() }, "pools[0].price_per_slot_hour: must be ≥ 0, got NaN"},
		{"pool discount", func(r *Region) { r.Pools[0].Discount = 1 }, "pools[0].discount: must be ≥ 0 and < 1, got 1"},
		{"window clock", func(r *Region) { r.Pools[0].CapacitySchedule.Windows[0].Start = "8:00" },
			`pools[0].capacity_schedule.windows[0].start: must be a time of day "HH:MM" (00:00 to 23:59), got "8:00"`},
		{"window 24:00 is an end only", func(r *Region) { r.Pools[0].CapacitySchedule.Windows[1].Start = "24:00" },
			`pools[0].capacity_schedule.windows[1].start: must be a time of day "HH:MM" (00:00 to 23:59), got "24:00"`},
		{"window slots above pool", func(r *Region) { r.Pools[0].CapacitySchedule.Windows[0].Slots = 9 },
			"pools[0].capacity_schedule.windows[0].slots: must be ≥ 0 and ≤ the pool's slots (8), got 9"},
		{"window empty", func(r *Region) { r.Pools[0].CapacitySchedule.Windows[1].End = "12:00" },
			"pools[0].capacity_schedule.windows[1]: start and end are equal; use 00:00 to 24:00 for the whole day"},
		{"windows overlap across midnight", func(r *Region) {
			r.Pools[0].CapacitySchedule.Windows[1] = Window{Start: "07:00", End: "09:00", Slots: 1}
		}, "pools[0].capacity_schedule.windows[1]: overlaps windows[0]"},
		{"empty timezone", func(r *Region) { r.Pools[0].CapacitySchedule.Timezone = "" },
			`pools[0].capacity_schedule.timezone: unknown IANA time zone "" (e.g. "UTC", "Europe/Amsterdam")`},
		{"pool thresholds", func(r *Region) { r.Pools[0].Thresholds.Pause = 1.2 },
			"pools[0].thresholds: must satisfy 0 < resume < alert < spill < pause ≤ 1, got resume 0.4, alert 0.6, spill 0.7, pause 1.2"},
		{"region thresholds zero", func(r *Region) { r.Thresholds.Resume = 0 },
			"thresholds: must satisfy 0 < resume < alert < spill < pause ≤ 1, got resume 0, alert 0.6, spill 0.8, pause 0.95"},
		{"retries", func(r *Region) { r.Retry.MaxRetries = -1 }, "retry.max_retries: must be ≥ 0, got -1"},
		{"retry cap", func(r *Region) { r.Retry.Cap = time.Millisecond }, "retry.cap: must be ≥ retry.base (300ms), got 1ms"},
		{"no pause budget", func(r *Region) { r.Retry.MaxPause = 0 }, "retry.max_pause: must be > 0 and ≤ 720h0m0s, got 0s"},
		{"heartbeat", func(r *Region) { r.Lease.Heartbeat = 5 * time.Second },
			"lease.heartbeat: must be < lease.duration/2 (5s), so one late heartbeat does not lose the lease; got 5s"},
		{"task timeout", func(r *Region) { r.Task.DefaultTimeout = 0 }, "task.default_timeout: must be > 0, got 0s"},
		{"max payload", func(r *Region) { r.Task.MaxPayload = 1 << 30 },
			"task.max_payload: must be > 0 and ≤ 1048576 bytes (1 MiB), got 1073741824"},
		{"cold horizon", func(r *Region) { r.Task.ColdHorizon = 10 * time.Second },
			"task.cold_horizon: must be 0 (every delayed task hot) or ≥ 1m, got 10s"},
		{"aging step", func(r *Region) { r.AgingStep = -time.Second }, "aging_step: must be > 0, got -1s"},
		{"retention", func(r *Region) { r.Retention.Dead = 0 }, "retention.dead: must be > 0, got 0s"},
		{"starvation", func(r *Region) { r.StarvationThreshold = 0 }, "starvation_threshold: must be > 0, got 0s"},
		{"tracing endpoint", func(r *Region) { r.Tracing.Endpoint = "collector:4318" }, `tracing.endpoint: want http(s)://host:port of an OTLP collector, got "collector:4318"`},
		{"tracing ratio", func(r *Region) { r.Tracing.Endpoint, r.Tracing.SampleRatio = "http://c:4318", 1.5 }, "tracing.sample_ratio: must be in (0, 1], got 1.5"},
		{"tracing ratio, tracing off", func(r *Region) { r.Tracing.SampleRatio = 7 }, "tracing.sample_ratio: must be in (0, 1], got 7"},
		{"tracing protocol", func(r *Region) { r.Tracing.Protocol = "http/json" }, `tracing.protocol: must be http/protobuf or grpc, got "http/json"`},
		{"stale after", func(r *Region) { r.Placement.StaleAfter = 0 }, "placement.stale_after: must be > 0, got 0s"},
		{"unhealthy grace", func(r *Region) { r.Placement.UnhealthyGrace = -1 }, "placement.unhealthy_grace: must be ≥ 0, got -1ns"},
		{"cross region penalty", func(r *Region) { r.Placement.CrossRegionPenalty = -0.5 }, "placement.cross_region_penalty: must be ≥ 0, got -0.5"},
		{"default duration", func(r *Region) { r.Placement.DefaultDuration = 0 }, "placement.default_duration: must be > 0, got 0s"},
		{"max wait", func(r *Region) { r.Placement.MaxWait = -time.Second }, "placement.max_wait: must be ≥ 0, got -1s"},
		{"pool max wait", func(r *Region) { r.Pools[0].MaxWait = -time.Second }, "pools[0].max_wait: must be ≥ 0, got -1s"},
		{"replace on price rise", func(r *Region) { r.Placement.ReplaceOnPriceRise = 0.5 }, "placement.replace_on_price_rise: must be 0 (off) or > 1 (a multiple of the configured price), got 0.5"},
		{"priority gap", func(r *Region) { r.Preemption.MinPriorityGap = 5 },
			"preemption.min_priority_gap: must be between 1 and 4 (priorities are 0–4), got 5"},
		{"max runtime", func(r *Region) { r.Preemption.MaxRuntime = 0 }, "preemption.max_runtime: must be > 0, got 0s"},
		{"max per task", func(r *Region) { r.Preemption.MaxPerTask = 0 }, "preemption.max_per_task: must be ≥ 1, got 0"},
		{"readmit delays", func(r *Region) { r.Preemption.ReadmitDelayMax = time.Second },
			"preemption.readmit_delay_max: must be ≥ preemption.readmit_delay_min (1m0s), got 1s"},
		{"readmit rate", func(r *Region) { r.Preemption.ReadmitRate = 0 }, "preemption.readmit_rate: must be > 0, got 0"},
		{"per worker", func(r *Region) { r.Preemption.MaxPerWorkerPerMinute = 0 }, "preemption.max_per_worker_per_minute: must be ≥ 1, got 0"},
		{"auth without tokens", func(r *Region) { r.Auth.Tokens = nil }, "auth.tokens: at least one token is required when auth is enabled"},
		{"auth cluster token short", func(r *Region) { r.Auth.ClusterToken = "abc" }, "auth.cluster_token: too short: use at least 16 characters"},
		{"token name duplicate", func(r *Region) { r.Auth.Tokens[1].Name = "ci" }, `auth.tokens[1].name: duplicate of auth.tokens[0] "ci"`},
		{"token hash shape", func(r *Region) { r.Auth.Tokens[0].TokenSHA256 = "abc" },
			"auth.tokens[0].token_sha256: must be 64 lowercase hex digits (a SHA-256)"},
		{"token hash duplicate", func(r *Region) { r.Auth.Tokens[1].TokenSHA256 = r.Auth.Tokens[0].TokenSHA256 },
			"auth.tokens[1].token_sha256: same token as auth.tokens[0]"},
		{"token missing", func(r *Region) { r.Auth.Tokens[1].TokenSHA256 = "" }, "auth.tokens[1]: set token_sha256 or token"},
		{"plain token in code", func(r *Region) { r.Auth.Tokens[1].Token = "x" },
			"auth.tokens[1].token: plain tokens are hashed by Load and Parse; set token_sha256"},
		{"token role", func(r *Region) { r.Auth.Tokens[1].Role = "root" }, `auth.tokens[1].role: must be one of submitter, operator, admin, worker, got "root"`},
		{"worker token without tenants", func(r *Region) {
			r.Auth.Tokens[1].Role, r.Auth.Tokens[1].Tenant, r.Auth.Tokens[1].Pools = "worker", "", []string{r.Pools[0].Name}
		}, "auth.tokens[1].tenants: required for a worker token (the tenants whose tasks it may take), none empty"},
		{"worker token without pools", func(r *Region) {
			r.Auth.Tokens[1].Role, r.Auth.Tokens[1].Tenant, r.Auth.Tokens[1].Tenants = "worker", "", []string{"acme"}
		}, "auth.tokens[1].pools: required for a worker token (the pools it may serve)"},
		{"worker token unknown pool", func(r *Region) {
			r.Auth.Tokens[1].Role, r.Auth.Tokens[1].Tenant = "worker", ""
			r.Auth.Tokens[1].Tenants, r.Auth.Tokens[1].Pools = []string{"acme"}, []string{r.Pools[0].Name, "nope"}
		}, `auth.tokens[1].pools[1]: unknown pool "nope": not in pools`},
		{"worker token with tenant", func(r *Region) {
			r.Auth.Tokens[1].Role, r.Auth.Tokens[1].Tenant = "worker", "acme"
			r.Auth.Tokens[1].Tenants, r.Auth.Tokens[1].Pools = []string{"acme"}, []string{r.Pools[0].Name}
		}, "auth.tokens[1].tenant: a worker token names tenants (a list), not tenant"},
		{"worker scope on a submitter", func(r *Region) { r.Auth.Tokens[1].Pools = []string{r.Pools[0].Name} },
			"auth.tokens[1]: only a worker token (role worker) names tenants, pools or types"},
		{"pool tenant empty", func(r *Region) { r.Pools[0].Tenants = []string{"acme", ""} }, "pools[0].tenants: must not name an empty tenant"},
		{"submitter tenant", func(r *Region) { r.Auth.Tokens[0].Tenant = "" },
			"auth.tokens[0].tenant: required for a submitter (its tasks belong to that tenant)"},
		{"concurrency", func(r *Region) { r.Worker.Concurrency = 0 }, "worker.concurrency: must be ≥ 1, got 0"},
		{"type concurrency", func(r *Region) { r.Worker.Types = map[string]WorkerType{"sleep": {Concurrency: 0}} },
			"worker.types[sleep].concurrency: must be ≥ 1, got 0"},
		{"type concurrency sum", func(r *Region) {
			r.Worker.Types = map[string]WorkerType{"sleep": {Concurrency: r.Worker.Concurrency}}
		}, "worker.types: their concurrency adds up to 16, leaving none of worker.concurrency 16 for the other types"},
		{"claim batch", func(r *Region) { r.Worker.ClaimBatch = 5000 }, "worker.claim_batch: must be between 1 and 1000, got 5000"},
		{"shutdown grace", func(r *Region) { r.Worker.ShutdownGrace = -time.Second }, "worker.shutdown_grace: must be ≥ 0, got -1s"},
		{"exec no argv", func(r *Region) { r.Worker.Exec.Allow["echo"] = ExecRule{} }, "worker.exec.allow[echo].argv: needs a program"},
		{"exec program template", func(r *Region) { r.Worker.Exec.Allow["echo"] = ExecRule{Argv: []string{"{{.prog}}"}} },
			"worker.exec.allow[echo].argv[0]: the program may not be a template: payloads must not choose it"},
		{"exec bad template", func(r *Region) { r.Worker.Exec.Allow["echo"] = ExecRule{Argv: []string{"echo", "{{.msg"}} },
			`worker.exec.allow[echo].argv[1]: bad template: template: argv[1]:1: unclosed action`},
		{"exec env name", func(r *Region) { setEnv(r, "echo", 1, "1X=y") },
			`worker.exec.allow[echo].env[1]: "1X=y": not an environment variable name (letters, digits and '_', not starting with a digit)`},
		{"exec env of the worker", func(r *Region) { setEnv(r, "echo", 2, "AX_AUTH_CLUSTER_TOKEN") },
			`worker.exec.allow[echo].env[2]: "AX_AUTH_CLUSTER_TOKEN": names starting with AX_ are the worker's own (its settings and secrets, AX_TASK_ID...)`},
		{"exec env twice", func(r *Region) { setEnv(r, "echo", 2, "LANG=en") }, "worker.exec.allow[echo].env[2]: LANG is already env[0]"},
		{"exec env template", func(r *Region) { setEnv(r, "echo", 1, "GREETING={{.msg") },
			"worker.exec.allow[echo].env[1]: bad template: template: env[1]:1: unclosed action"},
		{"exec arg pattern", func(r *Region) { r.Worker.Exec.Allow["echo"].Args["msg"] = ExecArg{Pattern: "(a"} },
			"worker.exec.allow[echo].args[msg].pattern: bad pattern: error parsing regexp: missing closing ): `(a`"},
		{"exec arg unused", func(r *Region) { r.Worker.Exec.Allow["echo"].Args["mgs"] = ExecArg{} },
			"worker.exec.allow[echo].args[mgs]: no argv or env template of the rule uses {{.mgs}}"},
		{"exec type name", func(r *Region) { r.Worker.Exec.Allow["bad name"] = ExecRule{Argv: []string{"true"}} },
			"worker.exec.allow[bad name]: must be a task type: letters, digits, '.', '_', ':' and '-'"},
		{"exec timeout", func(r *Region) {
			r.Worker.Exec.Allow["echo"] = ExecRule{Argv: []string{"echo"}, Timeout: -time.Second}
		}, "worker.exec.allow[echo].timeout: must not be negative"},
		{"http prefix at a private address", func(r *Region) { r.Worker.HTTP.AllowPrefixes = []string{"http://10.0.0.5:8080/hooks/"} },
			`worker.http.allow_prefixes[0]: allowed prefix "http://10.0.0.5:8080/hooks/" names a private address, which deny_private refuses (worker.http.deny_private is on by default: set it to false to allow internal targets)`},
		{"http prefix not plain", func(r *Region) { r.Worker.HTTP.AllowPrefixes = []string{"https://h.example.com/a/%2e%2e/b/"} },
			`worker.http.allow_prefixes[0]: allowed prefix "https://h.example.com/a/%2e%2e/b/" is not in its plain form (https://h.example.com/b/)`},
		{"redis url with password", func(r *Region) { r.Redis.Addr = "rediss://u:pw@h:6380" },
			`redis.addr: only scheme://host:port (set username, password and db as their own keys), got "rediss://u:pw@h:6380"`},
		{"redis url scheme", func(r *Region) { r.Redis.Addr = "http://h:6380" },
			`redis.addr: must be host:port or a redis:// or rediss:// URL, got "http://h:6380"`},
		{"redis plain url with tls", func(r *Region) { r.Redis.Addr, r.Redis.TLS.CA = "redis://h:6380", "ca.pem" },
			"redis.addr: redis:// is plain TCP but redis.tls is set: use rediss://"},
		{"redis tls half a pair", func(r *Region) { r.Redis.TLS.Cert = "c.pem" }, "redis.tls: set cert and key together, or neither"},
		{"redis tls skip verify", func(r *Region) { r.Redis.TLS.InsecureSkipVerify = true },
			"redis.tls.insecure_skip_verify: accepts any certificate, so anyone on the path reads the traffic; set tls.allow_insecure: true too if you mean it"},
		{"api tls half a pair", func(r *Region) { r.HTTPServer.TLS.Key = "k.pem" }, "http_server.tls: set cert and key together, or neither"},
		{"api client ca without cert", func(r *Region) { r.HTTPServer.TLS.ClientCA = "ca.pem" },
			"http_server.tls.client_ca: needs http_server.tls.cert and key (client certificates are asked for over TLS only)"},
		{"api tls with http public addr", func(r *Region) {
			r.HTTPServer.TLS.Cert, r.HTTPServer.TLS.Key, r.PublicAddr = "c.pem", "k.pem", "http://h:8080"
		}, `public_addr: must be https:// when http_server.tls is set, got "http://h:8080"`},
		{"token expiry", func(r *Region) { r.Auth.Tokens[1].ExpiresAt = "tomorrow" },
			`auth.tokens[1].expires_at: must be an RFC 3339 time (2027-01-31T00:00:00Z), got "tomorrow"`},
		{"budget amount", func(r *Region) { r.Tenants = map[string]TenantBudget{"team-a": {OverBudget: "refuse"}} },
			"tenants.team-a.monthly_budget_usd: must be > 0 (USD per UTC month), got 0"},
		{"budget action", func(r *Region) {
			r.Tenants = map[string]TenantBudget{"team-a": {MonthlyBudgetUSD: 500, OverBudget: "warn"}}
		},
			`tenants.team-a.over_budget: must be cap or refuse, got "warn"`},
		{"budget cap needs a price", func(r *Region) {
			r.Tenants = map[string]TenantBudget{"team-a": {MonthlyBudgetUSD: 500, OverBudget: "cap"}}
		},
			"tenants.team-a.price_cap: must be > 0 (USD per slot-hour) with over_budget: cap, got 0"},
		{"budget price without cap", func(r *Region) {
			r.Tenants = map[string]TenantBudget{"team-a": {MonthlyBudgetUSD: 500, OverBudget: "refuse", PriceCap: 0.4}}
		}, "tenants.team-a.price_cap: applies only with over_budget: cap"},
		{"quota burst", func(r *Region) { r.Quotas.Tenants = map[string]quotas.TenantQuota{"team-a": {SubmitsPerSecond: 5}} },
			"quotas.tenants[team-a].burst: must be ≥ 1 with submits_per_second, got 0"},
		{"quota rate", func(r *Region) { r.Quotas.Default.SubmitsPerSecond = -1 },
			"quotas.default.submits_per_second: must be ≥ 0 (0: no limit), got -1"},
		{"batch items", func(r *Region) { r.Quotas.Batch.MaxItems = 5000 }, "quotas.batch.max_items: must be between 1 and 1000, got 5000"},
		{"batch bytes", func(r *Region) { r.Quotas.Batch.MaxBytes = 1000 },
			"quotas.batch.max_bytes: must be ≥ task.max_payload + 64 KiB (131072), got 1000"},
		{"backlog bytes under a payload", func(r *Region) { r.Quotas.Default.MaxBacklogBytes = 1000 },
			"quotas.default.max_backlog_bytes: must be 0 (no limit) or ≥ task.max_payload (65536), got 1000"},
		{"memory reserve", func(r *Region) { r.Quotas.MemoryReserve = 0.9 },
			"quotas.memory_reserve: must be between 0 (off) and 0.5, got 0.9"},
		{"http prefix without path", func(r *Region) { r.Worker.HTTP.AllowPrefixes = []string{"https://api.example.com"} },
			`worker.http.allow_prefixes[0]: must end the host with a path, e.g. "https://api.example.com/", got "https://api.example.com"`},
		{"limit unknown tenant", func(r *Region) { r.Limits[1].Tenant = "t9" },
			`limits[1].tenant: unknown tenant "t9": no auth.tokens entry submits for it`},
		{"limit negative rate", func(r *Region) { v := -1.0; r.Limits[0].Rate = &v },
			"limits[0].rate: must be > 0 tasks/s (leave it out for no rate limit), got -1"},
		{"limit rate 0", func(r *Region) { v := 0.0; r.Limits[2].Rate = &v },
			"limits[2].rate: must be > 0 tasks/s (leave it out for no rate limit), got 0"},
		{"limit concurrency 0", func(r *Region) { v := 0; r.Limits[1].Concurrency = &v },
			"limits[1].concurrency: must be > 0 (leave it out for no concurrency limit), got 0"},
		{"limit key too long", func(r *Region) { r.Limits[0].Key = strings.Repeat("k", 65) },
			`limits[0].key: longer than 64 bytes, got "` + strings.Repeat("k", 65) + `"`},
		{"limit two names", func(r *Region) { r.Limits[0].Type = "x" }, "limits[0]: set exactly one of type, tenant or key"},
		{"limit no numbers", func(r *Region) { r.Limits[1].Concurrency = nil }, "limits[1]: set rate, concurrency or both"},
		{"limit burst without rate", func(r *Region) { v := 3; r.Limits[1].Burst = &v },
			"limits[1].burst: must be > 0 and given with rate, got 3"},
		{"limit weight of no region", func(r *Region) { r.Limits[1].Weights = map[string]float64{"r7": 1} },
			"limits[1].weights.r7: not a region of regions"},
		{"limit duplicate", func(r *Region) { r.Limits[2].Type, r.Limits[2].Key = "", "stripe-api" },
			`limits[2].key: key "stripe-api" is limited by limits[0] already`},
		{"fair share unknown tenant", func(r *Region) { r.Pools[0].FairShare = &FairShare{Tenants: map[string]TenantShare{"t9": {Weight: 2}}} },
			`pools[0].fair_share.tenants[t9]: unknown tenant "t9": no auth.tokens entry submits for it`},
		{"fair share negative weight", func(r *Region) {
			r.Pools[0].FairShare = &FairShare{Tenants: map[string]TenantShare{"t1": {Weight: -3}}}
		},
			"pools[0].fair_share.tenants[t1].weight: must be > 0 (leave it out for the pool's default_weight), got -3"},
		{"fair share negative default", func(r *Region) { r.Pools[0].FairShare = &FairShare{DefaultWeight: -1} },
			"pools[0].fair_share.default_weight: must be > 0 (leave it out for 1), got -1"},
		{"fair share floor past slots", func(r *Region) { r.Pools[1].FairShare = &FairShare{Tenants: map[string]TenantShare{"t1": {Floor: 3}}} },
			"pools[1].fair_share.tenants[t1].floor: must be between 0 and the pool's 2 slots, got 3"},
		{"fair share floor past max", func(r *Region) {
			r.Pools[0].FairShare = &FairShare{Tenants: map[string]TenantShare{"t1": {Floor: 4, Max: 2}}}
		}, "pools[0].fair_share.tenants[t1].floor: must be ≤ max 2, got 4"},
		{"fair share floors", func(r *Region) {
			r.Pools[0].FairShare = &FairShare{Tenants: map[string]TenantShare{"t1": {Floor: 5}, "default": {Floor: 4}}}
		}, "pools[0].fair_share.tenants: floors add up to 9, more than the pool's 8 slots"},
		{"slow lane share", func(r *Region) { r.Pools[1].SlowLane = &SlowLane{Threshold: time.Minute, MaxShare: 1} },
			"pools[1].slow_lane.max_share: must be > 0 and < 1 (a fraction of the pool's slots), got 1"},
		{"slow lane threshold", func(r *Region) { r.Pools[0].SlowLane = &SlowLane{MaxShare: 0.25} },
			"pools[0].slow_lane.threshold: must be > 0, got 0s"},
		{"limit scope", func(r *Region) { r.Limits[0].Scope = "world" }, `limits[0].scope: must be region or federation, got "world"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := base(t)
			tt.change(r)
			want := []string{"test.yaml: " + tt.want}
			if diff := cmp.Diff(want, problemLines(t, r.Validate())); diff != "" {
				t.Errorf("Validate (-want +got):\n%s", diff)
			}
		})
	}
}

// TestValidateListsEveryProblem: one file, many problems, all reported in
// the order of the file's sections.
func TestValidateListsEveryProblem(t *testing.T) {
	_, err := Parse("configs/x.yaml", []byte(`
region: Bad
provider: ibm
redis: {addr: "", cluster: {addrs: ["c:7000"]}, db: 3}
pools:
  - {name: a, slots: 1}
  - {name: a, slots: 1}
  - {name: c, slots: 0, discount: 1.5}
thresholds: {alert: 0.9}
lease: {heartbeat: 6s}
auth:
  tokens: [{name: t, token_sha256: nothex, role: submitter}]
`))
	want := []string{
		`configs/x.yaml: region: must be a lowercase DNS label (a-z, 0-9 and '-', at most 63 characters), got "Bad"`,
		`configs/x.yaml: provider: must be one of aws, gcp, azure, other, got "ibm"`,
		`configs/x.yaml: redis.db: must be 0 with cluster (Redis Cluster has only db 0), got 3`,
		`configs/x.yaml: pools[1].name: duplicate of pools[0] "a"`,
		`configs/x.yaml: pools[2].slots: must be > 0`,
		`configs/x.yaml: pools[2].discount: must be ≥ 0 and < 1, got 1.5`,
		`configs/x.yaml: thresholds: must satisfy 0 < resume < alert < spill < pause ≤ 1, got resume 0.4, alert 0.9, spill 0.8, pause 0.95`,
		`configs/x.yaml: lease.heartbeat: must be < lease.duration/2 (5s), so one late heartbeat does not lose the lease; got 6s`,
		`configs/x.yaml: auth.tokens[0].token_sha256: must be 64 lowercase hex digits (a SHA-256)`,
		`configs/x.yaml: auth.tokens[0].tenant: required for a submitter (its tasks belong to that tenant)`,
	}
	if diff := cmp.Diff(want, problemLines(t, err)); diff != "" {
		t.Errorf("Parse (-want +got):\n%s", diff)
	}
}

func TestValidateWithoutSource(t *testing.T) {
	r := Default()
	want := []string{
		"config: region: required",
		"config: public_addr: must be an absolute http or https URL, got \"\"",
		"config: etcd.global.endpoints: at least one endpoint is required",
		"config: pools: at least one pool is required",
		"config: auth.tokens: at least one token is required when auth is enabled",
	}
	if diff := cmp.Diff(want, problemLines(t, r.Validate())); diff != "" {
		t.Errorf("Default().Validate() (-want +got):\n%s", diff)
	}
}

// setEnv replaces entry i of an exec rule's env.
func setEnv(r *Region, rule string, i int, entry string) {
	er := r.Worker.Exec.Allow[rule]
	er.Env = append([]string(nil), er.Env...)
	er.Env[i] = entry
	r.Worker.Exec.Allow[rule] = er
}

// A server of a federation with auth on needs the cluster token; a worker
// (Validate alone) does not.
func TestClusterTokenIsRequiredOfServersOnly(t *testing.T) {
	r := mustParse(t, full)
	if err := r.ValidateServer(); err != nil {
		t.Fatalf("ValidateServer(full) = %v", err)
	}
	r.Auth.ClusterToken = ""
	if err := r.Validate(); err != nil {
		t.Fatalf("Validate without a cluster token = %v, want nil (workers do not need it)", err)
	}
	want := []string{"test.yaml: auth.cluster_token: required when auth is enabled and regions lists more than one region (set AX_AUTH_CLUSTER_TOKEN)"}
	if diff := cmp.Diff(want, problemLines(t, r.ValidateServer())); diff != "" {
		t.Errorf("ValidateServer (-want +got):\n%s", diff)
	}
	r.Regions = []string{r.Name}
	if err := r.ValidateServer(); err != nil {
		t.Fatalf("ValidateServer of a lone region = %v", err)
	}
}

func TestInternalPrefixesNeedDenyPrivateOff(t *testing.T) {
	r := mustParse(t, full)
	r.Worker.HTTP.AllowPrefixes = []string{"http://127.0.0.1:9000/hooks/", "http://[fd00::1]/x/"}
	r.Worker.HTTP.DenyPrivate = false
	if err := r.Validate(); err != nil {
		t.Fatalf("internal prefixes with deny_private false: %v", err)
	}
}

func TestLimitShare(t *testing.T) {
	r := mustParse(t, full)
	regions := []string{"r0", "r1"}
	if got, want := r.Limits[0].Share("r1", regions), (LimitShare{Kind: "key", Name: "stripe-api", Rate: 50, Burst: 5, Concurrency: 5}); got != want {
		t.Errorf("region scope: %+v, want %+v", got, want)
	}
	// tenant default: concurrency 4 over r0 (weight 2) and r1 (1): 3 and 1.
	if got := r.Limits[1].Share("r0", regions); got.Concurrency != 3 {
		t.Errorf("r0's share %+v, want concurrency 3", got)
	}
	if got := r.Limits[1].Share("r1", regions); got.Concurrency != 1 {
		t.Errorf("r1's share %+v, want concurrency 1", got)
	}
	if got := r.Limits[2].Share("r0", regions); got.Rate != 0.5 || got.Burst != 1 {
		t.Errorf("default burst: %+v", got)
	}
}

// A window of 00:00 to 24:00 is the whole day, the value the refusal of
// an empty window asks for.
func TestValidateWholeDayWindow(t *testing.T) {
	r := mustParse(t, full)
	r.Pools[0].CapacitySchedule.Windows = []Window{{Start: "00:00", End: "24:00", Slots: 3}}
	if err := r.Validate(); err != nil {
		t.Fatalf("00:00–24:00: %v", err)
	}
	r.Pools[0].CapacitySchedule.Windows = append(r.Pools[0].CapacitySchedule.Windows, Window{Start: "12:00", End: "13:00", Slots: 1})
	if err := r.Validate(); err == nil || !strings.Contains(err.Error(), "overlaps windows[0]") {
		t.Fatalf("a window beside the whole day: %v, want an overlap", err)
	}
}
