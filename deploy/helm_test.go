package deploy

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// helmBinary finds helm: on PATH, or where `make deps` installs it
// ($(go env GOBIN), else $(go env GOPATH)/bin). Its absence fails the test.
func helmBinary(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("helm"); err == nil {
		return p
	}
	for _, v := range []string{"GOBIN", "GOPATH"} {
		dir := strings.TrimSpace(string(run(t, "", nil, "go", "env", v)))
		if dir == "" {
			continue
		}
		if v == "GOPATH" {
			dir = filepath.Join(filepath.SplitList(dir)[0], "bin")
		}
		if p := filepath.Join(dir, "helm"); isExecutable(p) {
			return p
		}
	}
	t.Fatal("helm is not installed (not on PATH, nor in $(go env GOPATH)/bin): `make deps` installs it")
	return ""
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

func chartDir(t *testing.T) string { return filepath.Join(repoRoot(t), "deploy", "helm", "ax") }

// helm runs helm; it returns stdout, or the error with stderr in it.
func helm(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	cmd := exec.Command(helmBinary(t), args...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, errors.New(strings.TrimSpace(stderr.String()) + " (" + err.Error() + ")")
	}
	return out, nil
}

// The parts of the Kubernetes objects the chart renders that the test reads.
type k8sObject struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Data       map[string]string `yaml:"data"`
	StringData map[string]string `yaml:"stringData"`
	Spec       yaml.Node         `yaml:"spec"`
}

type labelSelector struct {
	MatchLabels map[string]string `yaml:"matchLabels"`
}

type deploymentSpec struct {
	Replicas *int          `yaml:"replicas"`
	Selector labelSelector `yaml:"selector"`
	Template struct {
		Metadata struct {
			Labels map[string]string `yaml:"labels"`
		} `yaml:"metadata"`
		Spec struct {
			SecurityContext struct {
				RunAsNonRoot bool `yaml:"runAsNonRoot"`
				RunAsUser    int  `yaml:"runAsUser"`
			} `yaml:"securityContext"`
			Containers []k8sContainer `yaml:"containers"`
			Volumes    []struct {
				Name      string `yaml:"name"`
				ConfigMap *struct {
					Name string `yaml:"name"`
				} `yaml:"configMap"`
			} `yaml:"volumes"`
		} `yaml:"spec"`
	} `yaml:"template"`
}

type k8sProbe struct {
	HTTPGet *struct {
		Path string `yaml:"path"`
		Port string `yaml:"port"`
	} `yaml:"httpGet"`
}

