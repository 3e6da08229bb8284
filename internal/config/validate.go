package config

import (
	"fmt"
	"maps"
	"math"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // capacity windows name IANA zones; do not depend on the host having them

	"github.com/ax-sched/ax/internal/config/keypath"
	"github.com/ax-sched/ax/task"
	"github.com/ax-sched/ax/worker/handlers"
)

var (
	dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)
	tagKey   = regexp.MustCompile(`^[a-z0-9]([-a-z0-9._/]*[a-z0-9])?$`)
	taskType = regexp.MustCompile(`^[A-Za-z0-9][-A-Za-z0-9._:]*$`)
	sha256Re = regexp.MustCompile(`^[0-9a-f]{64}$`)
	clock    = regexp.MustCompile(`^([01][0-9]|2[0-3]):[0-5][0-9]$`)
)

const (
	dnsLabelRule = "must be a lowercase DNS label (a-z, 0-9 and '-', at most 63 characters)"
	// maxPayload is Redis' limit on one string value.
	maxPayload = 512 << 20
	// maxTaskPayload bounds task.max_payload: a tenant's payloads take the
	// region's Redis memory, which every tenant shares.
	maxTaskPayload = 1 << 20
	// maxShards is the number of Redis Cluster hash slots: more shards
	// could not be spread over more masters.
	maxShards = 16384
	// maxClaimBatch matches the bound on one promotion batch: Lua's unpack
	// fails near 8000 values and big scripts block Redis.
	maxClaimBatch = 1000
)

var (
	providers = []string{"aws", "gcp", "azure", "other"}
	roles     = []string{"submitter", "operator", "admin", "worker"}
)

// Validate checks every rule and returns an Errors listing all the problems,
// each as "file: key: message", or nil. Load and Parse call it; call it again
// after changing a Region in code.
func (r *Region) Validate() error {
	p := &problems{file: r.sourceName()}
	r.validate(p)
	return p.err()
}

// ValidateServer checks, on top of Validate, what only `ax server` needs:
// the cluster token when auth is on and the federation has more than one
// region (servers hand tasks off and forward requests with it). `ax worker`
// skips it: a worker talks to its region's Redis only, and what it does not
// hold its tasks cannot leak.
func (r *Region) ValidateServer() error {
	p := &problems{file: r.sourceName()}
	if a := r.Auth; a.ClusterToken == "" && a.Enabled && len(r.Regions) > 1 {
		p.add("auth.cluster_token", "required when auth is enabled and regions lists more than one region (set AX_AUTH_CLUSTER_TOKEN)")
	}
	return p.err()
}

func (r *Region) sourceName() string {
	if r.source == "" {
		return "config"
	}
	return r.source
}

func (r *Region) validate(p *problems) {
	r.validateIdentity(p)
	validateEtcd(p, "etcd", r.Etcd)
	validateRedis(p, "redis", r.Redis)
	r.validatePools(p)
	validateThresholds(p, "thresholds", r.Thresholds)
	r.validateTimings(p)
	r.validateAuth(p)
	r.validateQuotas(p)
	validateWorker(p, "worker", r.Worker)
	r.validateLimits(p)
	validateTracing(p, "tracing", r.Tracing)
}

// validateLimits checks limits[]: each names one known key, with positive
// numbers; no key is limited twice.
func (r *Region) validateLimits(p *problems) {
	tenants := map[string]bool{"default": true}
	for _, t := range r.Auth.Tokens {
		if t.Tenant != "" {
			tenants[t.Tenant] = true
		}
	}
	inFed := map[string]bool{}
	for _, name := range r.Regions {
		inFed[name] = true
	}
	seen := map[string]int{}
	for i, l := range r.Limits {
		path := keypath.Elem("limits", i)
		set := 0
		for _, v := range []string{l.Type, l.Tenant, l.Key} {
			if v != "" {
				set++
			}
		}
		if set != 1 {
			p.add(path, "set exactly one of type, tenant or key")
			continue
		}
		kind, name := l.Kind()
		key := keypath.Join(path, kind)
		switch kind {
		case "key":
			if msg := task.ValidLimitKey(name); msg != "" {
				p.add(key, "%s, got %q", msg, name)
			}
		case "tenant":
			if r.Auth.Enabled && !tenants[name] {
				p.add(key, "unknown tenant %q: no auth.tokens entry submits for it", name)
			}
		case "type":
			if !taskType.MatchString(name) || len(name) > task.MaxTypeLen {
				p.add(key, "not a task type name, got %q", name)
			}
		}
		if j, dup := seen[kind+" "+name]; dup {
			p.add(key, "%s %q is limited by limits[%d] already", kind, name, j)
		}
		seen[kind+" "+name] = i
		if l.Rate == nil && l.Concurrency == nil {
			p.add(path, "set rate, concurrency or both")
		}
		if l.Rate != nil && !(*l.Rate > 0) {
			p.add(keypath.Join(path, "rate"), "must be > 0 tasks/s (leave it out for no rate limit), got %v", *l.Rate)
		}
		if l.Burst != nil && (*l.Burst <= 0 || l.Rate == nil) {
			p.add(keypath.Join(path, "burst"), "must be > 0 and given with rate, got %d", *l.Burst)
		}
		if l.Concurrency != nil && *l.Concurrency <= 0 {
			p.add(keypath.Join(path, "concurrency"), "must be > 0 (leave it out for no concurrency limit), got %d", *l.Concurrency)
		}
		switch l.Scope {
		case "", "region":
			if len(l.Weights) > 0 {
				p.add(keypath.Join(path, "weights"), "only with scope federation")
			}
		case "federation":
			for reg, w := range l.Weights {
				if !inFed[reg] {
					p.add(keypath.Join(keypath.Join(path, "weights"), reg), "not a region of regions")
				} else if !(w > 0) {
					p.add(keypath.Join(keypath.Join(path, "weights"), reg), "must be > 0, got %v", w)
				}
			}
		default:
			p.add(keypath.Join(path, "scope"), "must be region or federation, got %q", l.Scope)
		}
	}
}

