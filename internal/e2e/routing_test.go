package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/task"
)

var (
	customOnce sync.Once
	customBin  string
	customErr  error
)

// customHandler builds examples/customhandler (a worker SDK program that
// serves one task type) next to the ax binary, once.
func customHandler(t *testing.T) string {
	t.Helper()
	customOnce.Do(func() {
		customBin = filepath.Join(filepath.Dir(axBin), "customhandler")
		out, err := exec.Command("go", "build", "-o", customBin, "github.com/ax-sched/ax/examples/customhandler").CombinedOutput()
		if err != nil {
			customErr = fmt.Errorf("build examples/customhandler: %v\n%s", err, out)
		}
	})
	if customErr != nil {
		t.Fatal(customErr)
	}
	return customBin
}

// explainOf asks, through call (a POST of body to /v1/placement/explain),
// where a task of typ would go: the chosen "region/pool" and every pool's
// rejection code.
func explainOf(t *testing.T, call func(body any) (int, []byte), typ string) (chosen string, rejected map[string]string) {
	t.Helper()
	code, body := call(map[string]any{"type": typ})
	var ex apiv1.Explanation
	if code != http.StatusOK || json.Unmarshal(body, &ex) != nil {
		return "", nil
	}
	rejected = map[string]string{}
	for _, c := range ex.Candidates {
		rejected[c.Region+"/"+c.Pool] = c.Rejected
	}
	if ex.Chosen != nil {
		chosen = ex.Chosen.Region + "/" + ex.Chosen.Pool
	}
	return chosen, rejected
}

// Two regions, auth on, an `ax worker` (built-in handlers only) in each
// region's pool, and an SDK program serving "greet" in eu-west-1's pool
// beside it. Twenty greet tasks submitted in us-east-1 are placed only on
// eu-west-1/cpu (us-east-1/cpu is NO_HANDLER), handed off, and all run once
// on the greeter: none dead-lettered, none claimed by the built-in worker of
// the same pool, which still runs its own types.
func TestCustomTypeRunsOnlyWhereItIsServed(t *testing.T) {
	t.Parallel()
	fed := newFederation(t, fedOpts{})
	eu := fed.region("eu-west-1")
	fed.procs.startBin(customHandler(t), "eu-west-1/greeter", fed.workerEnv(eu),
		"--redis", eu.redis.Addr(), "--region", "eu-west-1", "--pool", "cpu", "--id", "eu-west-1-greeter",
		"--type", "greet", "--concurrency", "4")
	explain := func(body any) (int, []byte) {
		return fed.call("us-east-1", tokSubmitterA, http.MethodPost, "/v1/placement/explain", body)
	}
	waitUntil(t, 30*time.Second, "us-east-1 to place greet on eu-west-1/cpu only", func() bool {
		chosen, rejected := explainOf(t, explain, "greet")
		return chosen == "eu-west-1/cpu" && rejected["us-east-1/cpu"] == "NO_HANDLER"
	})
	// The built-in types are still served in both regions.
	if _, rejected := explainOf(t, explain, "noop"); rejected["us-east-1/cpu"] != "" || rejected["eu-west-1/cpu"] != "" {
		t.Fatalf("noop: rejections %v", rejected)
	}

	var ids []string
	for i := range 20 {
		id, where := fed.submit("us-east-1", tokSubmitterA, map[string]any{
			"type": "greet", "payload": map[string]string{"name": fmt.Sprint("n", i)}})
		if where != "eu-west-1" {
			t.Fatalf("greet task %d placed in %s, want eu-west-1 (the only region serving it)", i, where)
		}
		ids = append(ids, id)
	}
	for i, id := range ids {
		tk := fed.waitState("us-east-1", tokSubmitterA, id, task.Success, 60*time.Second)
		if tk.Result != fmt.Sprint("hello, n", i) {
			t.Fatalf("task %s: result %q", id, tk.Result)
		}
		rec := eu.task(t, id)
		if rec.Worker != "eu-west-1-greeter" || rec.Pool != "cpu" || rec.Attempts != 1 {
			t.Fatalf("task %s ran on %s in pool %s after %d attempts, want the greeter at the first", id, rec.Worker, rec.Pool, rec.Attempts)
		}
		if home := fed.region("us-east-1").task(t, id); home.State != task.HandedOff || home.HandedOffTo != "eu-west-1" {
			t.Fatalf("task %s at home: %s to %q", id, home.State, home.HandedOffTo)
		}
	}
	code, body := fed.call("us-east-1", tokOperator, http.MethodGet, "/v1/dlq", nil)
	var dlq apiv1.TaskList
	if code != http.StatusOK || json.Unmarshal(body, &dlq) != nil || len(dlq.Tasks) != 0 {
		t.Fatalf("dead letters: %d %s", code, body)
	}
	for _, name := range []string{"us-east-1", "eu-west-1"} {
		c, err := fed.region(name).store.Tasks().Counts(t.Context())
		if err != nil || c.Failed != 0 {
			t.Fatalf("%s counts %+v %v", name, c, err)
		}
	}
	// The greeter does not take what the built-in worker of its pool serves.
	id, _ := fed.submit("eu-west-1", tokSubmitterA, map[string]any{"type": "noop", "regions": []string{"eu-west-1"}})
	fed.waitState("eu-west-1", tokSubmitterA, id, task.Success, 20*time.Second)
	if rec := eu.task(t, id); rec.Worker != "eu-west-1-cpu-w1" {
		t.Fatalf("noop ran on %s, want the built-in worker", rec.Worker)
	}
}

