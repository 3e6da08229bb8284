package e2e

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// holdPort listens on 127.0.0.1:port for the test, so that ax dev finds it
// taken. A port some other process holds already is just as taken: false
// then, and nothing to release.
func holdPort(t *testing.T, port string) bool {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:"+port)
	if err != nil {
		return false
	}
	t.Cleanup(func() { l.Close() })
	return true
}

// ax dev started as the README says (no --port), with its default API and
// Redis ports taken by other processes and auth asked for as
// AX_AUTH_ENABLED=true: it starts on free ports, its banner says which
// ports were taken and prints the lines to export, and the CLI run with
// just those lines reaches the first region; without the token it exits 3
// naming --token and AX_TOKEN. Ctrl-C stops it cleanly.
func TestDevOnBusyDefaultPortsWithAuth(t *testing.T) {
	holdPort(t, "8080")
	holdPort(t, "6391")
	d := launchDev(t, []string{"AX_AUTH_ENABLED=true"}, "--tmp", "--no-demo-workers")
	banner := d.log.String()
	for _, want := range []string{"ports 8080-8082 are taken: the APIs are on free ports", "127.0.0.1:6391 is taken: us-east-1's Redis is on 127.0.0.1:", "auth on"} {
		if !strings.Contains(banner, want) {
			t.Errorf("the banner lacks %q:\n%s", want, tail(banner, 3000))
		}
	}
	if strings.Contains(d.api, ":8080") {
		t.Fatalf("ax dev's API is on the taken port: %s", d.api)
	}
	exports := regexp.MustCompile(`(?m)^  export (AX_[A-Z]+=\S+)$`).FindAllStringSubmatch(banner, -1)
	if len(exports) != 2 || d.token == "" {
		t.Fatalf("the banner's export lines %q, want AX_API and AX_TOKEN:\n%s", exports, tail(banner, 3000))
	}
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AX_") {
			env = append(env, kv)
		}
	}
	run := func(extra ...string) (string, int) {
		cmd := exec.Command(axBin, "--settings", "", "regions")
		cmd.Env = append(env, extra...)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return string(out), ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
	}
	if out, code := run(exports[0][1], exports[1][1]); code != 0 || !strings.Contains(out, "us-east-1") {
		t.Errorf("ax regions with the banner's exports: exit %d\n%s", code, out)
	}
	if out, code := run(exports[0][1]); code != 3 || !strings.Contains(out, "--token or AX_TOKEN") || strings.Count(strings.TrimSpace(out), "\n") != 0 {
		t.Errorf("ax regions without the token: exit %d, %q; want exit 3 and one line naming --token or AX_TOKEN", code, out)
	}
	d.interrupt()
}

// Ctrl-C while ax dev is still starting stops it cleanly: exit status 0,
// no error, no Redis log on the terminal, no child left running.
func TestDevInterruptedDuringStartStopsCleanly(t *testing.T) {
	cmd := exec.Command(axBin, "dev", "--port", "0", "--tmp")
	var log lockedBuffer
	cmd.Stdout, cmd.Stderr = &log, &log
	cmd.Env = append(os.Environ(), "AX_LOG_FORMAT=text")
	dieWithTest(cmd, false)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// The first region's server runs; the other two are still starting.
	waitUntil(t, 60*time.Second, "ax dev's first server", func() bool {
		return strings.Contains(log.String(), `msg="ax server started"`)
	})
	kids := children(cmd.Process.Pid)
	_ = cmd.Process.Signal(syscall.SIGINT)
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("ax dev did not stop within 30 s of SIGINT:\n%s", tail(log.String(), 3000))
	}
	out := log.String()
	if err != nil {
		t.Errorf("ax dev interrupted while starting: %v\n%s", err, tail(out, 3000))
	}
	for _, bad := range []string{"level=ERROR", "ax: ", "Redis version=", "* Ready to accept connections", "# Server initialized"} {
		if strings.Contains(out, bad) {
			t.Errorf("ax dev's output holds %q after an interrupted start:\n%s", bad, tail(out, 3000))
		}
	}
	for _, k := range kids {
		if alive(k) {
			t.Errorf("child %d of ax dev still runs after it stopped", k)
		}
	}
	t.Logf("interrupted %s the banner", map[bool]string{true: "after", false: "before"}[strings.Contains(out, "ax dev is running")])
}