func validateTracing(p *problems, path string, t Tracing) {
	if t.Endpoint != "" {
		u, err := url.Parse(t.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			p.add(path+".endpoint", "want http(s)://host:port of an OTLP collector, got %q", t.Endpoint)
		}
	}
	switch t.Protocol {
	case "", "http/protobuf", "grpc":
	default:
		p.add(path+".protocol", "must be http/protobuf or grpc, got %q", t.Protocol)
	}
	// Checked with tracing off too: a bad ratio would only surface the
	// day an endpoint is set (AX_TRACING_ENDPOINT), far from the file.
	if t.SampleRatio <= 0 || t.SampleRatio > 1 {
		p.add(path+".sample_ratio", "must be in (0, 1], got %v", t.SampleRatio)
	}
}

func (r *Region) validateIdentity(p *problems) {
	switch {
	case r.Name == "":
		p.add("region", "required")
	case !dnsLabel.MatchString(r.Name):
		p.add("region", "%s, got %q", dnsLabelRule, r.Name)
	}
	oneOf(p, "provider", r.Provider, providers)
	if err := checkHostPort(r.Listen, true); err != nil {
		p.add("listen", "%s", err)
	}
	if err := checkURL(r.PublicAddr, false); err != nil {
		p.add("public_addr", "%s", err)
	}
	seen := map[string]int{}
	for i, name := range r.Regions {
		key := keypath.Elem("regions", i)
		if !dnsLabel.MatchString(name) {
			p.add(key, "%s, got %q", dnsLabelRule, name)
		} else if j, dup := seen[name]; dup {
			p.add(key, "duplicate of regions[%d] %q", j, name)
		}
		seen[name] = i
	}
	if _, ok := seen[r.Name]; !ok && dnsLabel.MatchString(r.Name) {
		p.add("regions", "must include this region %q (every region lists the whole federation)", r.Name)
	}
}

// checkRedisAddr accepts host:port or a redis:// or rediss:// URL of one
// (credentials and the database have keys of their own).
func checkRedisAddr(addr string) error {
	if !strings.Contains(addr, "://") {
		return checkHostPort(addr, false)
	}
	u, err := url.Parse(addr)
	if err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") {
		return fmt.Errorf("must be host:port or a redis:// or rediss:// URL, got %q", addr)
	}
	if u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("only scheme://host:port (set username, password and db as their own keys), got %q", addr)
	}
	return checkHostPort(u.Host, false)
}

func validateEtcd(p *problems, path string, e Etcd) {
	validateEtcdCluster(p, keypath.Join(path, "regional"), e.Regional)
	validateEtcdCluster(p, keypath.Join(path, "global"), e.Global)
	if !strings.HasPrefix(e.Prefix, "/") || !strings.HasSuffix(e.Prefix, "/") {
		p.add(keypath.Join(path, "prefix"), "must begin and end with \"/\", got %q", e.Prefix)
	}
	switch {
	case e.SessionTTL < time.Second:
		p.add(keypath.Join(path, "session_ttl"), "must be ≥ 1s, got %s", e.SessionTTL)
	case e.SessionTTL%time.Second != 0:
		p.add(keypath.Join(path, "session_ttl"), "must be whole seconds (etcd lease TTLs are), got %s", e.SessionTTL)
	}
}