type k8sContainer struct {
	Image string   `yaml:"image"`
	Args  []string `yaml:"args"`
	Env   []struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom *struct {
			SecretKeyRef *struct {
				Name     string `yaml:"name"`
				Key      string `yaml:"key"`
				Optional bool   `yaml:"optional"`
			} `yaml:"secretKeyRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	ReadinessProbe  *k8sProbe `yaml:"readinessProbe"`
	LivenessProbe   *k8sProbe `yaml:"livenessProbe"`
	SecurityContext struct {
		ReadOnlyRootFilesystem   bool  `yaml:"readOnlyRootFilesystem"`
		AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
	} `yaml:"securityContext"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

func (c k8sContainer) port(name string) int {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	return 0
}

type serviceSpec struct {
	ClusterIP string            `yaml:"clusterIP"`
	Selector  map[string]string `yaml:"selector"`
	Ports     []struct {
		Name       string `yaml:"name"`
		TargetPort string `yaml:"targetPort"`
	} `yaml:"ports"`
}

type pdbSpec struct {
	Selector       labelSelector `yaml:"selector"`
	MaxUnavailable *int          `yaml:"maxUnavailable"`
	MinAvailable   *int          `yaml:"minAvailable"`
}

type serviceMonitorSpec struct {
	Selector  labelSelector `yaml:"selector"`
	Endpoints []struct {
		Port string `yaml:"port"`
		Path string `yaml:"path"`
	} `yaml:"endpoints"`
}

// manifests is a render, by kind and name.
type manifests map[string]map[string]k8sObject

func (m manifests) names(kind string) []string { return slices.Sorted(maps.Keys(m[kind])) }

func spec[T any](t *testing.T, o k8sObject) T {
	t.Helper()
	var v T
	if err := o.Spec.Decode(&v); err != nil {
		t.Fatalf("%s %s: spec: %v", o.Kind, o.Metadata.Name, err)
	}
	return v
}

// render runs helm template on the chart and parses every document.
func render(t *testing.T, args ...string) manifests {
	t.Helper()
	out, err := helm(t, append([]string{"template", "ax", chartDir(t), "--namespace", "ax"}, args...)...)
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	m := manifests{}
	dec := yaml.NewDecoder(bytes.NewReader(out))
	for {
		var o k8sObject
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("helm template: a manifest is not YAML: %v", err)
		}
		if o.Kind == "" && o.APIVersion == "" && o.Metadata.Name == "" {
			continue // an empty document
		}
		if o.APIVersion == "" || o.Kind == "" || o.Metadata.Name == "" {
			t.Fatalf("manifest without apiVersion, kind or metadata.name: %+v", o)
		}
		if m[o.Kind] == nil {
			m[o.Kind] = map[string]k8sObject{}
		}
		if _, dup := m[o.Kind][o.Metadata.Name]; dup {
			t.Fatalf("two %s named %s", o.Kind, o.Metadata.Name)
		}
		m[o.Kind][o.Metadata.Name] = o
	}
	return m
}

// chartRegion is one entry of the chart's default values, read through ax's
// config loader: its name and pools.
type chartRegion struct {
	name    string
	pools   []string
	workers map[string]int // replicas set in values
}

func defaultRegions(t *testing.T) []chartRegion {
	t.Helper()
	var v struct {
		Regions []struct {
			Config  string `yaml:"config"`
			Workers map[string]struct {
				Replicas int `yaml:"replicas"`
			} `yaml:"workers"`
		} `yaml:"regions"`
	}
	readYAML(t, filepath.Join(chartDir(t), "values.yaml"), &v)
	var out []chartRegion
	for _, r := range v.Regions {
		var c struct {
			Region string `yaml:"region"`
			Pools  []struct {
				Name string `yaml:"name"`
			} `yaml:"pools"`
		}
		if err := yaml.Unmarshal([]byte(r.Config), &c); err != nil {
			t.Fatalf("values.yaml: regions[].config: %v", err)
		}
		cr := chartRegion{name: c.Region, workers: map[string]int{}}
		for _, p := range c.Pools {
			cr.pools = append(cr.pools, p.Name)
		}
		for p, w := range r.Workers {
			cr.workers[p] = w.Replicas
		}
		out = append(out, cr)
	}
	if len(out) < 2 {
		t.Fatalf("values.yaml holds %d regions; the default is a demo of two", len(out))
	}
	return out
}

// subset reports whether every label of sel is in labels.
func subset(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// routeRegistered reports whether some non-test Go file of the module
// registers "GET path" on a mux: the probes must name real endpoints
// wherever the API code lives.
func routeRegistered(t *testing.T, path string) bool {
	t.Helper()
	found := false
	want := []byte(`"GET ` + path + `"`)
	err := filepath.WalkDir(repoRoot(t), func(p string, d fs.DirEntry, err error) error {
		if err != nil || found {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "deploy") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			found = bytes.Contains(data, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

const testClusterToken = "test-cluster-token-0123456789"

// checkRegionObjects checks one region's objects in a render: the server
// Deployment (replicas, probes, config, env) and its Service and PDB, a
// worker Deployment per pool, the ConfigMap through ax's own loader.
func checkRegionObjects(t *testing.T, m manifests, r chartRegion, secretName string, flags map[string]map[string]bool) {
	t.Helper()
	secret := m["Secret"][secretName] // absent with an existing Secret
	resolveEnv := func(who string, c k8sContainer) map[string]string {
		env := map[string]string{}
		for _, e := range c.Env {
			switch {
			case e.ValueFrom == nil:
				env[e.Name] = e.Value
			case e.ValueFrom.SecretKeyRef != nil:
				ref := e.ValueFrom.SecretKeyRef
				if ref.Name != secretName {
					t.Errorf("%s: %s from Secret %q; want %q", who, e.Name, ref.Name, secretName)
				}
				v, ok := secret.StringData[ref.Key]
				if secret.Metadata.Name == "" { // an existing Secret: stand in for it
					v, ok = testClusterToken, ref.Key == "cluster-token"
				}
				if !ok && !ref.Optional {
					t.Errorf("%s: %s needs key %q, which Secret %s lacks", who, e.Name, ref.Key, secretName)
				}
				if ok {
					env[e.Name] = v
				}
			default:
				t.Errorf("%s: env %s: unexpected valueFrom", who, e.Name)
			}
		}
		return env
	}
	// check checks a Deployment's pod and its one container and returns
	// the ax subcommand's flag values and the region config it reads.
	check := func(name, sub string) (deploymentSpec, k8sContainer, map[string]string) {
		t.Helper()
		o, ok := m["Deployment"][name]
		if !ok {
			t.Fatalf("no Deployment %s (have %q)", name, m.names("Deployment"))
		}
		d := spec[deploymentSpec](t, o)
		if !subset(d.Selector.MatchLabels, d.Template.Metadata.Labels) || d.Template.Metadata.Labels["ax-sched.io/region"] != r.name {
			t.Errorf("%s: selector %v does not select its pods %v of region %s", name, d.Selector.MatchLabels, d.Template.Metadata.Labels, r.name)
		}
		ps := d.Template.Spec
		if !ps.SecurityContext.RunAsNonRoot || ps.SecurityContext.RunAsUser == 0 || len(ps.Containers) != 1 {
			t.Fatalf("%s: want one container, as a non-root user (%+v)", name, ps.SecurityContext)
		}
		c := ps.Containers[0]
		if !c.SecurityContext.ReadOnlyRootFilesystem || c.SecurityContext.AllowPrivilegeEscalation == nil || *c.SecurityContext.AllowPrivilegeEscalation {
			t.Errorf("%s: want a read-only root filesystem and no privilege escalation", name)
		}
		if !strings.Contains(c.Image, ":") {
			t.Errorf("%s: image %q has no tag", name, c.Image)
		}
		got, vals := checkAxArgs(t, name, flags, c.Args)
		if got != sub {
			t.Fatalf("%s: runs ax %s; want ax %s", name, got, sub)
		}
		// --config is a key of the region's ConfigMap, mounted read-only.
		cfgPath := vals["config"]
		var cmName string
		for _, vm := range c.VolumeMounts {
			if key, ok := strings.CutPrefix(cfgPath, vm.MountPath+"/"); ok {
				for _, v := range ps.Volumes {
					if v.Name == vm.Name && v.ConfigMap != nil {
						cmName = v.ConfigMap.Name
						vals["config-key"] = key
					}
				}
			}
		}
		cm, ok := m["ConfigMap"][cmName]
		data, hasKey := cm.Data[vals["config-key"]]
		if !ok || !hasKey {
			t.Fatalf("%s: --config %s is no key of a rendered ConfigMap (volume from %q)", name, cfgPath, cmName)
		}
		region := loadRegion(t, name+": ConfigMap "+cmName, []byte(data), resolveEnv(name, c))
		if region.Name != r.name {
			t.Errorf("%s: its config is region %q; want %q", name, region.Name, r.name)
		}
		if sub == "server" {
			_, port, _ := net.SplitHostPort(region.Listen)
			if !strings.HasPrefix(region.Listen, "0.0.0.0:") || port == "" || port != itoa(c.port("http")) {
				t.Errorf("%s: listen %q; want 0.0.0.0 and the container port named http (%d)", name, region.Listen, c.port("http"))
			}
			if !region.Auth.Enabled {
				t.Errorf("%s: auth is off", name)
			}
		}
		vals["region"] = region.Name
		return d, c, vals
	}

	server := "ax-server-" + r.name
	d, c, _ := check(server, "server")
	if d.Replicas == nil || *d.Replicas < 2 {
		t.Errorf("%s: replicas %s; want at least 2", server, intp(d.Replicas))
	}
	for probe, want := range map[string]*k8sProbe{"/readyz": c.ReadinessProbe, "/healthz": c.LivenessProbe} {
		if want == nil || want.HTTPGet == nil || want.HTTPGet.Path != probe || c.port(want.HTTPGet.Port) == 0 {
			t.Errorf("%s: want an HTTP probe on %s at a named container port, got %s", server, probe, describeProbe(want))
		}
	}
	svc, ok := m["Service"]["ax-"+r.name]
	if !ok {
		t.Fatalf("no Service ax-%s", r.name)
	}
	ss := spec[serviceSpec](t, svc)
	if !subset(ss.Selector, d.Template.Metadata.Labels) || len(ss.Ports) != 1 || c.port(ss.Ports[0].TargetPort) == 0 {
		t.Errorf("Service %s: selector %v, ports %+v: want the region's server pods' http port", svc.Metadata.Name, ss.Selector, ss.Ports)
	}
	pdb, ok := m["PodDisruptionBudget"][server]
	if !ok {
		t.Fatalf("no PodDisruptionBudget %s", server)
	}
	if p := spec[pdbSpec](t, pdb); !subset(p.Selector.MatchLabels, d.Template.Metadata.Labels) ||
		(p.MaxUnavailable == nil || *p.MaxUnavailable < 1 || *p.MaxUnavailable >= *d.Replicas) && p.MinAvailable == nil {
		t.Errorf("PodDisruptionBudget %s: %+v: want the region's servers, at most replicas-1 unavailable", server, p)
	}

	for _, pool := range r.pools {
		name := "ax-worker-" + r.name + "-" + pool
		d, c, vals := check(name, "worker")
		if vals["pool"] != pool {
			t.Errorf("%s: --pool %q; want %q", name, vals["pool"], pool)
		}
		want := 1
		if n, ok := r.workers[pool]; ok {
			want = n
		}
		if d.Replicas == nil || *d.Replicas != want {
			t.Errorf("%s: replicas %s; want %d (values)", name, intp(d.Replicas), want)
		}
		_, port, err := net.SplitHostPort(vals["metrics"])
		if err != nil || port != itoa(c.port("metrics")) {
			t.Errorf("%s: --metrics %q; want the container port named metrics (%d)", name, vals["metrics"], c.port("metrics"))
		}
		if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" || c.port(c.LivenessProbe.HTTPGet.Port) == 0 {
			t.Errorf("%s: liveness %s; want GET /healthz on a named port (/metrics needs a token when private)", name, describeProbe(c.LivenessProbe))
		}
		if pdb, ok := m["PodDisruptionBudget"][name]; !ok {
			t.Errorf("no PodDisruptionBudget %s", name)
		} else if p := spec[pdbSpec](t, pdb); !subset(p.Selector.MatchLabels, d.Template.Metadata.Labels) || p.MaxUnavailable == nil || *p.MaxUnavailable < 1 {
			t.Errorf("PodDisruptionBudget %s: %+v: want the pool's workers, maxUnavailable ≥ 1", name, p)
		}
		ws := spec[serviceSpec](t, m["Service"]["ax-worker-"+r.name])
		if !subset(ws.Selector, d.Template.Metadata.Labels) || len(ws.Ports) != 1 || c.port(ws.Ports[0].TargetPort) == 0 {
			t.Errorf("Service ax-worker-%s does not reach %s's metrics port", r.name, name)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func intp(p *int) string {
	if p == nil {
		return "unset"
	}
	return strconv.Itoa(*p)
}

// TestHelmChart renders the chart with a real `helm template` (its default
// values: two regions) and checks every manifest parses, each region has its
// server Deployment, Service, PodDisruptionBudget and ConfigMap and a worker
// Deployment per pool, and the region config passes ax's own loader with the
// environment the pods get.
func TestHelmChart(t *testing.T) {
	bin := axBinary(t)
	flags := map[string]map[string]bool{"server": axFlags(t, bin, "server"), "worker": axFlags(t, bin, "worker")}
	regions := defaultRegions(t)
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		if !routeRegistered(t, p) {
			t.Errorf("no Go file of ax registers GET %s: the chart probes or scrapes it", p)
		}
	}
	if _, err := helm(t, "lint", chartDir(t), "--set", "secret.clusterToken="+testClusterToken); err != nil {
		t.Errorf("helm lint: %v", err)
	}

	t.Run("defaults", func(t *testing.T) {
		m := render(t, "--set", "secret.clusterToken="+testClusterToken)
		var wantDeploy, wantSvc, wantPDB, wantCM []string
		for _, r := range regions {
			wantDeploy = append(wantDeploy, "ax-server-"+r.name)
			for _, p := range r.pools {
				wantDeploy = append(wantDeploy, "ax-worker-"+r.name+"-"+p)
			}
			wantSvc = append(wantSvc, "ax-"+r.name, "ax-worker-"+r.name)
			wantPDB = append(wantPDB, "ax-server-"+r.name)
			for _, p := range r.pools {
				wantPDB = append(wantPDB, "ax-worker-"+r.name+"-"+p)
			}
			wantCM = append(wantCM, "ax-config-"+r.name)
		}
		for kind, want := range map[string][]string{"Deployment": wantDeploy, "Service": wantSvc, "PodDisruptionBudget": wantPDB,
			"ConfigMap": wantCM, "Secret": {"ax-secret"}} {
			slices.Sort(want)
			if got := m.names(kind); !slices.Equal(got, want) {
				t.Errorf("%s: %q; want %q", kind, got, want)
			}
		}
		if len(m) != 5 {
			t.Errorf("kinds %q; want Deployment, Service, PodDisruptionBudget, ConfigMap, Secret (no ServiceMonitor by default)", slices.Sorted(maps.Keys(m)))
		}
		if tok := m["Secret"]["ax-secret"].StringData["cluster-token"]; tok != testClusterToken {
			t.Errorf("Secret cluster-token %q; want the value given", tok)
		}
		for _, r := range regions {
			checkRegionObjects(t, m, r, "ax-secret", flags)
		}
	})

	t.Run("existing secret and ServiceMonitor", func(t *testing.T) {
		m := render(t, "--set", "secret.existingSecret=ax-tokens", "--set", "monitoring.serviceMonitor.enabled=true")
		if len(m["Secret"]) != 0 {
			t.Errorf("Secrets %q rendered alongside an existing one", m.names("Secret"))
		}
		for _, r := range regions {
			checkRegionObjects(t, m, r, "ax-tokens", flags)
		}
		sm, ok := m["ServiceMonitor"]["ax"]
		if !ok || sm.APIVersion != "monitoring.coreos.com/v1" {
			t.Fatalf("ServiceMonitor ax: %+v; want monitoring.coreos.com/v1", sm)
		}
		sms := spec[serviceMonitorSpec](t, sm)
		ports := map[string]bool{}
		for _, e := range sms.Endpoints {
			if e.Path != "/metrics" {
				t.Errorf("ServiceMonitor endpoint %+v: want /metrics", e)
			}
			ports[e.Port] = true
		}
		var selected []string
		for name, svc := range m["Service"] {
			if !subset(sms.Selector.MatchLabels, svc.Metadata.Labels) {
				continue
			}
			selected = append(selected, name)
			for _, p := range spec[serviceSpec](t, svc).Ports {
				if !ports[p.Name] {
					t.Errorf("ServiceMonitor selects Service %s but scrapes no port %s", name, p.Name)
				}
			}
		}
		slices.Sort(selected)
		if want := m.names("Service"); !slices.Equal(selected, want) {
			t.Errorf("ServiceMonitor selects %q; want every server and worker Service %q", selected, want)
		}
	})

	t.Run("one region", func(t *testing.T) {
		values := filepath.Join(t.TempDir(), "values.yaml")
		err := os.WriteFile(values, []byte(`regions:
  - config: |
      region: eastus
      provider: azure
      etcd: {regional: {endpoints: ["http://etcd:2379"]}}
      redis: {addr: "redis-master:6379"}
      pools: [{name: gpu-a100, slots: 8, tags: {gpu: a100}}]
      auth:
        tokens: [{name: ops, role: admin, token_sha256: "283734bd24cd5aabb27576a5d7d4e8896af2a563c2505f9c9b30b0358fedbc42"}]
    publicAddr: https://ax.eastus.example.com
    workers: {gpu-a100: {replicas: 3}}
`), 0o644)
		if err != nil {
			t.Fatal(err)
		}
		m := render(t, "-f", values, "--set", "secret.clusterToken="+testClusterToken, "--set", "server.replicas=3")
		checkRegionObjects(t, m, chartRegion{name: "eastus", pools: []string{"gpu-a100"}, workers: map[string]int{"gpu-a100": 3}}, "ax-secret", flags)
		if got := m.names("Deployment"); !slices.Equal(got, []string{"ax-server-eastus", "ax-worker-eastus-gpu-a100"}) {
			t.Errorf("Deployments %q", got)
		}
	})

	t.Run("NOTES.txt", func(t *testing.T) {
		// helm template does not render NOTES.txt: a copy of the chart
		// carries it into a ConfigMap.
		dir := filepath.Join(t.TempDir(), "ax")
		run(t, "", nil, "cp", "-rL", chartDir(t), dir) // -L: the chart links its rules and dashboard
		err := os.WriteFile(filepath.Join(dir, "templates", "notes-check.yaml"), []byte(
			"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: notes}\ndata:\n  notes: |\n    {{- include \"ax/templates/NOTES.txt\" . | nindent 4 }}\n"), 0o644)
		if err != nil {
			t.Fatal(err)
		}
		out, err := helm(t, "template", "ax", dir, "--set", "secret.clusterToken="+testClusterToken, "--show-only", "templates/notes-check.yaml")
		if err != nil {
			t.Fatalf("NOTES.txt: %v", err)
		}
		for _, r := range regions {
			if !bytes.Contains(out, []byte("Deployment ax-server-"+r.name)) {
				t.Errorf("NOTES.txt does not name region %s's servers:\n%s", r.name, out)
			}
		}
	})

	// Values the chart must refuse, with a message naming the fix.
	refusals := []struct {
		name string
		args []string
		want string
	}{
		{"no cluster token", nil, "secret.clusterToken is required"},
		{"short cluster token", []string{"--set", "secret.clusterToken=short"}, "too short"},
		{"one server", []string{"--set", "secret.clusterToken=" + testClusterToken, "--set", "server.replicas=1"}, "at least 2"},
		{"workers of an unknown pool", []string{"--set", "secret.clusterToken=" + testClusterToken, "--set-json",
			`regions=[{"config":"region: r1\npools: [{name: a, slots: 1}]\n","workers":{"gpu":{"replicas":1}}}]`}, `pool "gpu"`},
		{"config without region", []string{"--set", "secret.clusterToken=" + testClusterToken, "--set-json",
			`regions=[{"config":"pools: [{name: a, slots: 1}]\n"}]`}, "region is required"},
	}
	for _, tt := range refusals {
		t.Run("refuses "+tt.name, func(t *testing.T) {
			_, err := helm(t, append([]string{"template", "ax", chartDir(t)}, tt.args...)...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("helm template: %v; want a failure saying %q", err, tt.want)
			}
		})
	}
}

func describeProbe(p *k8sProbe) string {
	if p == nil || p.HTTPGet == nil {
		return "no HTTP probe"
	}
	return "GET " + p.HTTPGet.Path + " on port " + p.HTTPGet.Port
}

// Workers never get the cluster token; with worker.redisUsername they log
// in to Redis as that ACL user with the Secret's worker-redis-password.
func TestHelmWorkersHoldNoClusterToken(t *testing.T) {
	for _, user := range []string{"", "ax-worker"} {
		m := render(t, "--set", "secret.clusterToken="+testClusterToken, "--set", "worker.redisUsername="+user,
			"--set", "secret.workerRedisPassword=worker-password")
		workers := 0
		for name, o := range m["Deployment"] {
			d := spec[deploymentSpec](t, o)
			c := d.Template.Spec.Containers[0]
			env := map[string]string{}
			for _, e := range c.Env {
				env[e.Name] = e.Value
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					env[e.Name] = "secret:" + e.ValueFrom.SecretKeyRef.Key
				}
			}
			_, token := env["AX_AUTH_CLUSTER_TOKEN"]
			switch c.Args[0] {
			case "server":
				if !token {
					t.Errorf("%s: a server lacks AX_AUTH_CLUSTER_TOKEN", name)
				}
			case "worker":
				workers++
				wantKey, wantUser := "secret:redis-password", ""
				if user != "" {
					wantKey, wantUser = "secret:worker-redis-password", user
				}
				if token || env["AX_REDIS_PASSWORD"] != wantKey || env["AX_REDIS_USERNAME"] != wantUser {
					t.Errorf("worker.redisUsername %q: %s's environment %v: want no cluster token, AX_REDIS_USERNAME %q, AX_REDIS_PASSWORD from %s",
						user, name, env, wantUser, wantKey)
				}
			}
		}
		if workers == 0 {
			t.Fatal("no worker Deployment rendered")
		}
		if got := m["Secret"]["ax-secret"].StringData["worker-redis-password"]; got != "worker-password" {
			t.Errorf("Secret worker-redis-password %q", got)
		}
	}
}
