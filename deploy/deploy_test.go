// Package deploy holds no code: its tests check the deploy artifacts next to
// them (the Dockerfile, the compose file, the Helm chart) the way each is
// used, as far as this machine allows. Docker itself (a daemon, `docker
// build`, `docker compose`) is not available where these tests run, so:
//
//   - the Dockerfile's `go build` line is run as written, in a copy of the
//     build context that .dockerignore leaves (dockerfile_test.go);
//   - the compose file is parsed and cross-checked against the region
//     configs it mounts and the Prometheus config (compose_test.go);
//   - the Helm chart is rendered with a real `helm template` (helm_test.go).
package deploy

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/ax-sched/ax/internal/config"
)

// repoRoot is the module root, one level above this directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root: %v", err)
	}
	return root
}

// run runs a command and fails the test with its output if it fails.
func run(t *testing.T, dir string, env []string, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, stderr.String())
	}
	return out
}

// readYAML decodes a YAML file into v.
func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// loadRegion runs ax's own config loader on a region file with the given
// AX_* environment, as the server or worker would see it. Every AX_
// variable of the test process is cleared first, so only env counts.
func loadRegion(t *testing.T, name string, data []byte, env map[string]string) *config.Region {
	t.Helper()
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, config.EnvPrefix+"_") {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	r, err := config.Parse(name, data)
	if err != nil {
		t.Fatalf("ax config validation: %v", err)
	}
	return r
}

// built is the ax binary axBinary builds, once for the whole package run
// (each build links the whole server); TestMain removes its directory.
var built struct {
	once     sync.Once
	dir, bin string
	err      error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// axBinary returns the path of an ax binary: make test's (AX_TEST_BIN,
// built once for every suite), else cmd/ax built once into a temp dir.
func axBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("AX_TEST_BIN"); bin != "" {
		return bin
	}
	root := repoRoot(t)
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "ax-deploy-test-"); built.err != nil {
			return
		}
		bin := filepath.Join(built.dir, "ax")
		cmd := exec.Command("go", "build", "-o", bin, "./cmd/ax")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build ./cmd/ax: %v\n%s", err, out)
			return
		}
		built.bin = bin
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.bin
}

// axFlags lists the long flags `ax <sub> --help` documents, global ones
// included.
func axFlags(t *testing.T, bin, sub string) map[string]bool {
	t.Helper()
	help := string(run(t, "", nil, bin, sub, "--help"))
	flags := map[string]bool{}
	for _, w := range strings.Fields(help) {
		if name, ok := strings.CutPrefix(strings.TrimSuffix(w, ","), "--"); ok && name != "" {
			flags[name] = true
		}
	}
	if !flags["config"] {
		t.Fatalf("ax %s --help lists no --config:\n%s", sub, help)
	}
	return flags
}

// checkAxArgs checks argv (after the binary) of an ax server or worker:
// a known subcommand, only flags it has, each with a value. It returns the
// subcommand and the flags' values.
func checkAxArgs(t *testing.T, where string, flags map[string]map[string]bool, argv []string) (string, map[string]string) {
	t.Helper()
	if len(argv) == 0 || flags[argv[0]] == nil {
		t.Fatalf("%s: command %q: want ax server or ax worker", where, argv)
	}
	sub, vals := argv[0], map[string]string{}
	for i := 1; i < len(argv); i++ {
		name, ok := strings.CutPrefix(argv[i], "--")
		if !ok {
			t.Errorf("%s: %q is not a flag (ax %s takes no arguments)", where, argv[i], sub)
			continue
		}
		name, val, hasVal := strings.Cut(name, "=")
		if !flags[sub][name] {
			t.Errorf("%s: ax %s has no flag --%s", where, sub, name)
		}
		if !hasVal {
			if i+1 >= len(argv) {
				t.Errorf("%s: --%s has no value", where, name)
				continue
			}
			val = argv[i+1]
			i++
		}
		vals[name] = val
	}
	return sub, vals
}
