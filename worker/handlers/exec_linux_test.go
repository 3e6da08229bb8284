package handlers_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ax-sched/ax/task"
	"github.com/ax-sched/ax/worker"
	"github.com/ax-sched/ax/worker/handlers"
	wt "github.com/ax-sched/ax/worker/internal/workertest"
)

// The test-only rules record the pids of the shell (the group leader, so
// also the group id) and of a child it starts in the background.
var testRules = map[string]handlers.ExecRule{
	"echo": {Argv: []string{"echo", "{{.msg}}"}},
	"greet": {
		Argv: []string{"sh", "-c", `printf '%s|%s' "$1" "$GREETING"`, "sh", "{{.name}}"},
		Env:  []string{"GREETING=hi {{.name}}"},
	},
	"fail": {Argv: []string{"sh", "-c", "echo partial; echo oops >&2; exit 3"}},
	"sleepy": {Argv: []string{"sh", "-c", `echo $$ > "$1"; sleep 30 & echo $! > "$2"; sleep 30`,
		"sh", "{{.pidfile}}", "{{.childfile}}"}},
	// Ignores SIGTERM (and so do its children): only SIGKILL ends it.
	"stubborn": {Argv: []string{"sh", "-c", `trap "" TERM; echo $$ > "$1"; sleep 30 & echo $! > "$2"; wait`,
		"sh", "{{.pidfile}}", "{{.childfile}}"}, KillGrace: 300 * time.Millisecond},
	// Exits at once, leaving a child behind in its group.
	"leftover":    {Argv: []string{"sh", "-c", `sleep 30 & echo $! > "$1"; echo done`, "sh", "{{.childfile}}"}},
	"ruletimeout": {Argv: []string{"sleep", "30"}, Timeout: 300 * time.Millisecond},
}

