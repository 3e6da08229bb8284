package e2e

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ax-sched/ax/task"
)

// An allowlisted printenv-style command does not see the worker's secrets
// (cluster token, Redis password). The workers here get the servers' whole environment (one env file for both,
// as many deployments do); a task handed to the other region runs env, in a
// rule that succeeds and in one that fails with its output in the error,
// and neither shows a secret.
func TestExecChildrenDoNotSeeTheWorkersSecrets(t *testing.T) {
	t.Parallel()
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

// Template values are guarded. Through real servers and workers, on tasks handed to the other region: --output=…
// is refused NON_RETRYABLE before sort runs (the file is not created),
// ../../../etc/passwd is refused before cat runs; a plain value still runs.
// A command not allowed is refused without the allowlist in its error.
func TestExecTemplateValuesAreRefused(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	if err := os.WriteFile(filepath.Join(data, "ok.txt"), []byte("fine\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fed := newFederation(t, fedOpts{worker: fmt.Sprintf(`
exec:
  allow:
    sort: {argv: [sort, "{{.file}}"]}
    cat: {argv: [cat, "%s/{{.file}}"]}
`, data)})
	out := filepath.Join(t.TempDir(), "x")
	for _, c := range []struct {
		command, file, refused string
	}{
		{"sort", "--output=" + out, `exec sort: args.file "--output=`},
		{"cat", "../../../../../../../../etc/passwd", `exec cat: args.file "../../../../../../../../etc/passwd" contains ".."`},
	} {
		h := fed.handedOffTask("us-east-1", "eu-west-1", tokSubmitterA, map[string]any{
			"type": "exec", "payload": map[string]any{"command": c.command, "args": map[string]string{"file": c.file}}})
		tk := fed.waitState("us-east-1", tokSubmitterA, h.ID, task.Failed, 20*time.Second)
		if tk.Reason != task.ReasonNonRetryable || tk.Attempts != 1 || !strings.Contains(tk.LastError, c.refused) {
			t.Fatalf("%s %q: %s after %d attempts: %q, want NON_RETRYABLE with %q", c.command, c.file, tk.Reason, tk.Attempts, tk.LastError, c.refused)
		}
		if strings.Contains(tk.LastError, "root:") {
			t.Fatalf("the error shows /etc/passwd: %q", tk.LastError)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("sort --output created %s (stat: %v)", out, err)
	}
	// A command outside the allowlist is refused naming it,
	// never listing what is allowed.
	h0 := fed.handedOffTask("us-east-1", "eu-west-1", tokSubmitterA, map[string]any{
		"type": "exec", "payload": map[string]any{"command": "rm", "args": map[string]string{"file": "ok.txt"}}})
	if tk := fed.waitState("us-east-1", tokSubmitterA, h0.ID, task.Failed, 20*time.Second); tk.Reason != task.ReasonNonRetryable ||
		!strings.Contains(tk.LastError, "rm") || strings.Contains(tk.LastError, "sort") || strings.Contains(tk.LastError, data) {
		t.Fatalf("a command outside the allowlist: %s %q, want NON_RETRYABLE naming rm and nothing allowed", tk.Reason, tk.LastError)
	}
	h := fed.handedOffTask("us-east-1", "eu-west-1", tokSubmitterA, map[string]any{
		"type": "exec", "payload": map[string]any{"command": "cat", "args": map[string]string{"file": "ok.txt"}}})
	if tk := fed.waitState("us-east-1", tokSubmitterA, h.ID, task.Success, 20*time.Second); tk.Result != "fine " && tk.Result != "fine\n" {
		t.Fatalf("cat ok.txt: result %q", tk.Result)
	}
}

// The http handler checks its URL prefix on the cleaned path, so
// "<prefix>../admin", "%2e%2e" and "..%2f" reach no path outside it.
// Through real servers and workers, on tasks handed to the other
// region, each is refused NON_RETRYABLE and the hook server never sees a
// path outside /hooks/; a URL under the prefix still succeeds. With
// deny_private on (the default), a prefix host that resolves to loopback
// is refused when connecting.
func TestHTTPTargetsAreCleanedAndChecked(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var paths []string
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.EscapedPath())
		mu.Unlock()
		_, _ = io.WriteString(w, "hooked "+r.URL.EscapedPath())
	}))
	defer hook.Close()
	seen := func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), paths...) }
	prefix := hook.URL + "/hooks/"

	t.Run("traversal", func(t *testing.T) {
		fed := newFederation(t, fedOpts{worker: fmt.Sprintf("http: {allow_prefixes: [%q], deny_private: false}\n", prefix)})
		for _, url := range []string{prefix + "../admin", prefix + "%2e%2e/admin", prefix + "..%2fadmin", prefix + "%2E%2E%2Fadmin"} {
			h := fed.handedOffTask("us-east-1", "eu-west-1", tokSubmitterA, map[string]any{
				"type": "http", "payload": map[string]any{"url": url, "body": map[string]int{"n": 1}}})
			tk := fed.waitState("us-east-1", tokSubmitterA, h.ID, task.Failed, 20*time.Second)
			if tk.Reason != task.ReasonNonRetryable || !strings.Contains(tk.LastError, "not under an allowed prefix: "+hook.URL+"/admin") {
				t.Fatalf("%s: %s %q, want NON_RETRYABLE, not under an allowed prefix", url, tk.Reason, tk.LastError)
			}
		}
		if got := seen(); len(got) != 0 {
			t.Fatalf("the hook server saw %q", got)
		}
		h := fed.handedOffTask("us-east-1", "eu-west-1", tokSubmitterA, map[string]any{
			"type": "http", "payload": map[string]any{"url": prefix + "a/./b/../ok", "body": map[string]int{"n": 1}}})
		if tk := fed.waitState("us-east-1", tokSubmitterA, h.ID, task.Success, 20*time.Second); tk.Result != "hooked /hooks/a/ok" {
			t.Fatalf("result %q", tk.Result)
		}
	})
	t.Run("deny_private", func(t *testing.T) {
		local := strings.Replace(prefix, "127.0.0.1", "localhost", 1)
		fed := newFederation(t, fedOpts{worker: fmt.Sprintf("http: {allow_prefixes: [%q]}\n", local)})
		before := len(seen())
		h := fed.handedOffTask("us-east-1", "eu-west-1", tokSubmitterA, map[string]any{
			"type": "http", "payload": map[string]any{"url": local + "x", "body": map[string]int{"n": 1}}})
		tk := fed.waitState("us-east-1", tokSubmitterA, h.ID, task.Failed, 20*time.Second)
		if tk.Reason != task.ReasonNonRetryable || !strings.Contains(tk.LastError, "is a loopback address") {
			t.Fatalf("%s %q, want NON_RETRYABLE, a loopback address", tk.Reason, tk.LastError)
		}
		if got := seen(); len(got) != before {
			t.Fatalf("the hook server was reached: %q", got[before:])
		}
	})
}
