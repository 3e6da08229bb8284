package e2e

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// runAx runs the CLI and returns stdout, stderr and the exit code.
func runAx(t *testing.T, api string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(axBin, append([]string{"--api", api, "--settings", ""}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// ax submit → ax get → ax trail through a real server and worker; -o json
// parses; errors exit non-zero with a one-line message.
func TestCLIAgainstRealServer(t *testing.T) {
	t.Parallel()
	c := newCluster(t, clusterOpts{})
	srv := c.start("server", "server")
	c.waitReady(srv)
	c.waitLeader(20*time.Second, 0)
	c.start("worker", "worker", "--pool", "cpu", "--id", "w1")
	waitUntil(t, 10*time.Second, "worker slots published", func() bool {
		out, _, code := runAx(t, srv.api, "regions", "-o", "json")
		var r struct {
			Regions []struct {
				Pools []struct {
					Slots int `json:"slots"`
				} `json:"pools"`
			} `json:"regions"`
		}
		return code == 0 && json.Unmarshal([]byte(out), &r) == nil && len(r.Regions) == 1 &&
			len(r.Regions[0].Pools) == 1 && r.Regions[0].Pools[0].Slots == 200
	})

	if v := metric(t, srv.api, "ax_global_view_connected"); v != 1 {
		t.Fatalf("ax_global_view_connected = %v, want 1", v)
	}
	out, stderr, code := runAx(t, srv.api, "submit", "--type", "noop", "--tag", "class=cpu")
	if code != 0 {
		t.Fatalf("submit: exit %d: %s", code, stderr)
	}
	id := strings.TrimSpace(out)
	if strings.Count(id, ".") != 2 {
		t.Fatalf("submit printed %q, want a task id", out)
	}
	waitUntil(t, 10*time.Second, "task SUCCESS", func() bool {
		out, _, code := runAx(t, srv.api, "get", id, "-o", "json")
		var tk struct {
			ID    string `json:"id"`
			State string `json:"state"`
		}
		return code == 0 && json.Unmarshal([]byte(out), &tk) == nil && tk.ID == id && tk.State == "SUCCESS"
	})
	out, _, code = runAx(t, srv.api, "trail", id)
	if code != 0 || !strings.Contains(out, "CLAIMED") || !strings.Contains(out, "COMPLETED") {
		t.Fatalf("trail (exit %d):\n%s", code, out)
	}
	out, _, code = runAx(t, srv.api, "trail", id, "-o", "json")
	var tr struct {
		Transitions []map[string]any `json:"transitions"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &tr) != nil || len(tr.Transitions) < 3 {
		t.Fatalf("trail -o json (exit %d): %s", code, out)
	}

	for _, bad := range [][]string{
		{"get", "01k8lc2s3c7fgr5i.0.eu-west"}, // well-formed, unknown: 404
		{"submit", "--type", "noop", "--priority", "9"},
		{"submit", "--type", "noop", "--tag", "nokeyvalue"},
	} {
		_, stderr, code := runAx(t, srv.api, bad...)
		msg := strings.TrimSpace(stderr)
		if code == 0 || msg == "" || strings.Contains(msg, "\n") || !strings.HasPrefix(msg, "ax: ") {
			t.Fatalf("%v: exit %d, stderr %q: want non-zero and one line starting with 'ax: '", bad, code, stderr)
		}
	}
}