func validateEtcdCluster(p *problems, path string, c EtcdCluster) {
	if len(c.Endpoints) == 0 {
		p.add(keypath.Join(path, "endpoints"), "at least one endpoint is required")
	}
	for i, ep := range c.Endpoints {
		if err := checkEndpoint(ep); err != nil {
			p.add(keypath.Elem(keypath.Join(path, "endpoints"), i), "%s", err)
		}
	}
	positive(p, keypath.Join(path, "dial_timeout"), c.DialTimeout)
	if c.Password != "" && c.Username == "" {
		p.add(keypath.Join(path, "password"), "set without username")
	}
	if (c.TLS.Cert == "") != (c.TLS.Key == "") {
		p.add(keypath.Join(path, "tls"), "set cert and key together, or neither")
	}
}

func validateRedis(p *problems, path string, r Redis) {
	var modes []string
	if r.Addr != "" {
		modes = append(modes, "addr")
	}
	if r.Sentinel.MasterName != "" || len(r.Sentinel.Addrs) > 0 {
		modes = append(modes, "sentinel")
	}
	if len(r.Cluster.Addrs) > 0 {
		modes = append(modes, "cluster")
	}
	switch len(modes) {
	case 0:
		p.add(path, "set one of addr, sentinel or cluster")
	case 1:
	default:
		p.add(path, "set exactly one of addr, sentinel or cluster, found %s", strings.Join(modes, " and "))
	}
	if r.Addr != "" {
		if err := checkRedisAddr(r.Addr); err != nil {
			p.add(keypath.Join(path, "addr"), "%s", err)
		}
	}
	t := r.TLS
	if (t.Cert == "") != (t.Key == "") {
		p.add(keypath.Join(path, "tls"), "set cert and key together, or neither")
	}
	if t.InsecureSkipVerify && !t.AllowInsecure {
		p.add(keypath.Join(path, "tls.insecure_skip_verify"), "accepts any certificate, so anyone on the path reads the traffic; set tls.allow_insecure: true too if you mean it")
	}
	if strings.HasPrefix(r.Addr, "redis://") && r.TLSOn() {
		p.add(keypath.Join(path, "addr"), "redis:// is plain TCP but redis.tls is set: use rediss://")
	}
	sentinel := keypath.Join(path, "sentinel")
	if len(r.Sentinel.Addrs) > 0 && r.Sentinel.MasterName == "" {
		p.add(keypath.Join(sentinel, "master_name"), "required with sentinel addrs")
	}
	if r.Sentinel.MasterName != "" && len(r.Sentinel.Addrs) == 0 {
		p.add(keypath.Join(sentinel, "addrs"), "at least one sentinel is required with master_name")
	}
	hostPorts(p, keypath.Join(sentinel, "addrs"), r.Sentinel.Addrs)
	hostPorts(p, keypath.Join(path, "cluster.addrs"), r.Cluster.Addrs)
	switch {
	case r.DB < 0:
		p.add(keypath.Join(path, "db"), "must be ≥ 0, got %d", r.DB)
	case r.DB != 0 && len(r.Cluster.Addrs) > 0:
		p.add(keypath.Join(path, "db"), "must be 0 with cluster (Redis Cluster has only db 0), got %d", r.DB)
	}
	if r.Shards < 1 || r.Shards > maxShards {
		p.add(keypath.Join(path, "shards"), "must be between 1 and %d, got %d", maxShards, r.Shards)
	}
	if r.WaitReplicas < 0 {
		p.add(keypath.Join(path, "wait_replicas"), "must be ≥ 0, got %d", r.WaitReplicas)
	}
	if r.WaitReplicas > 0 {
		positive(p, keypath.Join(path, "wait_timeout"), r.WaitTimeout)
	} else {
		nonNegative(p, keypath.Join(path, "wait_timeout"), r.WaitTimeout)
	}
}

