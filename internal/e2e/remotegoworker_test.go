package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ax-sched/ax/task"
)

// The Go remote worker as a user runs it: `ax worker --api` with two
// servers' URLs and a worker token scoped to team-a's pool, no Redis
// settings. It runs a task handed off from the other region, and when the
// server it talks to is SIGKILLed mid-task it moves to the other server and
// the task ends SUCCESS after exactly one attempt.
func TestRemoteGoWorker(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a two-region federation")
	}
	t.Parallel()
	wtok := "wtok-" + randomHex(16)
	f := newFederation(t, fedOpts{servers: 2, noWorkers: true,
		pools:  map[string]string{"us-east-1": "- {name: cpu, tenants: [team-a], tags: {class: cpu}, slots: 8, price_per_slot_hour: 0.04}"},
		tokens: fmt.Sprintf("- {name: team-a-workers, token_sha256: %s, role: worker, tenants: [team-a], pools: [cpu]}", sha256Hex(wtok))})
	f.startWorker("eu-west-1", "cpu")
	us := f.region("us-east-1")
	tokenFile := filepath.Join(t.TempDir(), "worker-token")
	if err := os.WriteFile(tokenFile, []byte(wtok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	remote := f.procs.start("us-east-1/remote-go", baseEnv(), "worker", "--api", us.servers[0].api+","+us.servers[1].api,
		"--token-file", tokenFile, "--pool", "cpu", "--concurrency", "4", "--id", "remote-go-1")
	f.waitPlaceable()

	t.Run("handed off", func(t *testing.T) {
		h := f.handedOffTask("eu-west-1", "us-east-1", tokSubmitterA, map[string]any{"type": "noop"})
		f.waitState("us-east-1", tokSubmitterA, h.ID, task.Success, 20*time.Second)
	})

	t.Run("server killed mid-task", func(t *testing.T) {
		id, where := f.submit("us-east-1", tokSubmitterA, map[string]any{"type": "sleep", "payload": map[string]int{"ms": 3000},
			"tags": map[string]string{"class": "cpu"}, "regions": []string{"us-east-1"}})
		if where != "us-east-1" {
			t.Fatalf("placed in %s", where)
		}
		f.waitState("us-east-1", tokSubmitterA, id, task.Running, 10*time.Second)
		us.servers[0].kill() // the one the worker talks to first
		var tk task.Task
		waitUntil(t, 30*time.Second, "the task to end after the server died", func() bool {
			code, body := f.callAPI(us.servers[1].api, tokSubmitterA, http.MethodGet, "/v1/tasks/"+id, nil)
			return code == 200 && json.Unmarshal(body, &tk) == nil && tk.State.Terminal()
		})
		if tk.State != task.Success || tk.Attempts != 1 {
			t.Fatalf("task %s: %s after %d attempts (reason %s, error %q), want SUCCESS after exactly one\nworker log:\n%s",
				id, tk.State, tk.Attempts, tk.Reason, tk.LastError, tail(remote.log.String(), 3000))
		}
	})
}
