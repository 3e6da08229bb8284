package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ax-sched/ax/internal/config"
	"github.com/ax-sched/ax/worker"
	"github.com/ax-sched/ax/worker/handlers"
)

// runAsAx makes the test binary run main() instead of the tests: the
// tests below start it as ax, in a process of its own.
const runAsAx = "GO_TEST_RUN_AX_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runAsAx) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// withoutAXEnv is the test's environment without any AX_ variable.
func withoutAXEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, config.EnvPrefix+"_") {
			env = append(env, kv)
		}
	}
	return env
}

// clearAXEnv unsets every AX_ variable of the test process for the test.
func clearAXEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, config.EnvPrefix+"_") {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
}

const envTestRegion = "region: r1\nauth: {enabled: false}\npools:\n  - {name: cpu, slots: 1}\n"

// ax server, worker and dev, run as the real command in a process of their
// own, refuse an AX_ variable that sets nothing the operator meant it to:
// exit status 2 and one line naming the variable and the key it
// was probably meant for. The CLI's own variables and those of an exec
// handler's command, in the same environment, are no problem.
func TestServeCommandsRefuseMistypedEnv(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r1.yaml")
	if err := os.WriteFile(path, []byte(envTestRegion), 0o600); err != nil {
		t.Fatal(err)
	}
	fine := []string{"AX_API=http://127.0.0.1:1", "AX_TOKEN=0123456789abcdef-token", "AX_OUTPUT=json", "AX_TASK_ID=t1"}
	for _, c := range []struct {
		name string
		args []string
		env  string
		code int
		line string
	}{
		{"server typo", []string{"server", "--config", path}, "AX_REDIS_ADR=10.0.0.1:6379", 2,
			"ax: " + path + ": AX_REDIS_ADR names no config key (did you mean AX_REDIS_ADDR?)"},
		{"server file-only key", []string{"server", "--config", path}, "AX_POOLS=[{name: gpu, slots: 2}]", 2,
			"ax: " + path + ": AX_POOLS cannot set pools: it comes from the file only (the environment sets single values and lists of them)"},
		{"worker typo", []string{"worker", "--config", path, "--pool", "cpu"}, "AX_LEASE_DURATON=10s", 2,
			"ax: " + path + ": AX_LEASE_DURATON names no config key (did you mean AX_LEASE_DURATION?)"},
		{"dev typo", []string{"dev", "--tmp", "--port", "0"}, "AX_AUTH_CLUSTER_TOKN=0123456789abcdef-cluster", 2,
			"ax: configs/dev/eastus.yaml: AX_AUTH_CLUSTER_TOKN names no config key (did you mean AX_AUTH_CLUSTER_TOKEN?)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], append([]string{"--settings="}, c.args...)...)
			cmd.Env = append(append(withoutAXEnv(), runAsAx+"=1", c.env), fine...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				t.Fatalf("ax %s: %v (want exit status %d)\nstderr: %s", strings.Join(c.args, " "), err, c.code, stderr.String())
			}
			if ee.ExitCode() != c.code || stderr.String() != c.line+"\n" {
				t.Errorf("exit status %d, stderr %q; want %d, %q", ee.ExitCode(), stderr.String(), c.code, c.line+"\n")
			}
		})
	}
}

// The options of ax server, worker and dev know ax's own AX_ variables:
// every command's flags, AX_LOG_FORMAT, and each variable a command run by
// the exec handler finds set (read from a real run of env). Another name is
// ignored with a warning.
func TestLoadOptionsKnowAxOwnVariables(t *testing.T) {
	clearAXEnv(t)
	run, err := handlers.Exec(map[string]handlers.ExecRule{"env": {Argv: []string{"env"}}})
	if err != nil {
		t.Fatal(err)
	}
	tk := &worker.Task{ID: "t1", Type: "exec", Attempt: 1, TraceID: "0123456789abcdef0123456789abcdef", Payload: []byte(`{"command":"env"}`)}
	if err := run(context.Background(), tk); err != nil {
		t.Fatal(err)
	}
	var fromExec int
	for _, kv := range strings.Split(strings.TrimSpace(tk.Result()), "\n") {
		if k, v, _ := strings.Cut(kv, "="); strings.HasPrefix(k, config.EnvPrefix+"_") {
			t.Setenv(k, v)
			fromExec++
		}
	}
	if fromExec == 0 {
		t.Fatalf("the exec handler's command saw no AX_ variable:\n%s", tk.Result())
	}
	for k, v := range map[string]string{
		"AX_API": "http://x", "AX_TOKEN": "t", "AX_OUTPUT": "json", "AX_TENANT": "acme", "AX_LOG_FORMAT": "text",
		"AX_CONCURRENCY": "8", "AX_METRICS": ":9101", // ax worker's flags (deploy/systemd)
		"AX_WORKER_SLOTS": "2", "AX_REDIS_SERVER": "redis-server", // flags named like a section: ax dev's, ax bench's
		"AX_SOMETHING_ELSE": "x",
	} {
		t.Setenv(k, v)
	}
	r, err := config.Parse("r1.yaml", []byte(envTestRegion), loadOptions(newRoot()))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(r.IgnoredEnv(), ","); got != "AX_SOMETHING_ELSE" {
		t.Errorf("ignored %q, want AX_SOMETHING_ELSE alone", got)
	}
	var logs bytes.Buffer
	warnIgnoredEnv(slog.New(slog.NewTextHandler(&logs, nil)), r)
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "vars=AX_SOMETHING_ELSE") {
		t.Errorf("warning %q", logs.String())
	}
	// AX_LOG_FORMAT and the flags set no config key: no line says they did.
	if strings.Contains(logs.String(), "set from the environment") {
		t.Errorf("an override line without an override: %q", logs.String())
	}
	// AX_REGION, a flag of the CLI too, renames the region: a start-up line
	// says it came from the environment (names only, never values).
	t.Setenv("AX_REGION", "r1")
	t.Setenv("AX_REDIS_PASSWORD", "s3cret")
	if r, err = config.Parse("r1.yaml", []byte(envTestRegion), loadOptions(newRoot())); err != nil {
		t.Fatal(err)
	}
	logs.Reset()
	warnIgnoredEnv(slog.New(slog.NewTextHandler(&logs, nil)), r)
	if !strings.Contains(logs.String(), `level=INFO msg="config keys set from the environment" vars=AX_REDIS_PASSWORD,AX_REGION`) ||
		strings.Contains(logs.String(), "s3cret") {
		t.Errorf("override line %q", logs.String())
	}
}
