package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ax-sched/ax/task"
)

// tsSDK is clients/typescript, installed (npm ci) and built (tsc) once per
// test binary: its dist/ holds the SDK and the test programs run here.
var tsSDK struct {
	once sync.Once
	err  string
}

// tsDist guards clients/typescript's dist/: TestTypeScriptSDK's npm test
// rebuilds it (write lock) while no test starts a program from it (read
// lock, typescriptDist), so the tests that run those programs can run in
// parallel with TestTypeScriptSDK's other steps and with each other.
var tsDist sync.RWMutex

// typescriptSDK returns clients/typescript's directory after npm ci and
// npm run build. node and npm must be installed (make deps); the test fails
// without them.
func typescriptSDK(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed: clients/typescript needs Node 20+ and npm (make deps: apt-get install nodejs npm)", tool)
		}
	}
	dir, err := filepath.Abs(filepath.Join("..", "..", "clients", "typescript"))
	if err != nil {
		t.Fatal(err)
	}
	tsSDK.once.Do(func() { tsSDK.err = buildTypeScriptSDK(dir) })
	if tsSDK.err != "" {
		t.Fatal(tsSDK.err)
	}
	return dir
}

// typescriptDist is typescriptSDK for a test that starts programs of its
// dist/: it holds tsDist's read lock until t ends.
func typescriptDist(t *testing.T) string {
	t.Helper()
	dir := typescriptSDK(t)
	tsDist.RLock()
	t.Cleanup(tsDist.RUnlock)
	return dir
}

// buildTypeScriptSDK runs npm ci and npm run build in dir; "" when both
// succeeded, else what failed.
func buildTypeScriptSDK(dir string) string {
	for _, args := range [][]string{{"ci", "--no-audit", "--no-fund"}, {"run", "build"}} {
		cmd := exec.Command("npm", args...)
		cmd.Dir, cmd.Env = dir, baseEnv()
		if out, err := cmd.CombinedOutput(); err != nil {
			return "npm " + strings.Join(args, " ") + ": " + err.Error() + "\n" + tail(string(out), 4000)
		}
	}
	return ""
}

// prepareSDKs installs the Python SDK and builds the TypeScript one in
// the background (what pythonSDK and typescriptSDK would do at their first
// call), when their tools are there: a whole run of the suite then has
// them ready by the time its SDK tests, which run last (t.Parallel), ask.
func prepareSDKs() {
	if _, err := exec.LookPath("python3"); err == nil {
		go pyVenv.once.Do(func() { pyVenv.python, pyVenv.err = installPythonSDK() })
	}
	_, errNode := exec.LookPath("node")
	_, errNpm := exec.LookPath("npm")
	dir, err := filepath.Abs(filepath.Join("..", "..", "clients", "typescript"))
	if errNode == nil && errNpm == nil && err == nil {
		go tsSDK.once.Do(func() { tsSDK.err = buildTypeScriptSDK(dir) })
	}
}

// TestTypeScriptSDK runs clients/typescript's own tests (npm test): the types
// checked against httpapi/openapi.json, unit tests against an in-process fake
// server, and the client and worker against a real `ax dev` of this build.
func TestTypeScriptSDK(t *testing.T) {
	t.Parallel()
	dir := typescriptSDK(t)
	cmd := exec.Command("npm", "test")
	cmd.Dir, cmd.Env = dir, append(baseEnv(), "AX_BIN="+axBin)
	tsDist.Lock() // npm test rebuilds dist/
	out, err := cmd.CombinedOutput()
	tsDist.Unlock()
	if err != nil {
		t.Fatalf("npm test in clients/typescript: %v\n%s", err, tail(string(out), 12000))
	}
	s := string(out)
	for _, want := range []string{`src/openapi\.ts matches httpapi/openapi\.json`, `\bok \d+ - against ax dev\n`, `# fail 0\n`, `# skipped 0\n`} {
		if !regexp.MustCompile(want).MatchString(s) {
			t.Fatalf("npm test's output lacks %s:\n%s", want, tail(s, 12000))
		}
	}
}