// devRedis finds us-east-1's Redis in ax dev's banner.
var devRedis = regexp.MustCompile(`us-east-1\s+API \S+\s+Redis (127\.0\.0\.1:\d+)`)

// `ax dev --no-demo-workers`: no pool has slots until an SDK program serving
// "greet" joins us-east-1/cpu-spot; then twenty greet tasks all succeed,
// on that pool, and a type it does not serve is explained as NO_HANDLER
// there and waits PENDING instead of being dead-lettered.
func TestDevWithoutDemoWorkersRunsYourHandler(t *testing.T) {
	d := startDev(t, "--tmp", "--no-demo-workers")
	var regions apiv1.RegionsResponse
	if err := getJSON(d.api+"/v1/regions", &regions); err != nil {
		t.Fatal(err)
	}
	for _, r := range regions.Regions {
		for _, p := range r.Pools {
			if p.Slots != 0 || p.Workers != 0 {
				t.Fatalf("%s/%s has %d workers with %d slots without demo workers", r.Name, p.Name, p.Workers, p.Slots)
			}
		}
	}
	m := devRedis.FindStringSubmatch(d.log.String())
	if m == nil {
		t.Fatalf("no us-east-1 Redis in the banner:\n%s", tail(d.log.String(), 2000))
	}
	procs := newProcGroup(t)
	procs.startBin(customHandler(t), "greeter", os.Environ(),
		"--redis", m[1], "--region", "us-east-1", "--pool", "cpu-spot", "--id", "greeter", "--type", "greet")
	post := func(body any) (int, []byte) {
		b, _ := json.Marshal(body)
		resp, err := http.Post(d.api+"/v1/placement/explain", "application/json", strings.NewReader(string(b)))
		if err != nil {
			return 0, nil
		}
		defer resp.Body.Close()
		b, _ = io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	waitUntil(t, 30*time.Second, "greet placed on us-east-1/cpu-spot", func() bool {
		chosen, _ := explainOf(t, post, "greet")
		return chosen == "us-east-1/cpu-spot"
	})
	if _, rejected := explainOf(t, post, "noop"); rejected["us-east-1/cpu-spot"] != "NO_HANDLER" {
		t.Fatalf("noop on us-east-1/cpu-spot: %q, want NO_HANDLER", rejected["us-east-1/cpu-spot"])
	}
	submit := func(spec string) (id, pool string) {
		t.Helper()
		resp, err := http.Post(d.api+"/v1/tasks", "application/json", strings.NewReader(spec))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var r struct{ ID, Region, Pool string }
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || resp.StatusCode != http.StatusCreated {
			t.Fatalf("submit %s: %d %v", spec, resp.StatusCode, err)
		}
		return r.ID, r.Region + "/" + r.Pool
	}
	var ids []string
	for i := range 20 {
		id, where := submit(fmt.Sprintf(`{"type":"greet","payload":{"name":"n%d"}}`, i))
		if where != "us-east-1/cpu-spot" {
			t.Fatalf("greet task %d placed on %s", i, where)
		}
		ids = append(ids, id)
	}
	d.waitSuccess(60*time.Second, ids)
	for _, id := range ids {
		var tk task.Task
		if err := getJSON(d.api+"/v1/tasks/"+id, &tk); err != nil || tk.Worker != "greeter" || tk.Attempts != 1 {
			t.Fatalf("task %s: %+v %v", id, tk, err)
		}
	}
	noop, where := submit(`{"type":"noop"}`)
	if where != "us-east-1/" {
		t.Fatalf("noop placed on %s with no worker serving it", where)
	}
	// ax get says why it waits, and that the type may be misspelt.
	var out, stderr string
	waitUntil(t, 20*time.Second, "ax get to show the noop task PENDING (NO_HANDLER)", func() bool {
		out, stderr, _ = runAx(t, d.api, "get", noop)
		return strings.Contains(out, "NO_HANDLER")
	})
	if !strings.Contains(stderr, `no live worker serves type "noop"`) || !strings.Contains(stderr, "misspelt") {
		t.Errorf("ax get of a task nobody serves: stderr %q", stderr)
	}
	var tk task.Task
	if err := getJSON(d.api+"/v1/tasks/"+noop, &tk); err != nil || tk.State != task.Pending || tk.Reason != task.ReasonNoHandler || tk.Attempts != 0 {
		t.Fatalf("noop nobody serves: %+v %v", tk, err)
	}
	var dlq apiv1.TaskList
	if err := getJSON(d.api+"/v1/dlq", &dlq); err != nil || len(dlq.Tasks) != 0 {
		t.Fatalf("dead letters: %+v %v", dlq, err)
	}
}
