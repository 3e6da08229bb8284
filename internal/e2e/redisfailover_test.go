package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/internal/redisproc"
	"github.com/ax-sched/ax/internal/testenv"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/store"
	"github.com/ax-sched/ax/task"
)

// Two ax servers with redis.wait_replicas 1 take submits over HTTP while
// the Redis master holding a shard is killed with SIGKILL: a Sentinel-
// managed Redis (a master, replicas, three sentinels; passwords on the data
// nodes and on the sentinels) and a Redis Cluster (3 masters with a replica
// each, the store on 3 shards). Every submit the API acknowledged (2xx) must
// still be there after the failover; a refused one must be a 503 with
// Retry-After. A submitter retries a refused submit (same idempotency key
// for half of them, none for the others) until it is acknowledged, and the
// test counts the tasks stored twice.
//
// With one replica the promoted master has none left, so WAIT refuses
// every write to its shard until the old master is back as its replica:
// the test restarts it. With two, the other replica follows the new master.
func TestRedisFailoverLosesNoAcceptedTask(t *testing.T) {
	t.Parallel()
	// The three topologies share nothing (their own Redis processes, ax
	// servers and free ports) and mostly wait on failovers: run side by side.
	t.Run("sentinel, one replica", func(t *testing.T) { t.Parallel(); redisFailover(t, sentinelMode(t, 1)) })
	t.Run("sentinel, two replicas", func(t *testing.T) { t.Parallel(); redisFailover(t, sentinelMode(t, 2)) })
	t.Run("cluster, 3 masters with a replica each", func(t *testing.T) { t.Parallel(); redisFailover(t, clusterMode(t)) })
}

const dataPW, sentinelPW = "data-pw", "sentinel-pw"

// redisMode is one Redis topology of the failover test.
type redisMode struct {
	name      string
	redisYAML string // the region config's redis value (flow style)
	shards    int
	replicas  int // per master
	client    redis.UniversalClient
	oldMaster string // the victim: the master of shard 0
	kill      func()
	// promoted answers the master serving shard 0 now.
	promoted func(ctx context.Context) (string, error)
	// restore starts the old master again (it comes back as a replica).
	restore func()
	// replicated reports whether shard 0's master has a replica in sync.
	replicated func(ctx context.Context) bool
}

func sentinelMode(t *testing.T, replicas int) redisMode {
	set := testenv.StartRedisSentinel(t, testenv.SentinelOptions{Replicas: replicas, Password: dataPW, SentinelPassword: sentinelPW})
	m := redisMode{
		name: "sentinel", shards: 1, replicas: replicas, client: set.Client(), oldMaster: set.Master.Addr(),
		redisYAML: fmt.Sprintf("{password: %s, sentinel: {master_name: %s, addrs: [%s], password: %s}, wait_replicas: 1, wait_timeout: 500ms}",
			dataPW, testenv.SentinelMaster, strings.Join(set.SentinelAddrs(), ", "), sentinelPW),
		kill:     set.Master.Kill,
		promoted: set.MasterAddr,
		restore:  func() { set.Master.Restart(true) },
	}
	m.replicated = func(ctx context.Context) bool {
		a, err := set.MasterAddr(ctx)
		return err == nil && replicaOnline(ctx, a)
	}
	return m
}

// replicaOnline reports whether the Redis at addr is a master with a
// replica in sync.
func replicaOnline(ctx context.Context, addr string) bool {
	c := redis.NewClient(&redis.Options{Addr: addr, Password: dataPW, MaxRetries: -1})
	defer c.Close()
	info, err := c.Info(ctx, "replication").Result()
	return err == nil && strings.Contains(info, "role:master") && strings.Contains(info, ",state=online,")
}

