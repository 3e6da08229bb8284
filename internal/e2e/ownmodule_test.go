package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The README's handler in a module of its own builds as written: its
// lines after <!-- own-module --> run in a directory next to a link to
// this clone (../ax), offline where the module cache has every module of
// the new module's graph (ax's go.sum seeds the new one's), else with the
// environment's module proxy; all but the last, which starts the worker.
func TestREADMEOwnModuleHandlerBuilds(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(readme), "<!-- own-module -->\n```sh\n")
	if !ok {
		t.Fatal("README.md has no <!-- own-module --> sh block")
	}
	block, _, _ = strings.Cut(block, "```")
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(block), "\n") {
		if !strings.HasPrefix(l, "./") {
			lines = append(lines, l)
		}
	}
	if len(lines) < 4 || !strings.Contains(block, "go build") {
		t.Fatalf("the README's own-module block:\n%s", block)
	}
	dir := t.TempDir()
	if err := os.Symlink(root, filepath.Join(dir, "ax")); err != nil {
		t.Fatal(err)
	}
	// Offline: go mod tidy finds every module in the cache, and ax's
	// go.sum holds their sums (copied in once the module exists).
	// The replace names the clone by its real path, so the build reuses
	// the build cache's packages of ax (a path through the link would
	// compile them all again).
	script := strings.Join(lines, "\n")
	script = strings.Replace(script, "go mod tidy", "cp ../ax/go.sum . && go mod tidy", 1)
	script = strings.Replace(script, "github.com/ax-sched/ax=../ax", "github.com/ax-sched/ax="+root, 1)
	script = "set -e\n" + script + "\n"
	run := func(env ...string) ([]byte, error) {
		if err := os.RemoveAll(filepath.Join(dir, "greeter")); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("bash", "-c", script)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), append(env, "GOFLAGS=-mod=mod", "GOWORK=off")...)
		return cmd.CombinedOutput()
	}
	out, err := run("GOPROXY=off")
	if err != nil && strings.Contains(string(out), "module lookup disabled by GOPROXY=off") {
		// The module cache lacks a go.mod of the new module's graph that
		// building ax never needed (a fresh machine's): fetched from the
		// module proxy of the environment, as a user's go mod tidy does.
		t.Logf("offline, the module cache lacked a module; again with the module proxy:\n%s", out)
		out, err = run()
	}
	if err != nil {
		t.Fatalf("the README's own-module lines: %v\n%s\n---\n%s", err, script, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "greeter", "greeter")); err != nil {
		t.Fatalf("no greeter binary: %v", err)
	}
}
