package deploy

import (
	"bytes"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The parts of the compose specification compose/docker-compose.yaml uses.
// Decoding is strict (an unknown key fails), as `docker compose config`
// would be; that command is not available where these tests run, so this
// test is the closest check: it cannot catch what only the docker engine
// knows (whether an image tag exists, a port is free on the host).
type composeFile struct {
	Name     string                    `yaml:"name"`
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
	// Extension fields (x-…) hold anchors only.
	Extensions map[string]any `yaml:",inline"`
}

type composeService struct {
	Image           string            `yaml:"image"`
	Build           *composeBuild     `yaml:"build"`
	Restart         string            `yaml:"restart"`
	StopGracePeriod string            `yaml:"stop_grace_period"`
	Command         []string          `yaml:"command"`
	Environment     map[string]string `yaml:"environment"`
	Volumes         []string          `yaml:"volumes"`
	Ports           []string          `yaml:"ports"`
	DependsOn       yaml.Node         `yaml:"depends_on"`
	Healthcheck     *struct {
		Test     []string `yaml:"test"`
		Interval string   `yaml:"interval"`
		Timeout  string   `yaml:"timeout"`
		Retries  int      `yaml:"retries"`
	} `yaml:"healthcheck"`
}

type composeBuild struct {
	Context    string `yaml:"context"`
	Dockerfile string `yaml:"dockerfile"`
}

// dependsOn lists the services s waits for (list or map form).
func (s composeService) dependsOn(t *testing.T) []string {
	t.Helper()
	n := &s.DependsOn
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	switch n.Kind {
	case 0:
		return nil
	case yaml.SequenceNode:
		var l []string
		if err := n.Decode(&l); err != nil {
			t.Fatal(err)
		}
		return l
	case yaml.MappingNode:
		var m map[string]struct {
			Condition string `yaml:"condition"`
		}
		if err := n.Decode(&m); err != nil {
			t.Fatal(err)
		}
		return slices.Sorted(maps.Keys(m))
	}
	t.Fatalf("depends_on: unexpected YAML %v", n.Kind)
	return nil
}

// mount is one short-syntax volume: source (a path relative to the
// compose file, or a named volume), target, read-only.
type mount struct{ source, target string }

func (s composeService) mounts(t *testing.T, name string) []mount {
	t.Helper()
	var out []mount
	for _, v := range s.Volumes {
		f := strings.Split(v, ":")
		if len(f) < 2 || len(f) > 3 || (len(f) == 3 && f[2] != "ro") {
			t.Errorf("%s: volume %q: want SOURCE:TARGET[:ro]", name, v)
			continue
		}
		out = append(out, mount{source: f[0], target: f[1]})
	}
	return out
}

// hostPath maps a path inside the container to the file or directory the
// compose file mounts there (a bind mount of a path next to it).
func (s composeService) hostPath(t *testing.T, name, composeDir, inside string) string {
	t.Helper()
	for _, m := range s.mounts(t, name) {
		if m.target == inside && strings.HasPrefix(m.source, ".") {
			return filepath.Join(composeDir, m.source)
		}
		if rel, ok := strings.CutPrefix(inside, m.target+"/"); ok && strings.HasPrefix(m.source, ".") {
			return filepath.Join(composeDir, m.source, rel)
		}
	}
	t.Fatalf("%s: nothing is mounted at %s", name, inside)
	return ""
}

var composeVar = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:\?|:-)([^}]*))?\}|\$\$|\$`)

// interpolate fills ${NAME}, ${NAME:-default} and ${NAME:?error} from env,
// as compose does from .env; a variable that is neither set nor defaulted
// fails the test, as compose would.
func interpolate(t *testing.T, data string, env map[string]string) string {
	t.Helper()
	return composeVar.ReplaceAllStringFunc(data, func(m string) string {
		switch m {
		case "$$":
			return "$"
		case "$":
			t.Fatalf("a bare $ in the compose file (write $$ or ${NAME})")
		}
		g := composeVar.FindStringSubmatch(m)
		if v, ok := env[g[1]]; ok && v != "" {
			return v
		}
		if g[2] == ":-" {
			return g[3]
		}
		t.Fatalf("${%s} is not set in .env.example", g[1])
		return ""
	})
}

// readEnvFile reads NAME=value lines.
func readEnvFile(t *testing.T, path string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: %q is not NAME=value", path, line)
		}
		env[k] = v
	}
	return env
}

func loadCompose(t *testing.T) (string, composeFile) {
	t.Helper()
	dir := filepath.Join(repoRoot(t), "deploy", "compose")
	raw, err := os.ReadFile(filepath.Join(dir, "docker-compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	data := interpolate(t, string(raw), readEnvFile(t, filepath.Join(dir, ".env.example")))
	var cf composeFile
	dec := yaml.NewDecoder(bytes.NewReader([]byte(data)))
	dec.KnownFields(true)
	if err := dec.Decode(&cf); err != nil {
		t.Fatalf("docker-compose.yaml: %v", err)
	}
	for k := range cf.Extensions {
		if !strings.HasPrefix(k, "x-") {
			t.Errorf("docker-compose.yaml: unknown top-level key %q", k)
		}
	}
	return dir, cf
}

// TestComposeFile checks compose/docker-compose.yaml as `docker compose up`
// would meet it: the images and commands, each ax process's region config
// through ax's own loader with the environment compose gives it, the
// topology (two servers per region, a worker per pool, each region's own
// etcd and Redis), the published ports, and Prometheus and Grafana wiring.
func TestComposeFile(t *testing.T) {
	root := repoRoot(t)
	dir, cf := loadCompose(t)
	bin := axBinary(t)
	flags := map[string]map[string]bool{"server": axFlags(t, bin, "server"), "worker": axFlags(t, bin, "worker")}

	type axProc struct {
		service, sub, region, config string
		target                       string // host:port Prometheus should scrape
	}
	var procs []axProc
	servers := map[string][]string{} // region → server services
	workers := map[string][]string{} // region → pools with a worker
	pools := map[string][]string{}   // region → pools of its config
	regionLists := map[string][]string{}
	hostPorts := map[string]string{}
	var prom, grafana string
	type remoteProc struct {
		name string
		vals map[string]string
		env  map[string]string
		deps []string
	}
	var remotes []remoteProc

	names := slices.Sorted(maps.Keys(cf.Services))
	for _, name := range names {
		s := cf.Services[name]
		img, tag, ok := strings.Cut(s.Image[strings.LastIndex(s.Image, "/")+1:], ":")
		if img == "" || !ok || tag == "" || tag == "latest" {
			t.Errorf("%s: image %q: want a pinned name:tag", name, s.Image)
		}
		if s.Restart != "unless-stopped" {
			t.Errorf("%s: restart %q: want unless-stopped", name, s.Restart)
		}
		for _, p := range s.Ports {
			f := strings.Split(p, ":")
			if len(f) != 3 || f[0] != "127.0.0.1" {
				t.Errorf("%s: port %q: want 127.0.0.1:HOST:CONTAINER (nothing published beyond this machine)", name, p)
				continue
			}
			if other, dup := hostPorts[f[1]]; dup {
				t.Errorf("host port %s is published by both %s and %s", f[1], other, name)
			}
			hostPorts[f[1]] = name
		}
		for _, m := range s.mounts(t, name) {
			if strings.HasPrefix(m.source, ".") {
				if _, err := os.Stat(filepath.Join(dir, m.source)); err != nil {
					t.Errorf("%s: mounts %s, which does not exist: %v", name, m.source, err)
				}
			} else if _, ok := cf.Volumes[m.source]; !ok {
				t.Errorf("%s: named volume %q is not declared under volumes", name, m.source)
			}
		}
		for _, d := range s.dependsOn(t) {
			if _, ok := cf.Services[d]; !ok {
				t.Errorf("%s: depends on %q, which is no service", name, d)
			}
		}

		switch {
		case s.Build != nil:
			if s.Image != "ax:dev" {
				t.Errorf("%s: builds image %q; want ax:dev", name, s.Image)
			}
			ctx := filepath.Join(dir, s.Build.Context)
			if ctx != root {
				t.Errorf("%s: build context %s; want the repository root", name, ctx)
			}
			if _, err := os.Stat(filepath.Join(ctx, s.Build.Dockerfile)); err != nil || s.Build.Dockerfile != "deploy/docker/Dockerfile" {
				t.Errorf("%s: dockerfile %q: want deploy/docker/Dockerfile (%v)", name, s.Build.Dockerfile, err)
			}
			sub, vals := checkAxArgs(t, name, flags, s.Command)
			if sub == "worker" && vals["api"] != "" {
				remotes = append(remotes, remoteProc{name: name, vals: vals, env: s.Environment, deps: s.dependsOn(t)})
				continue
			}
			cfgPath := s.hostPath(t, name, dir, vals["config"])
			data, err := os.ReadFile(cfgPath)
			if err != nil {
				t.Fatal(err)
			}
			r := loadRegion(t, cfgPath, data, s.Environment)
			p := axProc{service: name, sub: sub, region: r.Name, config: cfgPath}
			regionLists[r.Name+" ("+name+")"] = slices.Sorted(slices.Values(r.Regions))
			pools[r.Name] = nil
			for _, pl := range r.Pools {
				pools[r.Name] = append(pools[r.Name], pl.Name)
			}
			// The region's etcds and Redis are services this one waits for.
			deps := s.dependsOn(t)
			var backends []string
			for _, e := range append(slices.Clone(r.Etcd.Regional.Endpoints), r.Etcd.Global.Endpoints...) {
				u, err := url.Parse(e)
				if err != nil {
					t.Fatalf("%s: etcd endpoint %q: %v", name, e, err)
				}
				backends = append(backends, u.Hostname())
			}
			host, _, _ := net.SplitHostPort(r.Redis.Addr)
			backends = append(backends, host)
			for _, b := range backends {
				if !slices.Contains(deps, b) {
					t.Errorf("%s: its config uses %s, which it does not depend on (depends_on %q)", name, b, deps)
				}
			}
			if r.Etcd.Regional.Endpoints[0] == r.Etcd.Global.Endpoints[0] {
				t.Errorf("%s: regional and global etcd are the same; this file gives each region its own", name)
			}
			switch sub {
			case "server":
				_, port, err := net.SplitHostPort(r.Listen)
				if err != nil || !strings.HasPrefix(r.Listen, "0.0.0.0:") {
					t.Errorf("%s: listen %q: want 0.0.0.0:PORT (reachable from the other containers)", name, r.Listen)
				}
				if want := "http://" + name + ":" + port; r.PublicAddr != want {
					t.Errorf("%s: public_addr %q, want %q (the other region reaches it there)", name, r.PublicAddr, want)
				}
				if !r.Auth.Enabled {
					t.Errorf("%s: auth is off", name)
				}
				p.target = name + ":" + port
				servers[r.Name] = append(servers[r.Name], name)
				for _, pp := range s.Ports {
					if !strings.HasSuffix(pp, ":"+port) {
						t.Errorf("%s: publishes %q, but the API listens on %s", name, pp, port)
					}
				}
			case "worker":
				if !slices.Contains(pools[r.Name], vals["pool"]) {
					t.Errorf("%s: --pool %q is not a pool of %s (%q)", name, vals["pool"], r.Name, pools[r.Name])
				}
				_, port, err := net.SplitHostPort(vals["metrics"])
				if err != nil {
					t.Errorf("%s: --metrics %q: want [host]:port, so Prometheus can scrape it", name, vals["metrics"])
				}
				p.target = name + ":" + port
				workers[r.Name] = append(workers[r.Name], vals["pool"])
			}
			procs = append(procs, p)
		case strings.HasPrefix(s.Image, "redis:"):
			cmd := strings.Join(s.Command, " ")
			if !strings.Contains(cmd, "--appendonly yes") || !strings.Contains(cmd, "--maxmemory-policy noeviction") {
				t.Errorf("%s: %q: want --appendonly yes and --maxmemory-policy noeviction", name, cmd)
			}
		case strings.Contains(s.Image, "/etcd:"):
			cmd := strings.Join(s.Command, " ")
			if !strings.Contains(cmd, "--advertise-client-urls=http://"+name+":2379") {
				t.Errorf("%s: %q does not advertise http://%s:2379", name, cmd, name)
			}
		case strings.HasPrefix(s.Image, "prom/prometheus:"):
			prom = name
		case strings.HasPrefix(s.Image, "grafana/grafana"):
			grafana = name
		default:
			t.Errorf("%s: image %q: this test does not know what it is", name, s.Image)
		}
	}

	// A remote worker: the API URLs of one region's servers (it depends
	// on them), its worker token and nothing else in its environment (no
	// Redis credentials, no cluster token), no region config; it serves a
	// pool of that region.
	for _, rp := range remotes {
		region := ""
		for _, u := range strings.Split(rp.vals["api"], ",") {
			pu, err := url.Parse(u)
			if err != nil {
				t.Errorf("%s: --api %q: %v", rp.name, u, err)
				continue
			}
			for r, ss := range servers {
				if slices.Contains(ss, pu.Hostname()) {
					if region != "" && region != r {
						t.Errorf("%s: --api names servers of %s and %s", rp.name, region, r)
					}
					region = r
				}
			}
			if !slices.Contains(rp.deps, pu.Hostname()) {
				t.Errorf("%s: --api names %s, which it does not depend on (%q)", rp.name, pu.Hostname(), rp.deps)
			}
		}
		if region == "" {
			t.Errorf("%s: --api %q names no ax server of the file", rp.name, rp.vals["api"])
			continue
		}
		if len(rp.env) != 1 || rp.env["AX_WORKER_TOKEN"] == "" {
			t.Errorf("%s: environment %v; want its worker token (AX_WORKER_TOKEN) alone", rp.name, rp.env)
		}
		if rp.vals["config"] != "" {
			t.Errorf("%s: --config %q: a remote worker holds no region config", rp.name, rp.vals["config"])
		}
		if !slices.Contains(pools[region], rp.vals["pool"]) {
			t.Errorf("%s: --pool %q is not a pool of %s (%q)", rp.name, rp.vals["pool"], region, pools[region])
		}
		_, port, err := net.SplitHostPort(rp.vals["metrics"])
		if err != nil {
			t.Errorf("%s: --metrics %q: want [host]:port, so Prometheus can scrape it", rp.name, rp.vals["metrics"])
		}
		procs = append(procs, axProc{service: rp.name, sub: "worker", target: rp.name + ":" + port})
		workers[region] = append(workers[region], rp.vals["pool"])
	}

	// Topology: two regions, each in every region's list, 2+ servers each,
	// a worker for every pool, no pool served twice.
	var regions []string
	for r := range servers {
		regions = append(regions, r)
	}
	sort.Strings(regions)
	if len(regions) != 2 {
		t.Errorf("regions with servers: %q; want two", regions)
	}
	for who, list := range regionLists {
		if !slices.Equal(list, regions) {
			t.Errorf("%s: regions %q; want the compose file's %q", who, list, regions)
		}
	}
	for r := range pools {
		if len(servers[r]) < 2 {
			t.Errorf("%s: servers %q; want at least two (a leader and a standby)", r, servers[r])
		}
		got := slices.Sorted(slices.Values(workers[r]))
		want := slices.Sorted(slices.Values(pools[r]))
		if !slices.Equal(got, want) {
			t.Errorf("%s: workers serve pools %q; want one per pool %q", r, got, want)
		}
	}
	configs := map[string]string{}
	for _, p := range procs {
		if p.config == "" {
			continue // a remote worker
		}
		if c, ok := configs[p.region]; ok && c != p.config {
			t.Errorf("%s: region %s read from %s and %s", p.service, p.region, c, p.config)
		}
		configs[p.region] = p.config
	}

	// Prometheus scrapes exactly the ax processes, and loads deploy's rules.
	if prom == "" || grafana == "" {
		t.Fatalf("want a Prometheus and a Grafana service (have %q, %q)", prom, grafana)
	}
	ps := cf.Services[prom]
	var promConfig string
	for _, c := range ps.Command {
		if v, ok := strings.CutPrefix(c, "--config.file="); ok {
			promConfig = ps.hostPath(t, prom, dir, v)
		}
	}
	if promConfig == "" {
		t.Fatalf("%s: no --config.file", prom)
	}
	var pc struct {
		RuleFiles     []string `yaml:"rule_files"`
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			MetricsPath   string `yaml:"metrics_path"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	readYAML(t, promConfig, &pc)
	var scraped, want []string
	for _, sc := range pc.ScrapeConfigs {
		if sc.MetricsPath != "" && sc.MetricsPath != "/metrics" {
			t.Errorf("job %s: metrics_path %q: ax serves /metrics", sc.JobName, sc.MetricsPath)
		}
		for _, st := range sc.StaticConfigs {
			scraped = append(scraped, st.Targets...)
		}
	}
	for _, p := range procs {
		want = append(want, p.target)
	}
	slices.Sort(scraped)
	slices.Sort(want)
	if !slices.Equal(scraped, want) {
		t.Errorf("Prometheus scrapes %q; want every ax server and worker %q", scraped, want)
	}
	rules := filepath.Join(root, "deploy", "prometheus", "ax-rules.yaml")
	if len(pc.RuleFiles) != 1 || ps.hostPath(t, prom, dir, pc.RuleFiles[0]) != rules {
		t.Errorf("Prometheus rule_files %q: want deploy/prometheus/ax-rules.yaml mounted", pc.RuleFiles)
	}
	var rf struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	readYAML(t, rules, &rf)
	if len(rf.Groups) == 0 || len(rf.Groups[0].Rules) == 0 {
		t.Errorf("%s: no rules", rules)
	}

	// Grafana: the datasource is this Prometheus; the dashboards provider
	// reads the directory deploy/grafana is mounted at.
	gs := cf.Services[grafana]
	prov := gs.hostPath(t, grafana, dir, "/etc/grafana/provisioning")
	var ds struct {
		Datasources []struct {
			Type, URL string
		} `yaml:"datasources"`
	}
	readYAML(t, filepath.Join(prov, "datasources", "prometheus.yaml"), &ds)
	if len(ds.Datasources) != 1 || ds.Datasources[0].Type != "prometheus" || ds.Datasources[0].URL != fmt.Sprintf("http://%s:9090", prom) {
		t.Errorf("Grafana datasources %+v: want one of type prometheus at http://%s:9090", ds.Datasources, prom)
	}
	var dp struct {
		Providers []struct {
			Type    string
			Options struct{ Path string }
		} `yaml:"providers"`
	}
	readYAML(t, filepath.Join(prov, "dashboards", "ax.yaml"), &dp)
	if len(dp.Providers) != 1 || dp.Providers[0].Type != "file" ||
		gs.hostPath(t, grafana, dir, dp.Providers[0].Options.Path) != filepath.Join(root, "deploy", "grafana") {
		t.Errorf("Grafana dashboard providers %+v: want one file provider on deploy/grafana", dp.Providers)
	}
}

