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
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/internal/testenv"
	"github.com/ax-sched/ax/queue"
)

// Two ax servers on a Sentinel-managed Redis (a master, replicas, three
// sentinels, passwords on the data nodes and on the sentinels) with
// redis.wait_replicas 1 take submits over HTTP while the master is killed
// with SIGKILL. Every submit the API acknowledged (2xx) must still be there
// after the failover; a refused one must be a 503 with Retry-After. A
// submitter retries a refused submit (same idempotency key for half of
// them, none for the others) until it is acknowledged, and the test counts
// the tasks stored twice.
//
// With one replica the promoted master has none left, so WAIT refuses
// every write until the old master is back as its replica: the test
// restarts it. With two, the other replica follows the new master.
func TestSentinelFailoverLosesNoAcceptedTask(t *testing.T) {
	t.Run("one replica", func(t *testing.T) { sentinelFailover(t, 1) })
	t.Run("two replicas", func(t *testing.T) { sentinelFailover(t, 2) })
}

func sentinelFailover(t *testing.T, replicas int) {
	const dataPW, sentinelPW = "data-pw", "sentinel-pw"
	set := testenv.StartRedisSentinel(t, testenv.SentinelOptions{Replicas: replicas, Password: dataPW, SentinelPassword: sentinelPW})
	etcd := testenv.StartEtcd(t)
	dir := t.TempDir()
	cfg := fmt.Sprintf(`region: eu-west
listen: 127.0.0.1:0
etcd:
  regional: {endpoints: [%s]}
  session_ttl: 2s
redis:
  password: %s
  sentinel: {master_name: %s, addrs: [%s], password: %s}
  wait_replicas: 1
  wait_timeout: 500ms
pools:
  - name: cpu
    tags: {class: cpu}
    slots: 100
    queue_capacity: 1000000
    price_per_slot_hour: 0.0355
auth: {enabled: false}
`, etcd.Endpoint(), dataPW, testenv.SentinelMaster, strings.Join(set.SentinelAddrs(), ", "), sentinelPW)
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
		firstOK  atomic.Int64 // first acknowledgement of a submit sent after that, unix ns
		lastFail atomic.Int64 // latest refusal, unix ns
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
							firstOK.CompareAndSwap(0, time.Now().UnixNano())
						}
						mu.Lock()
						accepted = append(accepted, l)
						mu.Unlock()
						break
					}
					lastFail.Store(time.Now().UnixNano())
					time.Sleep(20 * time.Millisecond)
				}
			}
		}()
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(accepted) }
	waitUntil(t, 30*time.Second, "300 acknowledged submits before the kill", func() bool { return count() >= 300 })
	before := count()
	oldMaster := set.Master.Addr()
	set.Master.Kill()
	killedAt.Store(time.Now().UnixNano())
	t.Logf("master %s killed (SIGKILL) after %d acknowledged submits", oldMaster, before)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var newMaster string
	failover := waitUntil(t, 60*time.Second, "the sentinels to promote a replica", func() bool {
		a, err := set.MasterAddr(ctx)
		newMaster = a
		return err == nil && a != oldMaster
	})
	t.Logf("sentinels promoted %s %v after the kill", newMaster, failover)
	if replicas == 1 {
		// The promoted master has no replica: every submit waits in vain
		// for WAIT and is refused, until the old master is back as its
		// replica (the sentinels turn it into one, on their own schedule).
		time.Sleep(2 * time.Second)
		if n := count() - before; n > submitters {
			t.Errorf("%d submits acknowledged while the promoted master had no replica (at most the %d in flight at the kill)", n, submitters)
		}
		set.Master.Restart(true)
		rejoined := waitUntil(t, 60*time.Second, "the old master to replicate the new one", func() bool {
			info, err := set.Replicas[0].Client().Info(ctx, "replication").Result()
			return err == nil && strings.Contains(info, "connected_slaves:1") && strings.Contains(info, ",state=online,")
		})
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
			resp, err := httpc.Get(servers[0].api + "/v1/tasks/" + id)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				lost++
				lostIDs = append(lostIDs, id)
			}
		}
		if len(l.ids) > 1 {
			dupKeyed++
		}
	}
	// Tasks in Redis beyond the acknowledged ones: writes that survived
	// though their submit was refused, and were then submitted again.
	store, err := queue.New(set.Client(), queue.Options{Region: "eu-west"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := store.Counts(ctx)
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
	t.Logf("acknowledged %d (%d with an idempotency key, %d without), %d before the kill; first acknowledgement of a submit sent after the kill %v after it; answers %s",
		len(accepted), keyed, unkeyed, before, refusedFor.Round(time.Millisecond), strings.Join(st, " "))
	t.Logf("RESULT %d replica(s): accepted-but-lost %d, stored twice %d (tasks in Redis %d, acknowledged ids %d), keyed submits acknowledged under two ids %d",
		replicas, lost, extra, stored, len(seen), dupKeyed)
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
