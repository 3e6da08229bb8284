package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ax-sched/ax/task"
)

// Tokens of TestPythonWorkerFederation (added to the federation's).
const (
	tokAcme       = "acme-submitter"
	tokGlobex     = "globex-submitter"
	tokAcmeWorker = "acme-gpu-workers"
)

// A Python worker (clients/python, installed by pip) with nothing but the
// two API URLs of us-east-1 and a worker token of tenant acme's pool
// acme-gpu, auth on, two regions of two servers each: it runs acme's tasks,
// one of them handed off from eu-west-1, with progress and results visible
// through GET; globex's tasks never reach it; SIGKILL of the server it
// talks to mid-task loses nothing and runs nothing twice (it moves to the
// other server); its handler finds no Redis password or cluster token in
// its environment and gets 403 from the API beyond its protocol; SIGTERM
// ends it cleanly.
func TestPythonWorkerFederation(t *testing.T) {
	t.Parallel()
	py := pythonSDK(t)
	secret := map[string]string{}
	var tokens strings.Builder
	for name, line := range map[string]string{
		tokAcme:       "role: submitter, tenant: acme",
		tokGlobex:     "role: submitter, tenant: globex",
		tokAcmeWorker: "role: worker, tenants: [acme], pools: [acme-gpu], types: [py.e2e]",
	} {
		secret[name] = name + "-" + randomHex(16)
		fmt.Fprintf(&tokens, "- {name: %s, token_sha256: %s, %s}\n", name, sha256Hex(secret[name]), line)
	}
	// Each region has an acme-gpu pool (a worker token names pools every
	// region knows); only us-east-1's has a worker, and acme's tasks are
	// pinned there.
	pools := "- {name: cpu, tags: {class: cpu}, slots: 50, price_per_slot_hour: 0.04}\n" +
		"- {name: acme-gpu, tags: {class: gpu}, slots: 8, price_per_slot_hour: 0.5, tenants: [acme]}"
	f := newFederation(t, fedOpts{servers: 2, noWorkers: true, tokens: tokens.String(),
		pools: map[string]string{"us-east-1": pools, "eu-west-1": pools}})
	for name, s := range secret {
		f.tokens[name] = s
	}
	for _, r := range f.order {
		f.startWorker(r, "cpu")
	}
	east := f.region("us-east-1")
	dir := t.TempDir()
	runs, gates := filepath.Join(dir, "runs.jsonl"), filepath.Join(dir, "gates")
	if err := os.Mkdir(gates, 0o700); err != nil {
		t.Fatal(err)
	}
	script, _ := filepath.Abs(filepath.Join("testdata", "pyworker.py"))
	w := f.procs.startBin(py, "us-east-1/pyworker", []string{
		"PATH=" + os.Getenv("PATH"), "PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1",
		"AX_URL=" + east.servers[0].api + "," + east.servers[1].api, "AX_TOKEN=" + secret[tokAcmeWorker],
		"AX_POOL=acme-gpu", "AX_E2E_RUNS=" + runs, "AX_E2E_GATES=" + gates,
	}, script)
	waitPools(f, map[string][]string{"us-east-1": {"cpu", "acme-gpu"}, "eu-west-1": {"cpu"}})

	gpu := map[string]string{"class": "gpu"}
	spec := func(n int, extra map[string]any) map[string]any {
		s := map[string]any{"type": "py.e2e", "tags": gpu, "payload": map[string]any{"n": n}, "max_retries": 2,
			"regions": []string{"us-east-1"}}
		for k, v := range extra {
			s["payload"].(map[string]any)[k] = v
		}
		return s
	}
	// Held at its gate until the server it talks to is killed.
	gated, where := f.submit("us-east-1", tokAcme, spec(0, map[string]any{"gate": true}))
	if where != "us-east-1" {
		t.Fatalf("acme's gpu task placed in %s", where)
	}
	var ids []string
	for i := 1; i <= 4; i++ {
		id, _ := f.submit("us-east-1", tokAcme, spec(i, nil))
		ids = append(ids, id)
	}
	handed := f.handedOffTask("eu-west-1", "us-east-1", tokAcme, spec(5, nil))
	probe, _ := f.submit("us-east-1", tokAcme, spec(6, map[string]any{"probe": true}))
	// globex's tasks of the same type: acme-gpu is acme's own, so none is
	// ever placed there (no other pool serves py.e2e: it waits or is refused).
	var globex []string
	for i := 0; i < 3; i++ {
		code, body := f.call("us-east-1", tokGlobex, http.MethodPost, "/v1/tasks",
			map[string]any{"type": "py.e2e", "tags": gpu, "payload": map[string]any{"n": 100 + i}})
		var r struct{ ID, Pool string }
		if code == http.StatusCreated && json.Unmarshal(body, &r) == nil {
			if r.Pool == "acme-gpu" {
				t.Fatalf("globex's task %s placed on acme's pool acme-gpu", r.ID)
			}
			globex = append(globex, r.ID)
		} else if code/100 != 4 {
			t.Fatalf("globex submit: %d %s", code, body)
		}
	}

	// Every task but the gated one runs, the handed-off one read where it
	// was submitted too.
	api2 := east.servers[1].api
	for _, id := range append([]string{handed.ID, probe}, ids...) {
		waitUntil(t, 30*time.Second, "acme's task "+id+" SUCCESS", func() bool { return pyTask(f, api2, id).State == task.Success })
	}
	if tk, code := f.getTask("eu-west-1", tokAcme, handed.ID); code != 200 || tk.State != task.Success ||
		tk.Result != `{"n":5,"tenant":"acme"}` {
		t.Fatalf("handed-off task via eu-west-1: %d %s result %q", code, tk.State, tk.Result)
	}
	// Progress of the gated task, read through the API; then the server the
	// worker talks to dies while the task runs.
	waitUntil(t, 20*time.Second, "the gated task's progress through GET", func() bool {
		tk := pyTask(f, api2, gated)
		return tk.State == task.Running && tk.Progress != nil && tk.Progress.Percent == 50
	})
	logAt := len(w.log.String())
	east.servers[0].kill()
	if err := os.WriteFile(filepath.Join(gates, gated), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	after, _ := submitVia(f, api2, tokAcme, spec(7, nil))
	all := append([]string{gated, handed.ID, probe, after}, ids...)
	for _, id := range []string{gated, after} {
		waitUntil(t, 30*time.Second, "acme's task "+id+" SUCCESS", func() bool { return pyTask(f, api2, id).State == task.Success })
	}
	if !strings.Contains(w.log.String()[logAt:], "moving to "+api2) {
		t.Fatalf("the worker never moved to %s after its server died:\n%s", api2, tail(w.log.String(), 3000))
	}
	// Each ran once, on its first attempt, and none of globex's ran.
	count := map[string]int{}
	for _, r := range readRuns(t, runs) {
		if r.Tenant != "acme" || r.Attempt != 1 {
			t.Fatalf("the Python worker ran %+v", r)
		}
		count[r.ID]++
	}
	for _, id := range all {
		if count[id] != 1 {
			t.Fatalf("task %s ran %d times, want once (runs: %v)", id, count[id], count)
		}
		if tk := pyTask(f, api2, id); tk.Attempts != 1 {
			t.Fatalf("task %s took %d attempts", id, tk.Attempts)
		}
	}
	if len(count) != len(all) {
		t.Fatalf("the worker ran %d tasks, want %d: %v", len(count), len(all), count)
	}
	for _, id := range globex {
		if tk, _ := f.callGlobex(api2, id); tk.State == task.Running || tk.State == task.Success || tk.Pool == "acme-gpu" {
			t.Fatalf("globex's task %s: %s in pool %s", id, tk.State, tk.Pool)
		}
	}
	checkProbe(t, f, pyTask(f, api2, probe).Result)

	w.signal(syscall.SIGTERM)
	select {
	case <-w.done:
	case <-time.After(20 * time.Second):
		t.Fatalf("the Python worker still runs 20 s after SIGTERM:\n%s", tail(w.log.String(), 3000))
	}
	if !w.cmd.ProcessState.Success() || !strings.Contains(w.log.String(), "pyworker exited") {
		t.Fatalf("the Python worker exited %v:\n%s", w.cmd.ProcessState, tail(w.log.String(), 3000))
	}
}

// waitPools waits until every server sees every region healthy with a
// leader and live slots in the pools named for it.
func waitPools(f *federation, want map[string][]string) {
	f.t.Helper()
	for _, name := range f.order {
		for _, s := range f.region(name).servers {
			waitUntil(f.t, 30*time.Second, s.name+" to see the pools placeable", func() bool {
				var rs struct {
					Regions []struct {
						Name, Leader string
						Healthy      bool
						Pools        []struct {
							Name  string
							Slots int
						}
					}
				}
				code, body := f.callAPI(s.api, tokAdmin, http.MethodGet, "/v1/regions", nil)
				if code != 200 || json.Unmarshal(body, &rs) != nil || len(rs.Regions) != len(f.order) {
					return false
				}
				for _, g := range rs.Regions {
					if !g.Healthy || g.Leader == "" {
						return false
					}
					for _, p := range g.Pools {
						if p.Slots == 0 && slices.Contains(want[g.Name], p.Name) {
							return false
						}
					}
				}
				return true
			})
		}
	}
}

// pyTask reads a task through api with acme's submitter token.
func pyTask(f *federation, api, id string) task.Task {
	f.t.Helper()
	var tk task.Task
	if code, body := f.callAPI(api, tokAcme, http.MethodGet, "/v1/tasks/"+id, nil); code == 200 {
		_ = json.Unmarshal(body, &tk)
	}
	return tk
}

// callGlobex reads one of globex's tasks through api with globex's token.
func (f *federation) callGlobex(api, id string) (task.Task, int) {
	var tk task.Task
	code, body := f.callAPI(api, tokGlobex, http.MethodGet, "/v1/tasks/"+id, nil)
	if code == 200 {
		_ = json.Unmarshal(body, &tk)
	}
	return tk, code
}

// submitVia posts spec to api with token; a refusal fails the test.
func submitVia(f *federation, api, token string, spec map[string]any) (id, where string) {
	f.t.Helper()
	code, body := f.callAPI(api, token, http.MethodPost, "/v1/tasks", spec)
	var r struct{ ID, Region string }
	if code != http.StatusCreated || json.Unmarshal(body, &r) != nil {
		f.t.Fatalf("submit via %s: %d %s", api, code, body)
	}
	return r.ID, r.Region
}

type pyRun struct {
	ID      string `json:"id"`
	Tenant  string `json:"tenant"`
	Attempt int    `json:"attempt"`
}

func readRuns(t *testing.T, path string) []pyRun {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	var out []pyRun
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		var r pyRun
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("runs file: %v: %s", err, sc.Text())
		}
		out = append(out, r)
	}
	return out
}

// checkProbe checks what the probing handler found: no Redis password,
// cluster token or Redis address variable in its environment, and 403 on
// the API routes beyond the worker protocol with its worker token.
func checkProbe(t *testing.T, f *federation, result string) {
	t.Helper()
	var p struct {
		Env       map[string]string `json:"env"`
		ListTasks int               `json:"list_tasks"`
		GetTask   int               `json:"get_task"`
		Submit    int               `json:"submit"`
	}
	if err := json.Unmarshal([]byte(result), &p); err != nil || p.Env == nil {
		t.Fatalf("probe result %q: %v", result, err)
	}
	for k, v := range p.Env {
		if strings.Contains(k, "REDIS") || strings.Contains(k, "CLUSTER") {
			t.Fatalf("the handler's environment has %s", k)
		}
		for what, s := range f.secrets() {
			if strings.Contains(v, s) {
				t.Fatalf("the handler's environment holds the %s (in %s)", what, k)
			}
		}
	}
	if p.ListTasks != 403 || p.GetTask != 403 || p.Submit != 403 {
		t.Fatalf("the worker token on the API: list %d, get %d, submit %d; want 403 each", p.ListTasks, p.GetTask, p.Submit)
	}
}
