package deploy

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/internal/config"
)

// unitService reads the [Service] section of a systemd unit: key → values
// (a key may repeat).
func unitService(t *testing.T, path string) map[string][]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	section := ""
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "["):
			section = line
		case section == "[Service]":
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("%s: %q is not KEY=VALUE", path, line)
			}
			out[k] = append(out[k], v)
		}
	}
	return out
}

// TestSystemdUnits checks that the units run ax with flags its server and
// worker commands have, as a non-root user, and give a worker more time to
// stop than its default shutdown grace.
func TestSystemdUnits(t *testing.T) {
	bin := axBinary(t)
	flags := map[string]map[string]bool{"server": axFlags(t, bin, "server"), "worker": axFlags(t, bin, "worker")}
	dir := filepath.Join(repoRoot(t), "deploy", "systemd")
	for unit, sub := range map[string]string{"ax-server.service": "server", "ax-worker@.service": "worker"} {
		t.Run(unit, func(t *testing.T) {
			s := unitService(t, filepath.Join(dir, unit))
			if len(s["ExecStart"]) != 1 {
				t.Fatalf("ExecStart %q: want one", s["ExecStart"])
			}
			argv := strings.Fields(strings.ReplaceAll(s["ExecStart"][0], "%i", "cpu-spot"))
			if argv[0] != "/usr/local/bin/ax" {
				t.Errorf("ExecStart runs %s; want /usr/local/bin/ax", argv[0])
			}
			got, vals := checkAxArgs(t, unit, flags, argv[1:])
			if got != sub {
				t.Errorf("runs ax %s; want ax %s", got, sub)
			}
			if vals["config"] != "/etc/ax/region.yaml" {
				t.Errorf("--config %q; want /etc/ax/region.yaml", vals["config"])
			}
			if sub == "worker" && vals["pool"] != "cpu-spot" {
				t.Errorf("--pool %q; want the instance name (%%i)", vals["pool"])
			}
			if u := s["User"]; len(u) != 1 || u[0] == "root" || u[0] == "0" {
				t.Errorf("User %q: want a non-root user", u)
			}
			// systemctl reload is the server's SIGHUP (docs/security.md);
			// a worker reloads nothing.
			if r := s["ExecReload"]; sub == "server" && (len(r) != 1 || r[0] != "/bin/kill -HUP $MAINPID") {
				t.Errorf("ExecReload %q: want /bin/kill -HUP $MAINPID (systemctl reload re-reads the config)", r)
			}
			if k := s["KillSignal"]; len(k) != 1 || k[0] != "SIGTERM" {
				t.Errorf("KillSignal %q: ax stops gracefully on SIGTERM", k)
			}
			// The cluster token is the servers': a worker reads no file of
			// theirs and names it nowhere.
			if sub == "worker" {
				server := unitService(t, filepath.Join(dir, "ax-server.service"))
				for _, f := range s["EnvironmentFile"] {
					if slices.Contains(server["EnvironmentFile"], f) {
						t.Errorf("EnvironmentFile=%s: the servers' (with the cluster token)", f)
					}
				}
				for _, e := range append(s["Environment"], s["LoadCredential"]...) {
					if strings.Contains(e, "CLUSTER_TOKEN") || strings.Contains(e, "cluster-token") {
						t.Errorf("%q: a worker gets the cluster token", e)
					}
				}
			}
			stop, err := strconv.Atoi(strings.Join(s["TimeoutStopSec"], ""))
			if err != nil {
				t.Fatalf("TimeoutStopSec %q: %v", s["TimeoutStopSec"], err)
			}
			if grace := config.Default().Worker.ShutdownGrace; sub == "worker" && time.Duration(stop)*time.Second <= grace {
				t.Errorf("TimeoutStopSec=%d is not above worker.shutdown_grace's default %v: systemd would kill running handlers", stop, grace)
			}
		})
	}
}

// TestSystemdRemoteWorkerUnit: the remote worker's unit runs ax worker of
// its instance's pool with only a worker token (a credential file) and the
// API URLs: no region config, no environment file of the servers' or of a
// direct worker's (the cluster token, Redis credentials), nothing naming
// Redis or the cluster token; as a non-root user, stopped by SIGTERM with
// more time than the worker's shutdown grace.
func TestSystemdRemoteWorkerUnit(t *testing.T) {
	dir := filepath.Join(repoRoot(t), "deploy", "systemd")
	s := unitService(t, filepath.Join(dir, "ax-remote-worker@.service"))
	if len(s["ExecStart"]) != 1 {
		t.Fatalf("ExecStart %q: want one", s["ExecStart"])
	}
	exec := strings.ReplaceAll(strings.ReplaceAll(s["ExecStart"][0], "%i", "team-a"), "${CREDENTIALS_DIRECTORY}", "/run/credentials/x")
	argv := strings.Fields(exec)
	if argv[0] != "/usr/local/bin/ax" {
		t.Errorf("ExecStart runs %s; want /usr/local/bin/ax", argv[0])
	}
	flags := map[string]map[string]bool{"worker": axFlags(t, axBinary(t), "worker")}
	sub, vals := checkAxArgs(t, "ax-remote-worker@.service", flags, argv[1:])
	if sub != "worker" || vals["pool"] != "team-a" {
		t.Errorf("runs ax %s --pool %q; want ax worker --pool of the instance", sub, vals["pool"])
	}
	if vals["config"] != "" {
		t.Errorf("--config %q: a remote worker holds no region config", vals["config"])
	}
	if vals["token-file"] != "/run/credentials/x/worker-token" {
		t.Errorf("--token-file %q: want the credential ${CREDENTIALS_DIRECTORY}/worker-token", vals["token-file"])
	}
	if c := s["LoadCredential"]; len(c) != 1 || !strings.HasPrefix(c[0], "worker-token:/etc/ax/") {
		t.Errorf("LoadCredential %q: want worker-token from a file under /etc/ax", c)
	}
	others := append(unitService(t, filepath.Join(dir, "ax-server.service"))["EnvironmentFile"],
		unitService(t, filepath.Join(dir, "ax-worker@.service"))["EnvironmentFile"]...)
	for _, f := range s["EnvironmentFile"] {
		if slices.Contains(others, f) {
			t.Errorf("EnvironmentFile=%s: a file of the servers or of direct workers (cluster token, Redis credentials)", f)
		}
	}
	for k, vs := range s {
		for _, v := range vs {
			if u := strings.ToUpper(v); strings.Contains(u, "REDIS") || strings.Contains(u, "CLUSTER_TOKEN") || strings.Contains(v, "region.yaml") {
				t.Errorf("%s=%s: a remote worker is given Redis, the cluster token or a region config", k, v)
			}
		}
	}
	if u := s["User"]; len(u) != 1 || u[0] == "root" || u[0] == "0" {
		t.Errorf("User %q: want a non-root user", u)
	}
	if k := s["KillSignal"]; len(k) != 1 || k[0] != "SIGTERM" {
		t.Errorf("KillSignal %q: ax stops gracefully on SIGTERM", k)
	}
	stop, err := strconv.Atoi(strings.Join(s["TimeoutStopSec"], ""))
	if err != nil || time.Duration(stop)*time.Second <= config.Default().Worker.ShutdownGrace {
		t.Errorf("TimeoutStopSec %q: want more than worker.shutdown_grace's default", s["TimeoutStopSec"])
	}
}