func (r *Region) validatePools(p *problems) {
	if len(r.Pools) == 0 {
		p.add("pools", "at least one pool is required")
	}
	seen := map[string]int{}
	for i, pool := range r.Pools {
		path := keypath.Elem("pools", i)
		switch {
		case pool.Name == "":
			p.add(keypath.Join(path, "name"), "required")
		case !dnsLabel.MatchString(pool.Name):
			p.add(keypath.Join(path, "name"), "%s, got %q", dnsLabelRule, pool.Name)
		default:
			if j, dup := seen[pool.Name]; dup {
				p.add(keypath.Join(path, "name"), "duplicate of pools[%d] %q", j, pool.Name)
			} else {
				seen[pool.Name] = i
			}
		}
		for _, k := range keypath.Sorted(pool.Tags) {
			key := keypath.Entry(keypath.Join(path, "tags"), k)
			switch {
			case !tagKey.MatchString(k):
				p.add(key, "tag keys are lowercase letters, digits, '-', '.', '_' and '/'")
			case pool.Tags[k] == "":
				p.add(key, "must not be empty")
			}
		}
		if pool.Slots <= 0 {
			p.add(keypath.Join(path, "slots"), "must be > 0")
		}
		if pool.QueueCapacity <= 0 {
			p.add(keypath.Join(path, "queue_capacity"), "must be > 0")
		}
		if !(pool.PricePerSlotHour >= 0) || math.IsInf(pool.PricePerSlotHour, 0) {
			p.add(keypath.Join(path, "price_per_slot_hour"), "must be ≥ 0, got %v", pool.PricePerSlotHour)
		}
		if !(pool.Discount >= 0 && pool.Discount < 1) {
			p.add(keypath.Join(path, "discount"), "must be ≥ 0 and < 1, got %v", pool.Discount)
		}
		if pool.Thresholds != nil {
			validateThresholds(p, keypath.Join(path, "thresholds"), *pool.Thresholds)
		}
		validateSchedule(p, keypath.Join(path, "capacity_schedule"), pool.CapacitySchedule, pool.Slots)
		nonNegative(p, keypath.Join(path, "max_wait"), pool.MaxWait)
		if pool.FairShare != nil {
			r.validateFairShare(p, keypath.Join(path, "fair_share"), *pool.FairShare, pool.Slots)
		}
		if slices.Contains(pool.Tenants, "") {
			p.add(keypath.Join(path, "tenants"), "must not name an empty tenant")
		}
		if l := pool.SlowLane; l != nil {
			positive(p, keypath.Join(keypath.Join(path, "slow_lane"), "threshold"), l.Threshold)
			if !(l.MaxShare > 0 && l.MaxShare < 1) {
				p.add(keypath.Join(keypath.Join(path, "slow_lane"), "max_share"), "must be > 0 and < 1 (a fraction of the pool's slots), got %v", l.MaxShare)
			}
		}
	}
}

// validateFairShare checks a pool's fair_share: weights > 0, floors and
// maxes within the pool's slots, floors that fit together, and (with auth
// on) only tenants some token submits for.
func (r *Region) validateFairShare(p *problems, path string, fs FairShare, slots int) {
	if !(fs.DefaultWeight >= 0) || math.IsInf(fs.DefaultWeight, 0) {
		p.add(keypath.Join(path, "default_weight"), "must be > 0 (leave it out for 1), got %v", fs.DefaultWeight)
	}
	known := map[string]bool{"default": true}
	for _, t := range r.Auth.Tokens {
		if t.Tenant != "" {
			known[t.Tenant] = true
		}
	}
	floors := 0
	for _, name := range keypath.Sorted(fs.Tenants) {
		ts, key := fs.Tenants[name], keypath.Entry(keypath.Join(path, "tenants"), name)
		if r.Auth.Enabled && !known[name] {
			p.add(key, "unknown tenant %q: no auth.tokens entry submits for it", name)
		}
		if !(ts.Weight >= 0) || math.IsInf(ts.Weight, 0) {
			p.add(keypath.Join(key, "weight"), "must be > 0 (leave it out for the pool's default_weight), got %v", ts.Weight)
		}
		if ts.Floor < 0 || ts.Floor > slots {
			p.add(keypath.Join(key, "floor"), "must be between 0 and the pool's %d slots, got %d", slots, ts.Floor)
		}
		if ts.Max < 0 || ts.Max > slots {
			p.add(keypath.Join(key, "max"), "must be between 0 (no ceiling) and the pool's %d slots, got %d", slots, ts.Max)
		}
		if ts.Max > 0 && ts.Floor > ts.Max {
			p.add(keypath.Join(key, "floor"), "must be ≤ max %d, got %d", ts.Max, ts.Floor)
		}
		if ts.Floor > 0 && ts.Floor <= slots {
			floors += ts.Floor
		}
	}
	if floors > slots {
		p.add(keypath.Join(path, "tenants"), "floors add up to %d, more than the pool's %d slots", floors, slots)
	}
}

func validateSchedule(p *problems, path string, s CapacitySchedule, poolSlots int) {
	if _, err := time.LoadLocation(s.Timezone); err != nil || s.Timezone == "" || s.Timezone == "Local" {
		p.add(keypath.Join(path, "timezone"), "unknown IANA time zone %q (e.g. \"UTC\", \"Europe/Amsterdam\")", s.Timezone)
	}
	// owner[m] is 1 + the window that covers minute m of the day.
	var owner [24 * 60]int
	for i, w := range s.Windows {
		key := keypath.Elem(keypath.Join(path, "windows"), i)
		start, errStart := parseClock(w.Start, false)
		if errStart != nil {
			p.add(keypath.Join(key, "start"), "%s", errStart)
		}
		end, errEnd := parseClock(w.End, true)
		if errEnd != nil {
			p.add(keypath.Join(key, "end"), "%s", errEnd)
		}
		if w.Slots < 0 || w.Slots > poolSlots {
			p.add(keypath.Join(key, "slots"), "must be ≥ 0 and ≤ the pool's slots (%d), got %d", poolSlots, w.Slots)
		}
		if errStart != nil || errEnd != nil {
			continue
		}
		if start == end%(24*60) && (start != 0 || end != 24*60) { // 00:00–24:00: the whole day
			p.add(key, "start and end are equal; use 00:00 to 24:00 for the whole day")
			continue
		}
		for m, n := start, 0; n == 0 || m != end%(24*60); m, n = (m+1)%(24*60), n+1 {
			if owner[m] != 0 {
				p.add(key, "overlaps windows[%d]", owner[m]-1)
				break
			}
			owner[m] = i + 1
		}
	}
}

