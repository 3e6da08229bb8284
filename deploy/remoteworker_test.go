package deploy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// remoteContainer is what the test reads of a remote worker's pod.
type remoteContainer struct {
	Args    []string  `yaml:"args"`
	Env     []any     `yaml:"env"`
	EnvFrom []any     `yaml:"envFrom"`
	Volume  yaml.Node `yaml:"volumeMounts"`
}

type remotePod struct {
	Template struct {
		Spec struct {
			Containers []remoteContainer `yaml:"containers"`
			Volumes    []map[string]any  `yaml:"volumes"`
		} `yaml:"spec"`
	} `yaml:"template"`
}

// A remote worker holds the region's URL and its worker token (a file from
// its own Secret), nothing else: no environment (no Redis password, no
// cluster token), no region config, not the chart's Secret.
func TestHelmRemoteWorkersHoldOnlyTheirToken(t *testing.T) {
	values := filepath.Join(t.TempDir(), "remote.yaml")
	err := os.WriteFile(values, []byte(`
remoteWorkers:
  - name: acme-gpu
    region: us-east-1
    pool: cpu-spot
    replicas: 2
    concurrency: 8
    tokenSecret: {name: acme-worker-token, key: token}
  - name: edge
    api: https://ax.example.com
    pool: cpu-ondemand
    tokenSecret: {name: edge-token}
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	m := render(t, "--set", "secret.clusterToken="+testClusterToken, "--set", "secret.redisPassword=server-password",
		"--set", "worker.redisUsername=ax-worker", "--set", "secret.workerRedisPassword=worker-password", "-f", values)
	flags := map[string]map[string]bool{"worker": axFlags(t, axBinary(t), "worker")}
	want := map[string][2]string{
		"ax-remote-worker-acme-gpu": {"http://ax-us-east-1.ax.svc:8080", "/var/run/ax/worker-token/token"},
		"ax-remote-worker-edge":     {"https://ax.example.com", "/var/run/ax/worker-token/token"},
	}
	secrets := map[string]string{"ax-remote-worker-acme-gpu": "acme-worker-token", "ax-remote-worker-edge": "edge-token"}
	for name, w := range want {
		o, ok := m["Deployment"][name]
		if !ok {
			t.Fatalf("no Deployment %s (have %v)", name, m.names("Deployment"))
		}
		d := spec[remotePod](t, o)
		c := d.Template.Spec.Containers[0]
		sub, vals := checkAxArgs(t, name, flags, c.Args)
		if sub != "worker" || vals["api"] != w[0] || vals["token-file"] != w[1] || vals["config"] != "" {
			t.Errorf("%s: args %q: want ax worker --api %s --token-file %s and no --config", name, c.Args, w[0], w[1])
		}
		if len(c.Env) > 0 || len(c.EnvFrom) > 0 {
			t.Errorf("%s: environment %v %v: a remote worker needs none (no Redis password, no cluster token)", name, c.Env, c.EnvFrom)
		}
		if len(d.Template.Spec.Volumes) != 1 {
			t.Fatalf("%s: volumes %v: want only its token's Secret", name, d.Template.Spec.Volumes)
		}
		vol, _ := yaml.Marshal(d.Template.Spec.Volumes[0])
		if !strings.Contains(string(vol), "secretName: "+secrets[name]) || strings.Contains(string(vol), "ax-secret") {
			t.Errorf("%s: volume %s: want the Secret %s only", name, vol, secrets[name])
		}
	}
	// The chart's own Secret (cluster token, Redis passwords) reaches the
	// servers and the direct workers only.
	for name, o := range m["Deployment"] {
		raw, _ := yaml.Marshal(o.Spec)
		if strings.HasPrefix(name, "ax-remote-worker-") && (strings.Contains(string(raw), "ax-secret") || strings.Contains(string(raw), "AX_REDIS") || strings.Contains(string(raw), "CLUSTER_TOKEN")) {
			t.Errorf("%s mentions the chart's Secret or a Redis/cluster variable:\n%s", name, raw)
		}
	}
	remote := 0
	for name := range m["Deployment"] {
		if strings.HasPrefix(name, "ax-remote-worker-") {
			remote++
		}
	}
	if remote != len(want) {
		t.Errorf("%d remote worker Deployments, want %d", remote, len(want))
	}
}

func TestHelmRemoteWorkerNeedsItsToken(t *testing.T) {
	for _, c := range []struct{ set, want string }{
		{"remoteWorkers[0].name=x,remoteWorkers[0].pool=p,remoteWorkers[0].region=us-east-1", "tokenSecret.name is required"},
		{"remoteWorkers[0].name=x,remoteWorkers[0].pool=p,remoteWorkers[0].tokenSecret.name=s", "set api or region"},
		{"remoteWorkers[0].name=x,remoteWorkers[0].pool=p,remoteWorkers[0].tokenSecret.name=s,remoteWorkers[0].region=mars", "not one of the chart's regions"},
	} {
		_, err := helm(t, "template", "ax", chartDir(t), "--namespace", "ax", "--set", "secret.clusterToken="+testClusterToken, "--set", c.set)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--set %s: %v, want an error saying %q", c.set, err, c.want)
		}
	}
}