func clusterMode(t *testing.T) redisMode {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	dir := t.TempDir()
	// A replica takes over once its master has not answered for
	// cluster-node-timeout.
	opts := []redisproc.Option{redisproc.WithDir(dir), redisproc.WithPassword(dataPW), redisproc.WithStopGrace(5 * time.Second),
		redisproc.WithConfig("loglevel warning", "masterauth "+dataPW, "cluster-node-timeout 2000")}
	c, err := redisproc.StartCluster(ctx, 3, 1, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), Password: dataPW})
	t.Cleanup(func() { _ = cc.Close() })
	shard0 := "ax:{eu-west:0}:"
	slot, err := cc.ClusterKeySlot(ctx, shard0).Result()
	if err != nil {
		t.Fatal(err)
	}
	// masterOf asks the live nodes which one serves shard 0's slot.
	masterOf := func(ctx context.Context, skip string) (string, error) {
		for _, n := range c.Nodes() {
			if n.Addr() == skip {
				continue
			}
			nc := redis.NewClient(&redis.Options{Addr: n.Addr(), Password: dataPW, MaxRetries: -1})
			slots, err := nc.ClusterSlots(ctx).Result()
			_ = nc.Close()
			if err != nil {
				continue
			}
			for _, s := range slots {
				if int64(s.Start) <= slot && slot <= int64(s.End) && len(s.Nodes) > 0 {
					return s.Nodes[0].Addr, nil
				}
			}
		}
		return "", fmt.Errorf("no live node names the master of slot %d", slot)
	}
	old, err := masterOf(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	var victim *redisproc.Server
	victimDir := ""
	for i, n := range c.Nodes() {
		if n.Addr() == old {
			victim, victimDir = n, filepath.Join(dir, "node-"+strconv.Itoa(i))
		}
	}
	m := redisMode{
		name: "cluster", shards: 3, replicas: 1, client: cc, oldMaster: old,
		redisYAML: fmt.Sprintf("{password: %s, cluster: {addrs: [%s]}, shards: 3, wait_replicas: 1, wait_timeout: 500ms}",
			dataPW, strings.Join(c.Addrs(), ", ")),
		kill:     victim.Kill,
		promoted: func(ctx context.Context) (string, error) { return masterOf(ctx, old) },
	}
	m.restore = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		// The same directory: its nodes.conf brings it back into the
		// cluster, where it finds its slots taken and follows their new master.
		s, err := redisproc.Start(ctx, append(opts, redisproc.WithDir(victimDir), redisproc.WithPort(victim.Port()), redisproc.WithCluster())...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Stop)
	}
	m.replicated = func(ctx context.Context) bool {
		a, err := masterOf(ctx, old)
		return err == nil && replicaOnline(ctx, a)
	}
	return m
}