// The TypeScript worker as a team that brings its own compute meets it:
// auth on, two regions of two servers, tenant team-a's own pool "acme" in
// us-east-1 (pools[].tenants) served only by clients/typescript's worker
// (dist/test/e2e-worker.js) holding nothing but the region's two API URLs
// and a worker token scoped to team-a and that pool. It runs team-a's
// tasks, one of them handed off from eu-west-1, with progress and results
// visible through GET; team-b's never reach it; SIGKILL of the server it
// talks to mid-task loses nothing and runs nothing twice; SIGTERM drains it.
func TestTypeScriptWorker(t *testing.T) {
	t.Parallel()
	dir := typescriptDist(t)
	wtok := "wt-" + randomHex(16)
	// Both regions declare the pool (a worker token names pools of its
	// region's file); only us-east-1's has a worker.
	pools := "- {name: cpu, tags: {class: cpu}, slots: 50, price_per_slot_hour: 0.04}\n" +
		"- {name: acme, tags: {class: acme}, slots: 8, price_per_slot_hour: 0.04, tenants: [team-a]}"
	f := newFederation(t, fedOpts{servers: 2, noWorkers: true,
		pools:    map[string]string{"us-east-1": pools, "eu-west-1": pools},
		unserved: map[string][]string{"eu-west-1": {"acme"}},
		tokens:   fmt.Sprintf("- {name: acme-workers, token_sha256: %s, role: worker, tenants: [team-a], pools: [acme], types: [ts.resize]}", sha256Hex(wtok)),
	})
	for _, r := range f.order {
		f.startWorker(r, "cpu")
	}
	us := f.region("us-east-1")
	ts := f.procs.startBin("node", "us-east-1/ts-worker",
		append(baseEnv(), "AX_URL="+us.servers[0].api+","+us.servers[1].api, "AX_TOKEN="+wtok, "AX_POOL=acme"),
		filepath.Join(dir, "dist", "test", "e2e-worker.js"))
	f.waitPlaceable()
	acme := map[string]string{"class": "acme"}

	// A task of team-a placed in us-east-1, and one handed off to it from eu-west-1.
	local, where := f.submit("us-east-1", tokSubmitterA, map[string]any{"type": "ts.resize", "tags": acme, "payload": map[string]int{"width": 640}})
	if where != "us-east-1" {
		t.Fatalf("team-a's task placed in %s, want us-east-1 (pool acme)", where)
	}
	h := f.handedOffTask("eu-west-1", "us-east-1", tokSubmitterA, map[string]any{"type": "ts.resize", "tags": acme, "payload": map[string]int{"width": 100}})
	for id, want := range map[string]string{local: `{"width":320}`, h.ID: `{"width":50}`} {
		tk := f.waitState("eu-west-1", tokSubmitterA, id, task.Success, 30*time.Second)
		if tk.Result != want {
			t.Fatalf("task %s: result %q, want %q", id, tk.Result, want)
		}
	}

	heyAPIClient(t, f, dir)

	// team-b's task cannot be placed on team-a's pool; if a submit were
	// accepted, the TS worker must still never run it.
	code, body := f.call("us-east-1", tokSubmitterB, http.MethodPost, "/v1/tasks",
		map[string]any{"type": "ts.resize", "tags": acme, "payload": map[string]int{"width": 2}})
	var globex struct {
		ID string `json:"id"`
	}
	if code == http.StatusCreated {
		_ = json.Unmarshal(body, &globex)
	} else if code != http.StatusUnprocessableEntity {
		t.Fatalf("team-b's task for team-a's pool: %d %s, want 422 (or placed elsewhere)", code, body)
	}

	// Mid-task, SIGKILL the server the worker talks to (its first URL).
	long, _ := f.submit("us-east-1", tokSubmitterA, map[string]any{"type": "ts.resize", "tags": acme, "payload": map[string]int{"width": 8, "ms": 3000}})
	waitUntil(t, 20*time.Second, "the TS worker to start "+long, func() bool { return strings.Contains(ts.log.String(), "start "+long+" ") })
	waitUntil(t, 10*time.Second, "progress 50 of "+long+" in GET", func() bool {
		tk, code := f.getTask("us-east-1", tokSubmitterA, long)
		return code == 200 && tk.Progress != nil && tk.Progress.Percent == 50
	})
	us.servers[0].kill()
	killed := time.Now()
	us.servers = us.servers[1:] // f.call and f.getTask use the survivor
	tk := f.waitState("us-east-1", tokSubmitterA, long, task.Success, 30*time.Second)
	t.Logf("team-b's submit for pool acme: %d; task %s SUCCESS %v after its server's SIGKILL", code, long, time.Since(killed).Round(time.Millisecond))
	if tk.Result != `{"width":4}` || tk.Attempts != 1 {
		t.Fatalf("task %s after its server died: result %q attempts %d, want {\"width\":4} in 1 attempt", long, tk.Result, tk.Attempts)
	}

	// SIGTERM: the worker leaves; what it ran, it ran once, all team-a's.
	ts.signal(syscall.SIGTERM)
	select {
	case <-ts.done:
	case <-time.After(15 * time.Second):
		t.Fatalf("the TS worker did not exit within 15 s of SIGTERM:\n%s", tail(ts.log.String(), 3000))
	}
	out := ts.log.String()
	if !strings.Contains(out, "ts worker stopped") || ts.cmd.ProcessState.ExitCode() != 0 {
		t.Fatalf("the TS worker did not stop cleanly (exit %d):\n%s", ts.cmd.ProcessState.ExitCode(), tail(out, 3000))
	}
	starts := regexp.MustCompile(`(?m)^start (\S+) attempt=\d+ tenant=(\S+)$`).FindAllStringSubmatch(out, -1)
	ran := map[string]int{}
	for _, m := range starts {
		if m[2] != "team-a" {
			t.Errorf("the TS worker ran task %s of tenant %s", m[1], m[2])
		}
		ran[m[1]]++
	}
	want := map[string]int{local: 1, h.ID: 1, long: 1}
	if fmt.Sprint(ran) != fmt.Sprint(want) {
		t.Fatalf("the TS worker ran %v, want each of %v once:\n%s", ran, want, tail(out, 3000))
	}
	if globex.ID != "" {
		if gt, _ := f.getTask("us-east-1", tokSubmitterB, globex.ID); gt.State == task.Success {
			t.Fatalf("team-b's task %s ran (state %s)", globex.ID, gt.State)
		}
	}
}

