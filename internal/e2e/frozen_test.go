package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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
// store on 3 shards, one ax server (real binary). The gate is per master:
// once its probe has heard nothing from the frozen one, a task on a shard
// it serves is answered 503 unavailable with Retry-After, while the tasks
// on the other masters' shards are read 200 throughout, and submits are
// accepted on those shards (a submit placed on the frozen master's is 503
// with Retry-After, nothing else). After SIGCONT every task accepted
// before and during the freeze is read back.
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
	srv := procs.start("server", append(os.Environ(), "AX_LOG_FORMAT=text"), "server", "--config", conf)
	waitUntil(t, 30*time.Second, "/readyz", func() bool {
		resp, err := http.Get(srv.api + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})

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
	submit := func() (int, string, http.Header, []byte) {
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
	refused := 0
	var refusedTook []time.Duration
	for range 15 {
		start := time.Now()
		code, id, hdr, body := submit()
		switch {
		case code == http.StatusCreated && masterOf[shardOf(id)] != victim:
			accepted = append(accepted, id)
		case unavailable(code, hdr, body):
			refused++
			refusedTook = append(refusedTook, time.Since(start))
		default:
			t.Fatalf("a submit with one master frozen: %d %s, want 201 on another master's shard or 503 unavailable with Retry-After", code, body)
		}
	}
	if refused == 15 {
		t.Error("every submit refused with one master of three frozen")
	}
	slices.Sort(frozenTook)
	slices.Sort(healthyTook)
	t.Logf("the first 503 for the frozen master's shard %v into the freeze", first.Round(time.Millisecond))
	t.Logf("with %s frozen: GET on its shard median %v (max %v) of %d; on the others median %v (max %v) of %d; submits refused %d of 15 (%v)",
		victim, frozenTook[len(frozenTook)/2], frozenTook[len(frozenTook)-1], len(frozenTook),
		healthyTook[len(healthyTook)/2], healthyTook[len(healthyTook)-1], len(healthyTook), refused, refusedTook)

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
}
