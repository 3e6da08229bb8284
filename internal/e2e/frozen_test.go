package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/internal/redisproc"
	"github.com/ax-sched/ax/internal/testenv"
	"github.com/ax-sched/ax/task"
)

// One region's Redis frozen (SIGSTOP: connections accepted, nothing
// answered), with two regions, auth on and real workers. Once its servers'
// probe has seen no answer (ax_redis_healthy 0), what needs that Redis is
// answered 503 unavailable with Retry-After and the JSON error: a task held
// there (read from its own region and from the other, which forwards), a
// submit placed there. The other region keeps accepting and running its
// work. After SIGCONT the frozen region accepts again and every task
// accepted before, during and after the freeze runs to SUCCESS (one
// delayed past the freeze, so it was still waiting when Redis stopped).
func TestFrozenRedisAnswers503AndLosesNothing(t *testing.T) {
	fed := newFederation(t, fedOpts{})
	inUS := map[string]any{"type": "noop", "regions": []string{"us-east-1"}}
	inEU := map[string]any{"type": "noop", "regions": []string{"eu-west-1"}}
	var accepted []string // every task a 201 accepted, with the region to read it from
	from := map[string]string{}
	submit := func(region string, spec map[string]any) string {
		id, _ := fed.submit(region, tokSubmitterA, spec)
		accepted = append(accepted, id)
		from[id] = region
		return id
	}
	held := submit("us-east-1", inUS)
	fed.waitState("us-east-1", tokSubmitterA, held, task.Success, 20*time.Second)
	for range 5 {
		submit("us-east-1", inUS)
	}
	submit("us-east-1", map[string]any{"type": "noop", "regions": []string{"us-east-1"}, "delay": "3s"})

	rd := fed.region("us-east-1").redis
	rd.Pause()
	t.Cleanup(rd.Resume)
	us := fed.server("us-east-1").api
	waitUntil(t, 10*time.Second, "ax_redis_healthy 0 in us-east-1 with its Redis frozen", func() bool {
		return metric(t, us, "ax_redis_healthy") == 0
	})
	for _, c := range []struct {
		region, method, path string
		body                 any
	}{
		{"us-east-1", http.MethodGet, "/v1/tasks/" + held, nil},
		{"eu-west-1", http.MethodGet, "/v1/tasks/" + held, nil},
		{"us-east-1", http.MethodPost, "/v1/tasks", inUS},
		{"us-east-1", http.MethodGet, "/v1/tasks/" + held + "/trail", nil},
	} {
		code, body, hdr := fed.callHeader(c.region, tokSubmitterA, c.method, c.path, c.body)
		var eb apiv1.ErrorBody
		if err := json.Unmarshal(body, &eb); err != nil || code != http.StatusServiceUnavailable ||
			eb.Error.Code != apiv1.CodeUnavailable || eb.Error.Message == "" || hdr.Get("Retry-After") == "" ||
			hdr.Get("Content-Type") != "application/json" {
			t.Errorf("%s %s via %s with us-east-1's Redis frozen: %d %s (Retry-After %q, Content-Type %q), want 503 unavailable as JSON with Retry-After",
				c.method, c.path, c.region, code, body, hdr.Get("Retry-After"), hdr.Get("Content-Type"))
		}
	}
	// The other region is not held up by it.
	during := submit("eu-west-1", inEU)
	fed.waitState("eu-west-1", tokSubmitterA, during, task.Success, 20*time.Second)
	if code, body := fed.call("eu-west-1", "", http.MethodGet, "/readyz", nil); code != http.StatusOK {
		t.Errorf("eu-west-1's /readyz with us-east-1's Redis frozen: %d %s", code, body)
	}
	if metric(t, fed.server("eu-west-1").api, "ax_redis_healthy") != 1 {
		t.Error("eu-west-1's ax_redis_healthy is not 1 while only us-east-1's Redis is frozen")
	}

	rd.Resume()
	waitUntil(t, 20*time.Second, "a submit to us-east-1 once its Redis resumed", func() bool {
		code, body := fed.call("us-east-1", tokSubmitterA, http.MethodPost, "/v1/tasks", inUS)
		var r struct {
			ID string `json:"id"`
		}
		if code != http.StatusCreated || json.Unmarshal(body, &r) != nil || r.ID == "" {
			return false
		}
		accepted = append(accepted, r.ID)
		from[r.ID] = "us-east-1"
		return true
	})
	for _, id := range accepted {
		fed.waitState(from[id], tokSubmitterA, id, task.Success, 30*time.Second)
	}
	if code, _ := fed.call("eu-west-1", tokSubmitterA, http.MethodGet, "/v1/tasks/"+held, nil); code != http.StatusOK {
		t.Errorf("us-east-1's task read via eu-west-1 after the freeze: %d", code)
	}
}

