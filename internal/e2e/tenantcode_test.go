package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/task"
)

// snoopScript is what a hostile tenant's command tries: the worker's
// environment block and memory through /proc, the worker's config and
// password files ($1, $2), and its own environment.
const snoopScript = `echo "uid=$(id -u)"
echo "== environ"; cat /proc/$PPID/environ 2>&1 | tr '\0' '\n' | grep -a -e '^AX_' -e denied
echo "== mem"; head -c 1 /proc/$PPID/mem 2>&1 | grep -a denied
echo "== config"; cat "$1" 2>&1 | grep -a -e denied -e password -e token
echo "== password file"; cat "$2" 2>&1
echo "== env"; env
true`

// A tenant's exec job, on a federation with auth on, cannot read a secret
// of the worker that runs it. Both workers are given the cluster token in
// their environment (a careless env file shared with the servers).
//
//   - us-east-1's worker reads its Redis password from a file
//     (AX_REDIS_PASSWORD_FILE) and runs commands as nobody
//     (worker.exec.run_as): /proc/<worker>/environ and mem, the config and
//     the password file are all refused to the job.
//   - eu-west-1's worker takes the password from AX_REDIS_PASSWORD and runs
//     commands as its own user (root here, so /proc is open to them): the
//     worker overwrote the secrets' values in its environment block at
//     start, so /proc/<worker>/environ shows stars.
func TestTenantCodeReadsNoWorkerSecret(t *testing.T) {
	t.Parallel()
	secrets := t.TempDir()
	pwFile := filepath.Join(secrets, "redis-password")
	rule := func(runAs, cfg, pw string) string {
		return fmt.Sprintf("exec:\n  run_as: %q\n  allow:\n    snoop: {argv: [sh, -c, %q, sh, %q, %q], env: [PATH]}\n",
			runAs, snoopScript, cfg, pw)
	}
	fed := newFederation(t, fedOpts{noWorkers: true})
	// The rules name the config files, which exist only now. A root job
	// reads any root file: eu-west-1's gets no password file to try.
	for name, c := range map[string][2]string{"us-east-1": {"nobody", pwFile}, "eu-west-1": {"", "/dev/null"}} {
		r := fed.region(name)
		fed.opts.regionWorker = map[string]string{name: rule(c[0], r.cfgPath, c[1])}
		if err := os.WriteFile(r.cfgPath, []byte(fed.config(r)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	east, west := fed.region("us-east-1"), fed.region("eu-west-1")
	if err := os.WriteFile(pwFile, []byte(east.password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fed.procs.start("us-east-1/worker", append(baseEnv(), "AX_REDIS_PASSWORD_FILE="+pwFile, "AX_AUTH_CLUSTER_TOKEN="+fed.cluster),
		"worker", "--config", east.cfgPath, "--pool", "cpu", "--id", "us-east-1-cpu-w1")
	fed.procs.start("eu-west-1/worker", fed.serverEnv(west),
		"worker", "--config", west.cfgPath, "--pool", "cpu", "--id", "eu-west-1-cpu-w1")
	fed.waitPlaceable()

	snoop := func(region string) task.Task {
		id, where := fed.submit("us-east-1", tokSubmitterA, map[string]any{"type": "exec", "regions": []string{region},
			"tags": map[string]string{"class": "cpu"}, "max_retries": 0, "payload": map[string]any{"command": "snoop"}})
		if where != region {
			t.Fatalf("task %s placed in %s, want %s", id, where, region)
		}
		return fed.waitState("us-east-1", tokSubmitterA, id, task.Success, 30*time.Second)
	}
	all := fed.secrets()
	check := func(region, out string, want ...string) {
		t.Helper()
		for what, s := range all {
			if strings.Contains(out, s) {
				t.Errorf("%s: the job read the %s:\n%s", region, what, out)
			}
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: the job's output lacks %q:\n%s", region, w, out)
			}
		}
	}
	out := snoop("us-east-1").Result
	check("us-east-1", out, "uid=65534", "/environ: Permission denied", east.cfgPath+": Permission denied",
		pwFile+": Permission denied")
	if n := strings.Count(out, "Permission denied"); n != 4 {
		t.Errorf("us-east-1: %d of environ, mem, config and password file refused, want 4:\n%s", n, out)
	}
	if strings.Contains(out, "AX_REDIS") || strings.Contains(out, "AX_AUTH") {
		t.Errorf("us-east-1: the job saw the worker's AX_ variables:\n%s", out)
	}
	out = snoop("eu-west-1").Result
	check("eu-west-1", out, "uid=0", "AX_REDIS_PASSWORD=****", "AX_AUTH_CLUSTER_TOKEN=****")
}