// parseClock reads "HH:MM" as minutes since midnight; "24:00" only as an end.
func parseClock(s string, end bool) (int, error) {
	if end && s == "24:00" {
		return 24 * 60, nil
	}
	if !clock.MatchString(s) {
		return 0, fmt.Errorf("must be a time of day \"HH:MM\" (00:00 to 23:59), got %q", s)
	}
	h, _ := strconv.Atoi(s[:2])
	m, _ := strconv.Atoi(s[3:])
	return h*60 + m, nil
}

func validateThresholds(p *problems, path string, t Thresholds) {
	if !(0 < t.Resume && t.Resume < t.Alert && t.Alert < t.Spill && t.Spill < t.Pause && t.Pause <= 1) {
		p.add(path, "must satisfy 0 < resume < alert < spill < pause ≤ 1, got resume %v, alert %v, spill %v, pause %v",
			t.Resume, t.Alert, t.Spill, t.Pause)
	}
}

func validateRetry(p *problems, r Retry) {
	if r.MaxRetries < 0 {
		p.add("retry.max_retries", "must be ≥ 0, got %d", r.MaxRetries)
	}
	positive(p, "retry.base", r.Base)
	if r.Cap < r.Base {
		p.add("retry.cap", "must be ≥ retry.base (%s), got %s", r.Base, r.Cap)
	}
	if r.MaxPause <= 0 || r.MaxPause > task.MaxMaxPause {
		p.add("retry.max_pause", "must be > 0 and ≤ %s, got %s", task.MaxMaxPause, r.MaxPause)
	}
}

