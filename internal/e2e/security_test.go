package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/task"
)

// Finding 1 of issue 11: an allowlisted printenv-style command returned the
// worker's environment, cluster token and Redis password included. The
// workers here get the servers' whole environment (one env file for both,
// as many deployments do); a task handed to the other region runs env, in a
// rule that succeeds and in one that fails with its output in the error,
// and neither shows a secret.
func TestExecChildrenDoNotSeeTheWorkersSecrets(t *testing.T) {
	fed := newFederation(t, fedOpts{sharedEnv: true, worker: `
exec:
  allow:
    printenv: {argv: [env], env: [LANG=C]}
    printenv-fail: {argv: [sh, -c, "env; exit 3"]}
`})
	ok := fed.handedOffTask("us-east-1", "eu-west-1", tokSubmitterA, map[string]any{
		"type": "exec", "payload": map[string]any{"command": "printenv"}})
	failed := fed.handedOffTask("us-east-1", "eu-west-1", tokSubmitterA, map[string]any{
		"type": "exec", "max_retries": 0, "payload": map[string]any{"command": "printenv-fail"}})
	tk := fed.waitState("us-east-1", tokSubmitterA, ok.ID, task.Success, 20*time.Second)
	// The store keeps the result on one line.
	if !strings.Contains(tk.Result, "AX_TASK_ID="+ok.ID) || !strings.Contains(tk.Result, "LANG=C") {
		t.Fatalf("the command's environment lacks what its rule names: %q", tk.Result)
	}
	tf := fed.waitState("us-east-1", tokSubmitterA, failed.ID, task.Failed, 20*time.Second)
	if !strings.Contains(tf.LastError, "exit status 3") || !strings.Contains(tf.LastError, "AX_TASK_ID="+failed.ID) {
		t.Fatalf("the failed command's error: %q", tf.LastError)
	}
	for what, secret := range fed.secrets() {
		for _, s := range []string{tk.Result, tf.LastError} {
			if strings.Contains(s, secret) {
				t.Fatalf("a task's output shows the %s: %q", what, s)
			}
		}
	}
	for _, name := range []string{"AX_REDIS_PASSWORD", "AX_AUTH_CLUSTER_TOKEN", "HOME=", "PATH="} {
		if strings.Contains(tk.Result, name) {
			t.Fatalf("the command's environment has %s, which its rule does not name: %q", name, tk.Result)
		}
	}
}