func TestExec(t *testing.T) {
	e := wt.New(t)
	e.Leader()
	run, err := handlers.Exec(testRules)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	runtimes := map[string]time.Duration{}
	ran := func(id string) time.Duration { mu.Lock(); defer mu.Unlock(); return runtimes[id] }
	w := e.Worker(worker.Options{Concurrency: 8, OnFinish: func(t *worker.Task, _ task.State, rt time.Duration) {
		mu.Lock()
		runtimes[t.ID] = rt
		mu.Unlock()
	}})
	w.Handle("exec", run)
	e.Run(w)
	dir := t.TempDir()
	files := func(name string) map[string]any {
		return map[string]any{"pidfile": filepath.Join(dir, name+".pid"), "childfile": filepath.Join(dir, name+".child")}
	}
	submit := func(cmd string, args map[string]any, mod ...func(*task.Spec)) string {
		return e.SubmitOne("exec", map[string]any{"command": cmd, "args": args}, mod...)
	}
	// Start the slow ones first; they run side by side with the rest.
	// A retry, so the timeout shows as its own trail step (the last
	// attempt's records only RETRIES_EXHAUSTED).
	sleepy := submit("sleepy", files("sleepy"), wt.Timeout(500*time.Millisecond), wt.Retries(1), wt.FastRetry)
	stubborn := submit("stubborn", files("stubborn"), wt.Timeout(500*time.Millisecond), wt.Retries(0))
	leftover := submit("leftover", files("leftover"))

	t.Run("allowlisted echo gets its argument from the payload", func(t *testing.T) {
		tk := e.WaitState(submit("echo", map[string]any{"msg": "hello world"}), task.Success, 5*time.Second)
		// The store keeps results on one line (queue's clean: \n → space).
		if tk.Result != "hello world\n" {
			t.Fatalf("result %q", tk.Result)
		}
		tk = e.WaitState(submit("echo", map[string]any{"msg": 42.5}), task.Success, 5*time.Second)
		if tk.Result != "42.5\n" {
			t.Fatalf("result %q", tk.Result)
		}
	})
	t.Run("payload text never reaches a shell", func(t *testing.T) {
		evil := `$(touch ` + filepath.Join(dir, "pwned") + `); x`
		tk := e.WaitState(submit("greet", map[string]any{"name": evil}), task.Success, 5*time.Second)
		if tk.Result != evil+"|hi "+evil {
			t.Fatalf("result %q", tk.Result)
		}
		if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
			t.Fatal("the payload was run by a shell")
		}
	})
	for _, c := range []struct {
		name, cmd string
		args      map[string]any
		want      string
	}{
		{"command not in the allowlist", "rm", map[string]any{"msg": "x"}, `exec: command "rm" is not in this worker's allowlist`},
		{"placeholder missing", "echo", map[string]any{}, `payload args lack "msg"`},
		{"placeholder not a string or number", "echo", map[string]any{"msg": map[string]any{"a": 1}}, "args.msg must be a string or a number"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tk := e.WaitState(submit(c.cmd, c.args), task.Failed, 5*time.Second)
			if tk.Reason != task.ReasonNonRetryable || tk.Attempts != 1 || !strings.Contains(tk.LastError, c.want) {
				t.Fatalf("got %s after %d attempts: %q, want NON_RETRYABLE with %q", tk.Reason, tk.Attempts, tk.LastError, c.want)
			}
		})
	}
	t.Run("non-zero exit is retried, with the output's tail", func(t *testing.T) {
		id := submit("fail", nil, wt.Retries(1), wt.FastRetry)
		tk := e.WaitState(id, task.Failed, 5*time.Second)
		if tk.Reason != task.ReasonRetriesExhausted || tk.Attempts != 2 ||
			!strings.Contains(tk.LastError, "exit status 3") || !strings.HasSuffix(tk.LastError, "oops ") {
			t.Fatalf("got %s after %d attempts: %q", tk.Reason, tk.Attempts, tk.LastError)
		}
	})
	t.Run("the rule's own timeout", func(t *testing.T) {
		tk := e.WaitState(submit("ruletimeout", nil, wt.Retries(0)), task.Failed, 5*time.Second)
		if !strings.Contains(tk.LastError, "killed after the rule's timeout of 300ms") {
			t.Fatalf("error %q", tk.LastError)
		}
	})
	t.Run("a timed-out command's process group is gone", func(t *testing.T) {
		tk := e.WaitState(sleepy, task.Failed, 5*time.Second)
		if e.Step(sleepy, task.ReasonDeadline) == nil {
			t.Fatalf("task %+v: want a DEADLINE_EXCEEDED step", tk)
		}
		settled(t, w, sleepy)
		if rt := ran(sleepy); rt > 800*time.Millisecond {
			t.Fatalf("ran %v: SIGTERM should have ended it right after the 500ms timeout", rt)
		}
		checkGone(t, files("sleepy"))
	})
	t.Run("SIGKILL after the grace for a group that ignores SIGTERM", func(t *testing.T) {
		e.WaitState(stubborn, task.Failed, 5*time.Second)
		settled(t, w, stubborn)
		// The deadline counts from the claim's Redis time, a few ms before
		// the handler starts: the run can be a little under 500+300 ms.
		if rt := ran(stubborn); rt < 750*time.Millisecond || rt > 2*time.Second {
			t.Fatalf("ran %v: want the 500ms timeout plus the 300ms kill grace", rt)
		}
		checkGone(t, files("stubborn"))
	})
	t.Run("what a finished command left running is stopped", func(t *testing.T) {
		tk := e.WaitState(leftover, task.Success, 5*time.Second)
		if tk.Result != "done\n" || tk.FinishedAt.Sub(*tk.StartedAt) > 3*time.Second {
			t.Fatalf("task %+v", tk)
		}
		checkGone(t, map[string]any{"childfile": files("leftover")["childfile"]})
	})
}