func (r *Region) validateTimings(p *problems) {
	validateRetry(p, r.Retry)
	positive(p, "lease.duration", r.Lease.Duration)
	positive(p, "lease.heartbeat", r.Lease.Heartbeat)
	if r.Lease.Heartbeat > 0 && r.Lease.Heartbeat >= r.Lease.Duration/2 {
		p.add("lease.heartbeat", "must be < lease.duration/2 (%s), so one late heartbeat does not lose the lease; got %s",
			r.Lease.Duration/2, r.Lease.Heartbeat)
	}

	positive(p, "task.default_timeout", r.Task.DefaultTimeout)
	if r.Task.MaxPayload <= 0 || r.Task.MaxPayload > maxTaskPayload {
		p.add("task.max_payload", "must be > 0 and ≤ %d bytes (1 MiB), got %d", maxTaskPayload, r.Task.MaxPayload)
	}
	if h := r.Task.ColdHorizon; h != 0 && h < time.Minute {
		p.add("task.cold_horizon", "must be 0 (every delayed task hot) or ≥ 1m, got %s", h)
	}
	positive(p, "aging_step", r.AgingStep)
	positive(p, "retention.success", r.Retention.Success)
	positive(p, "retention.canceled", r.Retention.Canceled)
	positive(p, "retention.dead", r.Retention.Dead)
	positive(p, "starvation_threshold", r.StarvationThreshold)
	positive(p, "budget_refresh", r.BudgetRefresh)
	hs := r.HTTPServer
	positive(p, "http_server.read_header_timeout", hs.ReadHeaderTimeout)
	positive(p, "http_server.read_timeout", hs.ReadTimeout)
	positive(p, "http_server.write_timeout", hs.WriteTimeout)
	positive(p, "http_server.idle_timeout", hs.IdleTimeout)
	if hs.MaxHeaderBytes < 4<<10 {
		p.add("http_server.max_header_bytes", "must be ≥ 4096, got %d", hs.MaxHeaderBytes)
	}
	if hs.MaxLongPolls < 1 || hs.MaxLongPollsPerTenant < 1 || hs.MaxLongPollsPerTenant > hs.MaxLongPolls {
		p.add("http_server.max_long_polls", "max_long_polls and max_long_polls_per_tenant must be ≥ 1, per tenant ≤ total, got %d and %d",
			hs.MaxLongPolls, hs.MaxLongPollsPerTenant)
	}
	if t := hs.TLS; (t.Cert == "") != (t.Key == "") {
		p.add("http_server.tls", "set cert and key together, or neither")
	} else if t.ClientCA != "" && t.Cert == "" {
		p.add("http_server.tls.client_ca", "needs http_server.tls.cert and key (client certificates are asked for over TLS only)")
	} else if t.On() && strings.HasPrefix(r.PublicAddr, "http://") {
		p.add("public_addr", "must be https:// when http_server.tls is set, got %q", r.PublicAddr)
	}
	if hs.MaxConnections < 1 {
		p.add("http_server.max_connections", "must be ≥ 1, got %d", hs.MaxConnections)
	}
	if hs.MaxConnectionsPerClient < 1 || hs.MaxConnectionsPerClient > hs.MaxConnections {
		p.add("http_server.max_connections_per_client", "must be ≥ 1 and ≤ http_server.max_connections (%d), got %d",
			hs.MaxConnections, hs.MaxConnectionsPerClient)
	}
	positive(p, "http_server.first_request_timeout", hs.FirstRequestTimeout)
	if r.Auth.FailuresPerMinute < 1 {
		p.add("auth.failures_per_minute", "must be ≥ 1, got %d", r.Auth.FailuresPerMinute)
	}

	validateBudgets(p, r.Tenants)
	positive(p, "placement.stale_after", r.Placement.StaleAfter)
	nonNegative(p, "placement.unhealthy_grace", r.Placement.UnhealthyGrace)
	if c := r.Placement.CrossRegionPenalty; !(c >= 0) || math.IsInf(c, 0) {
		p.add("placement.cross_region_penalty", "must be ≥ 0, got %v", c)
	}
	positive(p, "placement.default_duration", r.Placement.DefaultDuration)
	nonNegative(p, "placement.max_wait", r.Placement.MaxWait)
	positive(p, "placement.handoff_horizon", r.Placement.HandOffHorizon)
	if x := r.Placement.ReplaceOnPriceRise; x != 0 && !(x > 1 && x < 1e6) {
		p.add("placement.replace_on_price_rise", "must be 0 (off) or > 1 (a multiple of the configured price), got %v", x)
	}

	pre := r.Preemption
	if pre.MinPriorityGap < 1 || pre.MinPriorityGap > 4 {
		p.add("preemption.min_priority_gap", "must be between 1 and 4 (priorities are 0–4), got %d", pre.MinPriorityGap)
	}
	positive(p, "preemption.max_runtime", pre.MaxRuntime)
	if pre.MaxPerTask < 1 {
		p.add("preemption.max_per_task", "must be ≥ 1, got %d", pre.MaxPerTask)
	}
	nonNegative(p, "preemption.readmit_delay_min", pre.ReadmitDelayMin)
	if pre.ReadmitDelayMax < pre.ReadmitDelayMin {
		p.add("preemption.readmit_delay_max", "must be ≥ preemption.readmit_delay_min (%s), got %s", pre.ReadmitDelayMin, pre.ReadmitDelayMax)
	}
	if !(pre.ReadmitRate > 0) || math.IsInf(pre.ReadmitRate, 0) {
		p.add("preemption.readmit_rate", "must be > 0, got %v", pre.ReadmitRate)
	}
	if pre.MaxPerWorkerPerMinute < 1 {
		p.add("preemption.max_per_worker_per_minute", "must be ≥ 1, got %d", pre.MaxPerWorkerPerMinute)
	}
}

func (r *Region) validateQuotas(p *problems) {
	// A task.max_payload out of range is reported by its own key.
	payload := r.Task.MaxPayload
	if payload > maxTaskPayload {
		payload = 0
	}
	r.Quotas.Validate(p.add, payload, maxClaimBatch)
}