// Workers get no cluster token and reach Redis as the ax-worker ACL user,
// which every Redis of the file creates with deploy/redis/ax-worker.acl's
// rules; the servers get the cluster token.
func TestComposeWorkersHoldNoClusterToken(t *testing.T) {
	_, cf := loadCompose(t)
	rules := workerACL(t)
	var workers, redises int
	for name, s := range cf.Services {
		switch {
		case len(s.Command) > 0 && s.Command[0] == "worker" && slices.Contains(s.Command, "--api"):
			if len(s.Environment) != 1 || s.Environment["AX_WORKER_TOKEN"] == "" {
				t.Errorf("%s: a remote worker's environment %v; want its worker token alone", name, s.Environment)
			}
		case len(s.Command) > 0 && s.Command[0] == "worker":
			workers++
			if _, ok := s.Environment["AX_AUTH_CLUSTER_TOKEN"]; ok {
				t.Errorf("%s: a worker is given AX_AUTH_CLUSTER_TOKEN", name)
			}
			if s.Environment["AX_REDIS_USERNAME"] != "ax-worker" || s.Environment["AX_REDIS_PASSWORD"] == "" {
				t.Errorf("%s: want Redis as the ax-worker user with its password, got environment %v", name, s.Environment)
			}
		case len(s.Command) > 0 && s.Command[0] == "server":
			if s.Environment["AX_AUTH_CLUSTER_TOKEN"] == "" {
				t.Errorf("%s: a server lacks the cluster token", name)
			}
		case strings.HasPrefix(s.Image, "redis:"):
			redises++
			cmd := strings.Join(s.Command, " ")
			i := strings.Index(cmd, "--user ax-worker on >")
			if i < 0 || !strings.HasSuffix(cmd, " "+strings.Join(rules, " ")) || !strings.Contains(cmd, "--requirepass ") {
				t.Errorf("%s: want --requirepass and --user ax-worker on >PASSWORD with the rules of deploy/redis/ax-worker.acl last, got %q", name, cmd)
			}
		}
	}
	if workers == 0 || redises == 0 {
		t.Fatalf("%d workers and %d Redis in the compose file", workers, redises)
	}
}