// One master of a region's 3-master Redis Cluster frozen (SIGSTOP), the
// store on 3 shards, one ax server and one worker (real binaries). The gate
// is per master: once its probe has heard nothing from the frozen one, a
// task on a shard it serves is answered 503 unavailable with Retry-After,
// while the tasks on the other masters' shards are read 200 throughout.
// Every unkeyed submit (single or batch) is accepted, 201, on another
// master's shard: one its shard's gate refused unsent goes to the next
// shard. A keyed submit whose key's shard is the frozen master's is 503
// with Retry-After (the key is found only on its shard). After SIGCONT
// every task accepted before and during the freeze is read back and
// succeeds, and the region holds each once: no more tasks than 201s.
func TestFrozenClusterMasterAnswers503ForItsShardsOnly(t *testing.T) {
	// Its nodes serve their slots while another is out: without replicas
	// Redis would answer CLUSTERDOWN everywhere once the frozen master is
	// marked failing (cluster-node-timeout), whatever ax does; with replicas
	// a failover follows instead (TestRedisFailoverLosesNoAcceptedTask).
	cctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	rc, err := redisproc.StartCluster(cctx, 3, 0, redisproc.WithStopGrace(5*time.Second),
		redisproc.WithConfig("loglevel warning", "cluster-node-timeout 5000", "cluster-require-full-coverage no"))
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Stop)
	etcd := testenv.StartEtcd(t)
	dir := t.TempDir()
	const shards = 3
	cfg := fmt.Sprintf(`region: eu-west
listen: 127.0.0.1:0
etcd:
  regional: {endpoints: [%s]}
  session_ttl: 2s
redis: {cluster: {addrs: [%s]}, shards: %d}
pools:
  - name: cpu
    tags: {class: cpu}
    slots: 10
    price_per_slot_hour: 0.0355
auth: {enabled: false}
`, etcd.Endpoint(), strings.Join(rc.Addrs(), ", "), shards)
	conf := filepath.Join(dir, "eu-west.yaml")
	if err := os.WriteFile(conf, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	procs := newProcGroup(t)
	env := append(os.Environ(), "AX_LOG_FORMAT=text")
	srv := procs.start("server", env, "server", "--config", conf)
	waitUntil(t, 30*time.Second, "/readyz", func() bool {
		resp, err := http.Get(srv.api + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	procs.start("worker", env, "worker", "--config", conf, "--pool", "cpu", "--id", "w1")

	// The master of each shard (its keys' hash tag).
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: rc.Addrs()})
	t.Cleanup(func() { _ = cc.Close() })
	ctx := t.Context()
	masterOf := map[int]string{}
	for i := range shards {
		m, err := cc.MasterForKey(ctx, fmt.Sprintf("ax:{eu-west:%d}:", i))
		if err != nil {
			t.Fatal(err)
		}
		masterOf[i] = m.Options().Addr
	}
	victim := masterOf[0]
	spec := map[string]any{"type": "noop", "tags": map[string]string{"class": "cpu"}}
	submitSpec := func(spec map[string]any) (int, string, http.Header, []byte) {
		b, _ := json.Marshal(spec)
		resp, err := http.Post(srv.api+"/v1/tasks", "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var sr apiv1.SubmitResponse
		_ = json.Unmarshal(body, &sr)
		return resp.StatusCode, sr.ID, resp.Header, body
	}
	submit := func() (int, string, http.Header, []byte) { return submitSpec(spec) }
	shardOf := func(id string) int {
		p, err := task.ParseID(id)
		if err != nil {
			t.Fatal(err)
		}
		return p.Shard % shards
	}
	var frozenIDs, healthyIDs, accepted []string
	for range 30 {
		code, id, _, body := submit()
		if code != http.StatusCreated {
			t.Fatalf("a submit with the cluster healthy: %d %s", code, body)
		}
		accepted = append(accepted, id)
		if masterOf[shardOf(id)] == victim {
			frozenIDs = append(frozenIDs, id)
		} else {
			healthyIDs = append(healthyIDs, id)
		}
	}
	if len(frozenIDs) == 0 || len(healthyIDs) == 0 {
		t.Fatalf("tasks on the victim's shards %d, on the others' %d: the shards' hash tags are all on one master", len(frozenIDs), len(healthyIDs))
	}
	get := func(id string) (int, http.Header, []byte, time.Duration) {
		start := time.Now()
		resp, err := http.Get(srv.api + "/v1/tasks/" + id)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, body, time.Since(start)
	}
	unavailable := func(code int, hdr http.Header, body []byte) bool {
		var eb apiv1.ErrorBody
		return code == http.StatusServiceUnavailable && json.Unmarshal(body, &eb) == nil &&
			eb.Error.Code == apiv1.CodeUnavailable && hdr.Get("Retry-After") != ""
	}

	node := rc.Nodes()[slices.IndexFunc(rc.Nodes(), func(n *redisproc.Server) bool { return n.Addr() == victim })]
	if err := node.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = node.Signal(syscall.SIGCONT) })
	first := waitUntil(t, 30*time.Second, "a task on the frozen master's shard answered 503", func() bool {
		code, hdr, body, _ := get(frozenIDs[0])
		return unavailable(code, hdr, body)
	})
	var frozenTook, healthyTook []time.Duration
	for range 10 {
		for _, id := range frozenIDs {
			code, hdr, body, took := get(id)
			if !unavailable(code, hdr, body) {
				t.Fatalf("GET of task %s on the frozen master's shard: %d %s (Retry-After %q), want 503 unavailable with Retry-After", id, code, body, hdr.Get("Retry-After"))
			}
			frozenTook = append(frozenTook, took)
		}
		for _, id := range healthyIDs {
			code, _, body, took := get(id)
			if code != http.StatusOK {
				t.Fatalf("GET of task %s on a healthy master's shard with another frozen: %d %s", id, code, body)
			}
			healthyTook = append(healthyTook, took)
		}
	}
	var submitTook []time.Duration
	// The server's round robin puts every third new task on shard 0 (the
	// frozen master's) first: a third of these are refused there unsent
	// and go to the next shard (before, they were answered 503).
	for range 15 {
		start := time.Now()
		code, id, _, body := submit()
		submitTook = append(submitTook, time.Since(start))
		if code != http.StatusCreated || masterOf[shardOf(id)] == victim {
			t.Fatalf("a submit with one master frozen: %d %s, want 201 on another master's shard", code, body)
		}
		accepted = append(accepted, id)
	}
	// A batch of 15 unkeyed tasks: every one accepted, none on the frozen
	// master's shards.
	var items []json.RawMessage
	for range 15 {
		b, _ := json.Marshal(spec)
		items = append(items, b)
	}
	b, _ := json.Marshal(apiv1.BatchRequest{Tasks: items})
	resp, err := http.Post(srv.api+"/v1/tasks/batch", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	var br apiv1.BatchResponse
	err = json.NewDecoder(resp.Body).Decode(&br)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || br.Accepted != 15 {
		t.Fatalf("a batch of 15 with one master frozen: %d, %d accepted (%v): %+v", resp.StatusCode, br.Accepted, err, br.Results)
	}
	for _, it := range br.Results {
		if it.Status != http.StatusCreated || it.Task == nil || masterOf[shardOf(it.Task.ID)] == victim {
			t.Fatalf("a batch item with one master frozen: %+v, want 201 on another master's shard", it)
		}
		accepted = append(accepted, it.Task.ID)
	}
	// A keyed submit whose key's shard is the frozen master's: 503 with
	// Retry-After, as its key is found only there.
	key := ""
	for i := 0; key == ""; i++ {
		if k := fmt.Sprintf("key-%d", i); masterOf[keyShard("default", k, shards)] == victim {
			key = k
		}
	}
	keyed := map[string]any{"type": "noop", "tags": map[string]string{"class": "cpu"}, "idempotency_key": key}
	if code, _, hdr, body := submitSpec(keyed); !unavailable(code, hdr, body) {
		t.Fatalf("a keyed submit whose key's shard is the frozen master's: %d %s (Retry-After %q), want 503 unavailable with Retry-After", code, body, hdr.Get("Retry-After"))
	}
	slices.Sort(frozenTook)
	slices.Sort(healthyTook)
	slices.Sort(submitTook)
	t.Logf("the first 503 for the frozen master's shard %v into the freeze", first.Round(time.Millisecond))
	t.Logf("with %s frozen: GET on its shard median %v (max %v) of %d; on the others median %v (max %v) of %d; 15 submits all 201, median %v (max %v); a batch of 15 all 201",
		victim, frozenTook[len(frozenTook)/2], frozenTook[len(frozenTook)-1], len(frozenTook),
		healthyTook[len(healthyTook)/2], healthyTook[len(healthyTook)-1], len(healthyTook),
		submitTook[len(submitTook)/2], submitTook[len(submitTook)-1])

	if err := node.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 20*time.Second, "the resumed master's tasks read 200", func() bool {
		code, _, _, _ := get(frozenIDs[0])
		return code == http.StatusOK
	})
	for _, id := range accepted {
		if code, _, body, _ := get(id); code != http.StatusOK {
			t.Errorf("task %s accepted before or during the freeze, read after SIGCONT: %d %s", id, code, body)
		}
	}
	// Each accepted task succeeds, and the region holds no task but those.
	waitUntil(t, 60*time.Second, "every accepted task SUCCESS", func() bool {
		for _, id := range accepted {
			_, _, body, _ := get(id)
			var tk task.Task
			if json.Unmarshal(body, &tk) != nil || tk.State != task.Success {
				return false
			}
		}
		return true
	})
	held := map[string]bool{}
	for cursor := ""; ; {
		resp, err := http.Get(srv.api + "/v1/tasks?limit=1000&cursor=" + cursor)
		if err != nil {
			t.Fatal(err)
		}
		var tl apiv1.TaskList
		err = json.NewDecoder(resp.Body).Decode(&tl)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /v1/tasks: %d %v", resp.StatusCode, err)
		}
		for _, tk := range tl.Tasks {
			if held[tk.ID] {
				t.Fatalf("task %s listed twice", tk.ID)
			}
			held[tk.ID] = true
		}
		if cursor = tl.NextCursor; cursor == "" {
			break
		}
	}
	if len(held) != len(accepted) {
		t.Errorf("the region holds %d tasks for %d accepted submits", len(held), len(accepted))
	}
	for _, id := range accepted {
		if !held[id] {
			t.Errorf("accepted task %s not listed", id)
		}
	}
}

// keyShard is queue.Engine.ShardForKey: the shard of a keyed submit.
func keyShard(tenant, key string, shards int) int {
	h := fnv.New32a()
	h.Write([]byte(tenant))
	h.Write([]byte{0})
	h.Write([]byte(key))
	return int(h.Sum32() % uint32(shards))
}
