package e2e

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// tsSDK is clients/typescript, installed (npm ci) and built (tsc) once per
// test binary: its dist/ holds the SDK and the test programs run here.
var tsSDK struct {
	once sync.Once
	err  string
}

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
	tsSDK.once.Do(func() {
		for _, args := range [][]string{{"ci", "--no-audit", "--no-fund"}, {"run", "build"}} {
			cmd := exec.Command("npm", args...)
			cmd.Dir, cmd.Env = dir, baseEnv()
			if out, err := cmd.CombinedOutput(); err != nil {
				tsSDK.err = "npm " + strings.Join(args, " ") + ": " + err.Error() + "\n" + tail(string(out), 4000)
				return
			}
		}
	})
	if tsSDK.err != "" {
		t.Fatal(tsSDK.err)
	}
	return dir
}

// TestTypeScriptSDK runs clients/typescript's own tests (npm test): the types
// checked against httpapi/openapi.json, unit tests against an in-process fake
// server, and the client and worker against a real `ax dev` of this build.
func TestTypeScriptSDK(t *testing.T) {
	dir := typescriptSDK(t)
	cmd := exec.Command("npm", "test")
	cmd.Dir, cmd.Env = dir, append(baseEnv(), "AX_BIN="+axBin)
	out, err := cmd.CombinedOutput()
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