// heyAPIClient runs dist/test/e2e-heyapi.js, a client generated by
// @hey-api/openapi-ts from httpapi/openapi.json: through eu-west-1's API as
// team-a's submitter it submits a task for us-east-1, gets it until SUCCESS,
// lists it, and reads a 400's code, message and field. The task was handed
// off: eu-west-1's store holds it HANDED_OFF to us-east-1, whose store
// holds it SUCCESS.
func heyAPIClient(t *testing.T, f *federation, dir string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(dir, "dist", "test", "e2e-heyapi.js"))
	cmd.Env = append(baseEnv(), "AX_URL="+f.region("eu-west-1").servers[0].api, "AX_TOKEN="+f.token(tokSubmitterA), "AX_TO=us-east-1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the hey-api client: %v\n%s", err, tail(string(out), 4000))
	}
	var got struct {
		ID, State string
		Error     struct{ Code, Message, Field string }
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("the hey-api client's output: %v\n%s", err, out)
	}
	home, err := f.region("eu-west-1").store.Get(ctx, got.ID)
	if err != nil || home.State != task.HandedOff || home.HandedOffTo != "us-east-1" {
		t.Fatalf("the hey-api client's task %s: eu-west-1 holds %s to %q (%v), want HANDED_OFF to us-east-1", got.ID, home.State, home.HandedOffTo, err)
	}
	if ran, err := f.region("us-east-1").store.Get(ctx, got.ID); err != nil || ran.State != task.Success {
		t.Fatalf("the hey-api client's task %s in us-east-1: %s (%v), want SUCCESS", got.ID, ran.State, err)
	}
	t.Logf("hey-api client: task %s handed off to us-east-1, %s; 400 %s on %s", got.ID, got.State, got.Error.Code, got.Error.Field)
}