func (r *Region) validateAuth(p *problems) {
	a := r.Auth
	if a.Enabled && len(a.Tokens) == 0 {
		p.add("auth.tokens", "at least one token is required when auth is enabled")
	}
	// Required only of servers (ValidateServer): workers never call
	// another server, so they start without it.
	if a.ClusterToken != "" && len(a.ClusterToken) < minTokenLen {
		p.add("auth.cluster_token", "too short: use at least %d characters", minTokenLen)
	}
	names := map[string]int{}
	hashes := map[string]int{}
	for i, t := range a.Tokens {
		path := keypath.Elem("auth.tokens", i)
		switch {
		case t.Name == "":
			p.add(keypath.Join(path, "name"), "required")
		default:
			if j, dup := names[t.Name]; dup {
				p.add(keypath.Join(path, "name"), "duplicate of auth.tokens[%d] %q", j, t.Name)
			} else {
				names[t.Name] = i
			}
		}
		switch {
		case t.Token != "":
			p.add(keypath.Join(path, "token"), "plain tokens are hashed by Load and Parse; set token_sha256")
		case t.TokenSHA256 == "":
			p.add(path, "set token_sha256 or token")
		case !sha256Re.MatchString(t.TokenSHA256):
			p.add(keypath.Join(path, "token_sha256"), "must be 64 lowercase hex digits (a SHA-256)")
		default:
			if j, dup := hashes[t.TokenSHA256]; dup {
				p.add(keypath.Join(path, "token_sha256"), "same token as auth.tokens[%d]", j)
			} else {
				hashes[t.TokenSHA256] = i
			}
		}
		oneOf(p, keypath.Join(path, "role"), t.Role, roles)
		if t.ExpiresAt != "" {
			if _, err := time.Parse(time.RFC3339, t.ExpiresAt); err != nil {
				p.add(keypath.Join(path, "expires_at"), "must be an RFC 3339 time (2027-01-31T00:00:00Z), got %q", t.ExpiresAt)
			}
		}
		if t.Role == "submitter" && t.Tenant == "" {
			p.add(keypath.Join(path, "tenant"), "required for a submitter (its tasks belong to that tenant)")
		}
		r.validateWorkerScope(p, path, t)
	}
	rw := r.RemoteWorkers
	if r.Results.MaxBytes < 1 || r.Results.MaxBytes > task.MaxResultBytes {
		p.add("results.max_bytes", "must be 1..%d, got %d", task.MaxResultBytes, r.Results.MaxBytes)
	}
	if rw.MaxWait < 0 || rw.MaxWait > 5*time.Minute {
		p.add("remote_workers.max_wait", "must be 0s..5m, got %s", rw.MaxWait)
	}
	if rw.MaxLongPolls < 1 || rw.MaxLongPollsPerToken < 1 || rw.MaxLongPollsPerToken > rw.MaxLongPolls {
		p.add("remote_workers.max_long_polls", "max_long_polls and max_long_polls_per_token must be ≥ 1, per token ≤ total, got %d and %d",
			rw.MaxLongPolls, rw.MaxLongPollsPerToken)
	}
}

// validateWorkerScope checks a worker token's tenants and pools (of this
// region); other tokens name none.
func (r *Region) validateWorkerScope(p *problems, path string, t Token) {
	if t.Role != "worker" {
		if len(t.Tenants)+len(t.Pools)+len(t.Types) > 0 {
			p.add(path, "only a worker token (role worker) names tenants, pools or types")
		}
		return
	}
	if t.Tenant != "" {
		p.add(keypath.Join(path, "tenant"), "a worker token names tenants (a list), not tenant")
	} else if len(t.Tenants) == 0 || slices.Contains(t.Tenants, "") {
		p.add(keypath.Join(path, "tenants"), "required for a worker token (the tenants whose tasks it may take), none empty")
	}
	if len(t.Pools) == 0 {
		p.add(keypath.Join(path, "pools"), "required for a worker token (the pools it may serve)")
	}
	for i, name := range t.Pools {
		if _, ok := r.Pool(name); !ok {
			p.add(keypath.Elem(keypath.Join(path, "pools"), i), "unknown pool %q: not in pools", name)
		}
	}
	for i, name := range t.Types {
		if !taskType.MatchString(name) || len(name) > task.MaxTypeLen {
			p.add(keypath.Elem(keypath.Join(path, "types"), i), "not a task type name, got %q", name)
		}
	}
}

func validateWorker(p *problems, path string, w Worker) {
	if w.Concurrency < 1 {
		p.add(keypath.Join(path, "concurrency"), "must be ≥ 1, got %d", w.Concurrency)
	}
	if w.ClaimBatch < 1 || w.ClaimBatch > maxClaimBatch {
		p.add(keypath.Join(path, "claim_batch"), "must be between 1 and %d, got %d", maxClaimBatch, w.ClaimBatch)
	}
	nonNegative(p, keypath.Join(path, "shutdown_grace"), w.ShutdownGrace)
	own := 0
	for _, name := range keypath.Sorted(w.Types) {
		key := keypath.Entry(keypath.Join(path, "types"), name)
		if !taskType.MatchString(name) {
			p.add(key, "must be a task type: letters, digits, '.', '_', ':' and '-'")
		}
		if c := w.Types[name].Concurrency; c < 1 {
			p.add(keypath.Join(key, "concurrency"), "must be ≥ 1, got %d", c)
		} else {
			own += c
		}
	}
	if own > 0 && w.Concurrency >= 1 && own >= w.Concurrency {
		p.add(keypath.Join(path, "types"), "their concurrency adds up to %d, leaving none of worker.concurrency %d for the other types", own, w.Concurrency)
	}
	if err := handlers.CheckRunAs(w.Exec.RunAs); err != nil {
		p.add(keypath.Join(path, "exec.run_as"), "%v", err)
	}
	allow := keypath.Join(path, "exec.allow")
	for _, name := range keypath.Sorted(w.Exec.Allow) {
		rule := w.Exec.Allow[name]
		key := keypath.Entry(allow, name)
		if !taskType.MatchString(name) {
			p.add(key, "must be a task type: letters, digits, '.', '_', ':' and '-'")
		}
		// The handler's own check, so that what loads is what runs.
		for _, e := range handlers.CheckExecRule(rule.Handler()) {
			p.add(keypath.Join(key, e.Field), "%s", e.Msg)
		}
	}
	for i, prefix := range w.HTTP.AllowPrefixes {
		key := keypath.Elem(keypath.Join(path, "http.allow_prefixes"), i)
		if err := checkURL(prefix, true); err != nil {
			p.add(key, "%s", err)
		} else if err := handlers.CheckHTTPPrefix(prefix, false); err != nil {
			p.add(key, "%s", err)
		} else if err := handlers.CheckHTTPPrefix(prefix, w.HTTP.DenyPrivate); err != nil {
			p.add(key, "%s (worker.http.deny_private is on by default: set it to false to allow internal targets)", err)
		}
	}
}