// redisFailover runs two ax servers on m, kills shard 0's master under
// load and counts what the acknowledged submits became.
func redisFailover(t *testing.T, m redisMode) {
	etcd := testenv.StartEtcd(t)
	dir := t.TempDir()
	cfg := fmt.Sprintf(`region: eu-west
listen: 127.0.0.1:0
etcd:
  regional: {endpoints: [%s]}
  session_ttl: 2s
redis: %s
pools:
  - name: cpu
    tags: {class: cpu}
    slots: 100
    queue_capacity: 1000000
    price_per_slot_hour: 0.0355
auth: {enabled: false}
`, etcd.Endpoint(), m.redisYAML)
	conf := filepath.Join(dir, "eu-west.yaml")
	if err := os.WriteFile(conf, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	procs := newProcGroup(t)
	env := append(os.Environ(), "AX_LOG_FORMAT=text")
	var servers []*proc
	for i := range 2 {
		servers = append(servers, procs.start(fmt.Sprintf("server-%d", i), env, "server", "--config", conf))
	}
	for _, s := range servers {
		waitUntil(t, 30*time.Second, s.name+" /readyz", func() bool {
			resp, err := http.Get(s.api + "/readyz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		})
	}

	// The load: submitters, each submitting one task at a time to the
	// servers in turn and retrying a refused one until it is acknowledged.
	type logical struct {
		key   string   // idempotency key; "" for none
		ids   []string // every id an acknowledgement named
		tries int
	}
	var (
		mu       sync.Mutex
		accepted []*logical
		statuses = map[string]int{}
		stop     atomic.Bool
		killedAt atomic.Int64 // unix ns, once the old master is gone
		// The first acknowledgement of a submit to shard 0 sent after
		// that, unix ns (other shards' masters answer on).
		firstOK atomic.Int64
	)
	httpc := &http.Client{Timeout: 5 * time.Second}
	submit := func(api string, l *logical, n int) (string, string) {
		spec := map[string]any{"type": "noop", "tags": map[string]string{"class": "cpu"}, "payload": map[string]int{"n": n}}
		if l.key != "" {
			spec["idempotency_key"] = l.key
		}
		b, _ := json.Marshal(spec)
		resp, err := httpc.Post(api+"/v1/tasks", "application/json", bytes.NewReader(b))
		if err != nil {
			return "", "transport error"
		}
		defer resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			var eb apiv1.ErrorBody
			_ = json.NewDecoder(resp.Body).Decode(&eb)
			msg := eb.Error.Message
			if i := strings.LastIndex(msg, " (ref "); i >= 0 {
				msg = msg[:i] // without the correlation id
			}
			return "", fmt.Sprintf("%d %s (%s, Retry-After %q)", resp.StatusCode, eb.Error.Code, msg, resp.Header.Get("Retry-After"))
		}
		var sr apiv1.SubmitResponse
		if err := json.NewDecoder(resp.Body).Decode(&sr); err != nil || sr.ID == "" {
			return "", fmt.Sprintf("%d undecodable", resp.StatusCode)
		}
		return sr.ID, fmt.Sprint(resp.StatusCode)
	}
	var wg sync.WaitGroup
	const submitters = 8
	for g := range submitters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; !stop.Load(); n++ {
				l := &logical{}
				if g%2 == 0 {
					l.key = fmt.Sprintf("k-%d-%d", g, n)
				}
				for !stop.Load() {
					l.tries++
					sent := time.Now().UnixNano()
					id, status := submit(servers[(g+n+l.tries)%len(servers)].api, l, n)
					mu.Lock()
					statuses[status]++
					mu.Unlock()
					if id != "" {
						l.ids = append(l.ids, id)
						if k := killedAt.Load(); k != 0 && sent > k {
							if p, err := task.ParseID(id); err == nil && p.Shard%m.shards == 0 {
								firstOK.CompareAndSwap(0, time.Now().UnixNano())
							}
						}
						mu.Lock()
						accepted = append(accepted, l)
						mu.Unlock()
						break
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
		}()
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(accepted) }
	waitUntil(t, 30*time.Second, "300 acknowledged submits before the kill", func() bool { return count() >= 300 })
	before := count()
	m.kill()
	killedAt.Store(time.Now().UnixNano())
	t.Logf("%s: master %s of shard 0 killed (SIGKILL) after %d acknowledged submits", m.name, m.oldMaster, before)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var newMaster string
	failover := waitUntil(t, 60*time.Second, "a replica promoted", func() bool {
		a, err := m.promoted(ctx)
		newMaster = a
		return err == nil && a != m.oldMaster
	})
	t.Logf("%s promoted %v after the kill", newMaster, failover)
	if m.replicas == 1 {
		// The promoted master has no replica: every submit to its shard
		// waits in vain for WAIT and is refused, until the old master is
		// back as its replica.
		time.Sleep(2 * time.Second)
		if firstOK.Load() != 0 {
			t.Errorf("a submit to shard 0 was acknowledged while its promoted master had no replica")
		}
		m.restore()
		rejoined := waitUntil(t, 60*time.Second, "the old master to replicate the new one", func() bool { return m.replicated(ctx) })
		t.Logf("old master restarted %v after the kill; it replicates the new one %v after its restart",
			(failover + 2*time.Second).Round(time.Millisecond), rejoined.Round(time.Millisecond))
	}
	waitUntil(t, 60*time.Second, "submits acknowledged again", func() bool { return firstOK.Load() != 0 })
	back := count()
	waitUntil(t, 60*time.Second, "300 acknowledged submits after the failover", func() bool { return count() >= back+300 })
	stop.Store(true)
	wg.Wait()

	// Every acknowledged task must be readable through the API, once.
	lost, dupKeyed, keyed, unkeyed := 0, 0, 0, 0
	var lostIDs []string
	seen := map[string]bool{}
	for _, l := range accepted {
		if l.key != "" {
			keyed++
		} else {
			unkeyed++
		}
		for _, id := range l.ids {
			seen[id] = true
			// 404 is lost; 503 and 429 say "ask again", not "gone".
			code := 0
			for try := 0; try < 50; try++ {
				resp, err := httpc.Get(servers[0].api + "/v1/tasks/" + id)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if code = resp.StatusCode; code != http.StatusServiceUnavailable && code != http.StatusTooManyRequests {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if code != http.StatusOK {
				lost++
				lostIDs = append(lostIDs, fmt.Sprintf("%s (%d)", id, code))
			}
		}
		if len(l.ids) > 1 {
			dupKeyed++
		}
	}
	// Tasks in Redis beyond the acknowledged ones: writes that survived
	// though their submit was refused, and were then submitted again.
	store, err := store.New(m.client, queue.Options{Region: "eu-west", Shards: m.shards})
	if err != nil {
		t.Fatal(err)
	}
	c, err := store.Tasks().Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stored := c.Pending + c.Ready + c.Running + c.Dead + c.Succeeded + c.Canceled
	extra := stored - len(seen)
	var st []string
	for k, v := range statuses {
		st = append(st, fmt.Sprintf("%s×%d", k, v))
	}
	sort.Strings(st)
	refusedFor := time.Duration(firstOK.Load() - killedAt.Load())
	t.Logf("acknowledged %d (%d with an idempotency key, %d without), %d before the kill; first acknowledgement of a submit to shard 0 sent after the kill %v after it; answers %s",
		len(accepted), keyed, unkeyed, before, refusedFor.Round(time.Millisecond), strings.Join(st, " "))
	t.Logf("RESULT %s, %d replica(s) a master: accepted-but-lost %d, stored twice %d (tasks in Redis %d, acknowledged ids %d), keyed submits acknowledged under two ids %d",
		m.name, m.replicas, lost, extra, stored, len(seen), dupKeyed)
	if lost != 0 {
		t.Errorf("%d acknowledged tasks lost in the failover: %v", lost, lostIDs[:min(10, len(lostIDs))])
	}
	if dupKeyed != 0 {
		t.Errorf("%d submits with an idempotency key were acknowledged under two ids", dupKeyed)
	}
	if extra < 0 {
		t.Errorf("Redis holds %d tasks, fewer than the %d acknowledged", stored, len(seen))
	}
	for k := range statuses {
		if k != "200" && k != "201" && !(strings.HasPrefix(k, "503 unavailable") && !strings.Contains(k, `Retry-After ""`)) {
			t.Errorf("a refused submit answered %s: a Redis outage is a 503 with Retry-After", k)
		}
	}
}
