package deploy

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

type npPeer struct {
	PodSelector       *labelSelector `yaml:"podSelector"`
	NamespaceSelector *labelSelector `yaml:"namespaceSelector"`
	IPBlock           *struct {
		CIDR string `yaml:"cidr"`
	} `yaml:"ipBlock"`
}

type npRule struct {
	Ports []struct {
		Protocol string `yaml:"protocol"`
		Port     int    `yaml:"port"`
	} `yaml:"ports"`
	To   []npPeer `yaml:"to"`
	From []npPeer `yaml:"from"`
}

type networkPolicySpec struct {
	PodSelector labelSelector `yaml:"podSelector"`
	PolicyTypes []string      `yaml:"policyTypes"`
	Ingress     []npRule      `yaml:"ingress"`
	Egress      []npRule      `yaml:"egress"`
}

// ports lists a rule's ports as "TCP/6379".
func (r npRule) ports() []string {
	var out []string
	for _, p := range r.Ports {
		out = append(out, p.Protocol+"/"+itoa(p.Port))
	}
	return out
}

// With networkPolicy.enabled, the chart renders one NetworkPolicy per
// region for its direct workers, one for its servers and one per remote
// worker. Each selects exactly the pods of its Deployments: a direct
// worker may reach DNS and its region's Redis ports (from the region's
// config, or networkPolicy.redis.ports) at the peers given, and only its
// metrics port reaches it; a remote worker may reach DNS and its region's
// server pods on the API port, nothing reaches it; a server takes only
// its API port. A remote worker whose API is outside the chart needs its
// egress given. Off by default.
func TestHelmNetworkPolicy(t *testing.T) {
	if m := render(t, "--set", "secret.clusterToken="+testClusterToken); len(m["NetworkPolicy"]) != 0 {
		t.Fatalf("NetworkPolicies without networkPolicy.enabled: %v", m.names("NetworkPolicy"))
	}
	args := []string{"--set", "secret.clusterToken=" + testClusterToken, "--set", "networkPolicy.enabled=true",
		"--set", "remoteWorkers[0].name=acme", "--set", "remoteWorkers[0].region=us-east-1", "--set", "remoteWorkers[0].pool=cpu-spot",
		"--set", "remoteWorkers[0].tokenSecret.name=acme-token",
		"--set-json", `networkPolicy.redis.to=[{"podSelector":{"matchLabels":{"app.kubernetes.io/name":"redis"}}}]`,
		"--set-json", `networkPolicy.workerEgress=[{"ports":[{"protocol":"TCP","port":4318}]}]`}
	m := render(t, args...)
	regions := defaultRegions(t)
	// Every pod of the chart is selected by exactly one policy.
	for _, d := range m["Deployment"] {
		labels := spec[deploymentSpec](t, d).Template.Metadata.Labels
		var by []string
		for name, o := range m["NetworkPolicy"] {
			if subset(spec[networkPolicySpec](t, o).PodSelector.MatchLabels, labels) {
				by = append(by, name)
			}
		}
		if len(by) != 1 {
			t.Errorf("Deployment %s's pods are selected by %v, want one NetworkPolicy", d.Metadata.Name, by)
		}
	}
	if n := len(m["NetworkPolicy"]); n != 2*len(regions)+1 {
		t.Fatalf("%d NetworkPolicies (%v), want a worker and a server one per region and one remote worker's", n, m.names("NetworkPolicy"))
	}
	dns := func(where string, r npRule) {
		if !slices.Equal(r.ports(), []string{"UDP/53", "TCP/53"}) || len(r.To) != 1 || r.To[0].PodSelector.MatchLabels["k8s-app"] != "kube-dns" {
			t.Errorf("%s: first egress rule %+v, want DNS to kube-dns", where, r)
		}
	}
	for _, r := range regions {
		w := spec[networkPolicySpec](t, m["NetworkPolicy"]["ax-worker-"+r.name])
		if !slices.Equal(w.PolicyTypes, []string{"Ingress", "Egress"}) || w.PodSelector.MatchLabels["ax-sched.io/region"] != r.name ||
			w.PodSelector.MatchLabels["app.kubernetes.io/component"] != "worker" {
			t.Fatalf("workers of %s: %+v", r.name, w)
		}
		if len(w.Ingress) != 1 || !slices.Equal(w.Ingress[0].ports(), []string{"TCP/9101"}) {
			t.Errorf("workers of %s: ingress %+v, want the metrics port only", r.name, w.Ingress)
		}
		if len(w.Egress) != 3 {
			t.Fatalf("workers of %s: egress %+v, want DNS, Redis and the extra rule", r.name, w.Egress)
		}
		dns("workers of "+r.name, w.Egress[0])
		if !slices.Equal(w.Egress[1].ports(), []string{"TCP/6379"}) || len(w.Egress[1].To) != 1 || w.Egress[1].To[0].PodSelector.MatchLabels["app.kubernetes.io/name"] != "redis" {
			t.Errorf("workers of %s: Redis egress %+v, want TCP/6379 (the config's redis.addr) to the peers given", r.name, w.Egress[1])
		}
		if !slices.Equal(w.Egress[2].ports(), []string{"TCP/4318"}) {
			t.Errorf("workers of %s: extra egress %+v", r.name, w.Egress[2])
		}
		s := spec[networkPolicySpec](t, m["NetworkPolicy"]["ax-server-"+r.name])
		if !slices.Equal(s.PolicyTypes, []string{"Ingress"}) || len(s.Ingress) != 1 || !slices.Equal(s.Ingress[0].ports(), []string{"TCP/8080"}) {
			t.Errorf("servers of %s: %+v, want ingress on the API port only", r.name, s)
		}
	}
	rw := spec[networkPolicySpec](t, m["NetworkPolicy"]["ax-remote-worker-acme"])
	if len(rw.Ingress) != 0 || !slices.Contains(rw.PolicyTypes, "Ingress") || len(rw.Egress) != 3 {
		t.Fatalf("remote worker: %+v, want no ingress and egress to DNS, the API and the extra rule", rw)
	}
	dns("remote worker", rw.Egress[0])
	api := rw.Egress[1]
	server := spec[deploymentSpec](t, m["Deployment"]["ax-server-us-east-1"]).Template.Metadata.Labels
	other := spec[deploymentSpec](t, m["Deployment"]["ax-server-europe-west4"]).Template.Metadata.Labels
	if !slices.Equal(api.ports(), []string{"TCP/8080"}) || len(api.To) != 1 || !subset(api.To[0].PodSelector.MatchLabels, server) ||
		subset(api.To[0].PodSelector.MatchLabels, other) {
		t.Errorf("remote worker: API egress %+v, want TCP/8080 to us-east-1's servers only", api)
	}

	// A config's Redis on other ports: those ports (a cluster's seeds).
	cluster := strings.Replace(regionConfig(t, 0), "addr: redis-us-east-1:6379", "cluster: {addrs: [redis-a:7000, redis-b:7001]}", 1)
	vals, err := yaml.Marshal(map[string]any{"regions": []map[string]string{{"config": cluster}}})
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(f, vals, 0o600); err != nil {
		t.Fatal(err)
	}
	m = render(t, "--set", "secret.clusterToken="+testClusterToken, "--set", "networkPolicy.enabled=true", "-f", f)
	if got := spec[networkPolicySpec](t, m["NetworkPolicy"]["ax-worker-us-east-1"]).Egress[1].ports(); !slices.Equal(got, []string{"TCP/7000", "TCP/7001"}) {
		t.Errorf("a Redis Cluster's workers may reach %v, want its seeds' ports", got)
	}
	// A remote worker with an outside API and no egress given: refused.
	if out, err := helm(t, "template", "ax", chartDir(t), "--set", "secret.clusterToken="+testClusterToken, "--set", "networkPolicy.enabled=true",
		"--set", "remoteWorkers[0].name=far", "--set", "remoteWorkers[0].api=https://ax.example.com", "--set", "remoteWorkers[0].pool=cpu-spot",
		"--set", "remoteWorkers[0].tokenSecret.name=t"); err == nil || !strings.Contains(err.Error(), "networkPolicy.remoteWorkers.egress") {
		t.Errorf("an outside API without egress rules: %v\n%.300s", err, out)
	}
}

// regionConfig is the config text of values.yaml's i-th region.
func regionConfig(t *testing.T, i int) string {
	t.Helper()
	var v struct {
		Regions []struct {
			Config string `yaml:"config"`
		} `yaml:"regions"`
	}
	readYAML(t, filepath.Join(chartDir(t), "values.yaml"), &v)
	return v.Regions[i].Config
}