func TestExecRulesAreChecked(t *testing.T) {
	for _, c := range []struct {
		name string
		rule handlers.ExecRule
		want string
	}{
		{"no program", handlers.ExecRule{}, "needs a program"},
		{"templated program", handlers.ExecRule{Argv: []string{"{{.prog}}"}}, "may not be a template"},
		{"bad template", handlers.ExecRule{Argv: []string{"echo", "{{.msg"}}, "unclosed action"},
		{"bad env name", handlers.ExecRule{Argv: []string{"env"}, Env: []string{"A-B=x"}}, "not an environment variable name"},
		{"empty env name", handlers.ExecRule{Argv: []string{"env"}, Env: []string{"=x"}}, "not an environment variable name"},
		{"worker's own env name", handlers.ExecRule{Argv: []string{"env"}, Env: []string{"AX_REDIS_PASSWORD"}}, "names starting with AX_ are the worker's own"},
		{"task's env name", handlers.ExecRule{Argv: []string{"env"}, Env: []string{"ax_task_id=x"}}, "names starting with AX_ are the worker's own"},
		{"env twice", handlers.ExecRule{Argv: []string{"env"}, Env: []string{"LANG=C", "LANG"}}, `exec: rule "x": env[1]: LANG is already env[0]`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := handlers.Exec(map[string]handlers.ExecRule{"x": c.rule})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
		})
	}
}

// settled waits until the worker has recorded (or dropped) task id: its
// handler has returned, so the command is over.
func settled(t *testing.T, w *worker.Worker, id string) {
	t.Helper()
	wt.Eventually(t, 10*time.Second, "task "+id+" settled by the worker", func() bool { return w.Stats().InFlight == 0 })
}

// checkGone checks that no process recorded in the pid files runs any more
// and that, once reaped, kill(2) finds neither them nor their group.
func checkGone(t *testing.T, files map[string]any) {
	t.Helper()
	for kind, f := range files {
		b, err := os.ReadFile(f.(string))
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		if running(pid) {
			t.Fatalf("%s %d still runs", kind, pid)
		}
		target := pid
		if kind == "pidfile" {
			target = -pid // the leader's pid is the group id
		}
		// Orphans are reaped by init, in its own time.
		wt.Eventually(t, 10*time.Second, "kill(2) gives ESRCH for "+strconv.Itoa(target), func() bool {
			return errors.Is(syscall.Kill(target, 0), syscall.ESRCH)
		})
	}
}

// running reports whether pid exists and is not a zombie.
func running(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	f := bytes.Fields(b[i+1:])
	return len(f) > 0 && f[0][0] != 'Z' && f[0][0] != 'X'
}

// A command sees only the variables its rule names, never the worker's
// secrets: the finding was an allowlisted printenv that returned the
// cluster token and the Redis password.
func TestExecEnvironmentIsOnlyWhatTheRuleNames(t *testing.T) {
	t.Setenv("AX_AUTH_CLUSTER_TOKEN", "cluster-token-0123456789")
	t.Setenv("AX_REDIS_PASSWORD", "redis-password-0123456789")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "aws-secret-0123456789")
	t.Setenv("PASSED_THROUGH", "from the worker")
	os.Unsetenv("NOT_SET_ON_THE_WORKER")
	run, err := handlers.Exec(map[string]handlers.ExecRule{
		"printenv": {Argv: []string{"env"}, Env: []string{"LANG=C", "GREETING=hi {{.name}}", "PASSED_THROUGH", "NOT_SET_ON_THE_WORKER"}},
		"bare":     {Argv: []string{"env"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		command string
		want    []string
	}{
		{"printenv", []string{"AX_ATTEMPT=2", "AX_TASK_ID=t1", "AX_TASK_TYPE=exec", "AX_TRACE_ID=0123456789abcdef0123456789abcdef",
			"GREETING=hi ann", "LANG=C", "PASSED_THROUGH=from the worker"}},
		{"bare", []string{"AX_ATTEMPT=2", "AX_TASK_ID=t1", "AX_TASK_TYPE=exec", "AX_TRACE_ID=0123456789abcdef0123456789abcdef"}},
	} {
		t.Run(c.command, func(t *testing.T) {
			tk := &worker.Task{ID: "t1", Type: "exec", Attempt: 2, TraceID: "0123456789abcdef0123456789abcdef",
				Payload: []byte(`{"command":"` + c.command + `","args":{"name":"ann"}}`)}
			if err := run(context.Background(), tk); err != nil {
				t.Fatal(err)
			}
			got := strings.Split(strings.TrimSpace(tk.Result()), "\n")
			sort.Strings(got)
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Fatalf("environment (-want +got):\n%s", diff)
			}
		})
	}
}