func positive(p *problems, key string, d time.Duration) {
	if d <= 0 {
		p.add(key, "must be > 0, got %s", d)
	}
}

func nonNegative(p *problems, key string, d time.Duration) {
	if d < 0 {
		p.add(key, "must be ≥ 0, got %s", d)
	}
}

func oneOf(p *problems, key, value string, allowed []string) {
	for _, a := range allowed {
		if value == a {
			return
		}
	}
	p.add(key, "must be one of %s, got %q", strings.Join(allowed, ", "), value)
}

func hostPorts(p *problems, path string, addrs []string) {
	for i, a := range addrs {
		if err := checkHostPort(a, false); err != nil {
			p.add(keypath.Elem(path, i), "%s", err)
		}
	}
}

// checkHostPort accepts "host:port"; port 0 (any free port) only if anyPort.
func checkHostPort(addr string, anyPort bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("must be host:port, got %q", addr)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 || (n == 0 && !anyPort) {
		return fmt.Errorf("bad port in %q", addr)
	}
	if host == "" && !anyPort {
		return fmt.Errorf("must name a host, got %q", addr)
	}
	return nil
}

// checkEndpoint accepts what the etcd client does: host:port or a URL.
func checkEndpoint(ep string) error {
	if !strings.Contains(ep, "://") {
		return checkHostPort(ep, false)
	}
	u, err := url.Parse(ep)
	if err != nil {
		return fmt.Errorf("bad URL %q", ep)
	}
	switch u.Scheme {
	case "http", "https":
		return checkHostPort(u.Host, false)
	case "unix", "unixs":
		return nil
	}
	return fmt.Errorf("scheme must be http, https, unix or unixs, got %q", ep)
}

// checkURL accepts an absolute http(s) URL naming a reachable host. With
// needPath the host must be followed by a path, so that as a prefix it
// cannot match another host ("https://api.example.com" would match
// "https://api.example.com.evil.net").
func checkURL(s string, needPath bool) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("must be an absolute http or https URL, got %q", s)
	}
	if ip := net.ParseIP(u.Hostname()); u.Hostname() == "" || (ip != nil && ip.IsUnspecified()) {
		return fmt.Errorf("must name a host others can reach, got %q (set it when listen has no host)", s)
	}
	if needPath && !strings.HasPrefix(u.Path, "/") {
		return fmt.Errorf("must end the host with a path, e.g. %q, got %q", strings.TrimRight(s, "/")+"/", s)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("must not have a query or fragment, got %q", s)
	}
	return nil
}

// validateBudgets checks tenants.<name>: a positive budget, what to do past
// it, and the price cap "cap" needs.
func validateBudgets(p *problems, tenants map[string]TenantBudget) {
	for _, name := range slices.Sorted(maps.Keys(tenants)) {
		b, path := tenants[name], keypath.Join("tenants", name)
		if v := b.MonthlyBudgetUSD; !(v > 0) || math.IsInf(v, 0) {
			p.add(keypath.Join(path, "monthly_budget_usd"), "must be > 0 (USD per UTC month), got %v", v)
		}
		switch b.OverBudget {
		case "cap":
			if v := b.PriceCap; !(v > 0) || math.IsInf(v, 0) {
				p.add(keypath.Join(path, "price_cap"), "must be > 0 (USD per slot-hour) with over_budget: cap, got %v", v)
			}
		case "refuse":
			if b.PriceCap != 0 {
				p.add(keypath.Join(path, "price_cap"), "applies only with over_budget: cap")
			}
		default:
			p.add(keypath.Join(path, "over_budget"), "must be cap or refuse, got %q", b.OverBudget)
		}
	}
}
