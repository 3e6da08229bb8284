package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// pySDKDir is clients/python, the Python SDK's project.
var pySDKDir = filepath.Join("..", "..", "clients", "python")

// pyVenv is one venv per test binary with the Python SDK installed as a
// user installs it: pip, from the project directory, offline (no index, no
// build isolation: the package builds with the standard library alone).
var pyVenv struct {
	once   sync.Once
	python string
	err    error
}

// pythonSDK is the venv's python with axsched installed; the test fails
// when python3 or its venv module (Debian: python3-venv) is missing.
func pythonSDK(t *testing.T) string {
	t.Helper()
	pyVenv.once.Do(func() { pyVenv.python, pyVenv.err = installPythonSDK() })
	if pyVenv.err != nil {
		t.Fatal(pyVenv.err)
	}
	return pyVenv.python
}

func installPythonSDK() (string, error) {
	py, err := exec.LookPath("python3")
	if err != nil {
		return "", errors.New("python3 is not installed: the Python SDK's tests need it (make deps: apt-get install python3 python3-venv)")
	}
	if out, err := exec.Command(py, "-c", "import ensurepip, venv").CombinedOutput(); err != nil {
		return "", fmt.Errorf("python3 -m venv is unusable (make deps: apt-get install python3-venv): %v\n%s", err, out)
	}
	venv := filepath.Join(filepath.Dir(axBin), "pyvenv")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, py, "-m", "venv", venv).CombinedOutput(); err != nil {
		return "", fmt.Errorf("python3 -m venv: %v\n%s", err, out)
	}
	vpy := filepath.Join(venv, "bin", "python")
	pip := exec.CommandContext(ctx, vpy, "-m", "pip", "install", "--no-build-isolation", "--no-index", pySDKDir)
	pip.Env = pyEnv()
	if out, err := pip.CombinedOutput(); err != nil {
		return "", fmt.Errorf("pip install --no-build-isolation --no-index clients/python: %v\n%s", err, out)
	}
	return vpy, nil
}

// pyEnv is the environment of Python processes: no bytecode written into
// the source tree, no token or server of the caller's.
func pyEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AX_") && !strings.HasPrefix(kv, "PYTHON") {
			env = append(env, kv)
		}
	}
	return append(append(env, "PYTHONDONTWRITEBYTECODE=1", "PIP_DISABLE_PIP_VERSION_CHECK=1"), extra...)
}

var (
	pyRan     = regexp.MustCompile(`(?m)^Ran (\d+) tests? in`)
	pySkipped = regexp.MustCompile(`\.\.\. skipped|skipped=`)
)

// runPyTests runs unittest modules of clients/python/tests with the venv's
// python and fails unless every test ran and passed (none skipped).
func runPyTests(t *testing.T, py string, env []string, modules ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, append([]string{"-m", "unittest", "-v"}, modules...)...)
	cmd.Dir = filepath.Join(pySDKDir, "tests")
	cmd.Env = pyEnv(env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python -m unittest %s: %v\n%s", strings.Join(modules, " "), err, out)
	}
	m := pyRan.FindSubmatch(out)
	if m == nil || string(m[1]) == "0" || pySkipped.Match(out) {
		t.Fatalf("python -m unittest %s: not every test ran:\n%s", strings.Join(modules, " "), out)
	}
	t.Logf("python -m unittest %s: %s", strings.Join(modules, " "), m[0])
}

// The Python SDK (clients/python) as a user meets it: installed by pip
// into a venv, typed (py.typed installed), its unit tests (faults,
// rotation, shutdown against an in-process fake) and its tests against a
// real ax dev (auth off, no demo workers) all passing.
func TestPythonSDK(t *testing.T) {
	t.Parallel()
	py := pythonSDK(t)
	cmd := exec.Command(py, "-c", "import axsched, os; d = os.path.dirname(axsched.__file__); "+
		"print(d); print(os.path.exists(os.path.join(d, 'py.typed')))")
	cmd.Dir = os.TempDir() // not the source tree: the installed package
	cmd.Env = pyEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("import axsched: %v\n%s", err, out)
	}
	lines := strings.Fields(string(out))
	venv := filepath.Dir(filepath.Dir(py))
	if len(lines) != 2 || !strings.HasPrefix(lines[0], venv) || lines[1] != "True" {
		t.Fatalf("axsched is not installed in the venv %s with py.typed: %s", venv, out)
	}
	spec, _ := filepath.Abs(filepath.Join("..", "..", "httpapi", "openapi.json"))
	runPyTests(t, py, []string{"AX_OPENAPI=" + spec}, "test_client", "test_worker")

	d := startDev(t, "--tmp", "--no-demo-workers")
	runPyTests(t, py, []string{"AX_URL=" + d.api}, "test_live", "test_live_worker")
	t.Run("README's Python worker", func(t *testing.T) { readmePythonWorker(t, py, d.api) })
}

// readmePythonWorker runs the README's five-line Python worker as written
// (but for ax dev's port), submits the task the README submits, reads its
// result and stops the worker with SIGTERM: it exits 0.
func readmePythonWorker(t *testing.T, py, api string) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)### A Python worker against `ax dev`.*?```python\n(.*?)```").FindSubmatch(readme)
	if m == nil {
		t.Fatal("README.md has no python block under '### A Python worker against `ax dev`'")
	}
	code := string(m[1])
	if n := strings.Count(code, "\n"); n != 5 || !strings.Contains(code, defaultDevAPI) {
		t.Fatalf("the README's Python worker is %d lines, want 5 against %s:\n%s", n, defaultDevAPI, code)
	}
	file := filepath.Join(t.TempDir(), "greet.py")
	if err := os.WriteFile(file, []byte(strings.ReplaceAll(code, defaultDevAPI, api)), 0o600); err != nil {
		t.Fatal(err)
	}
	g := newProcGroup(t)
	w := g.startBin(py, "greet.py", pyEnv(), file)
	var sub struct {
		ID string `json:"id"`
	}
	resp, err := http.Post(api+"/v1/tasks", "application/json", strings.NewReader(`{"type":"greet","payload":{"name":"ada"}}`))
	if err != nil {
		t.Fatal(err)
	}
	err = json.NewDecoder(resp.Body).Decode(&sub)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || err != nil {
		t.Fatalf("submit greet: %d %v", resp.StatusCode, err)
	}
	var tk struct{ State, Result string }
	waitUntil(t, 30*time.Second, "greet "+sub.ID+" to succeed", func() bool {
		return getJSON(api+"/v1/tasks/"+sub.ID, &tk) == nil && tk.State == "SUCCESS"
	})
	if tk.Result != `"hello, ada"` {
		t.Fatalf("greet's result %q, want %q", tk.Result, `"hello, ada"`)
	}
	w.signal(syscall.SIGTERM)
	select {
	case <-w.done:
	case <-time.After(15 * time.Second):
		t.Fatalf("greet.py still runs 15 s after SIGTERM:\n%s", w.log.String())
	}
	if !w.cmd.ProcessState.Success() {
		t.Fatalf("greet.py exited %v after SIGTERM:\n%s", w.cmd.ProcessState, w.log.String())
	}
}

// defaultDevAPI is where ax dev serves its first region by default (the
// README's examples use it).
const defaultDevAPI = "http://127.0.0.1:8080"
