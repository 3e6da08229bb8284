package deploy

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ax-sched/ax/internal/promcheck"
	"github.com/ax-sched/ax/region"
	"github.com/prometheus/client_golang/prometheus"
)

// descNames is a Registerer that keeps the names of the metrics registered
// with it (from their descriptions: a vector with no series yet is
// gathered as nothing).
type descNames map[string]bool

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

func (d descNames) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc, 64)
	go func() { c.Describe(ch); close(ch) }()
	for desc := range ch {
		if m := fqName.FindStringSubmatch(desc.String()); m != nil {
			d[m[1]] = true
		}
	}
	return nil
}

func (d descNames) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = d.Register(c)
	}
}

func (d descNames) Unregister(prometheus.Collector) bool { return false }

type scaledObjectSpec struct {
	ScaleTargetRef struct {
		Name string `yaml:"name"`
	} `yaml:"scaleTargetRef"`
	Min      int `yaml:"minReplicaCount"`
	Max      int `yaml:"maxReplicaCount"`
	Triggers []struct {
		Type     string            `yaml:"type"`
		Metadata map[string]string `yaml:"metadata"`
	} `yaml:"triggers"`
}

type hpaSpec struct {
	ScaleTargetRef struct {
		Kind string `yaml:"kind"`
		Name string `yaml:"name"`
	} `yaml:"scaleTargetRef"`
	Min     int `yaml:"minReplicas"`
	Max     int `yaml:"maxReplicas"`
	Metrics []struct {
		Type     string `yaml:"type"`
		External struct {
			Metric struct {
				Name     string        `yaml:"name"`
				Selector labelSelector `yaml:"selector"`
			} `yaml:"metric"`
			Target struct {
				Type         string `yaml:"type"`
				AverageValue string `yaml:"averageValue"`
			} `yaml:"target"`
		} `yaml:"external"`
	} `yaml:"metrics"`
}

// TestHelmWorkerAutoscaling: with worker.autoscaling on, every pool's
// worker Deployment leaves its replicas to one autoscaler (a KEDA
// ScaledObject or an HPA) whose query reads the metrics the region leader
// really exports (region.NewMetrics), of that region and pool, and which
// promtool parses; bad settings are refused.
func TestHelmWorkerAutoscaling(t *testing.T) {
	real := descNames{}
	region.NewMetrics(real)
	for _, n := range []string{"ax_pool_ready", "ax_pool_running"} {
		if !real[n] {
			t.Fatalf("region.NewMetrics registers no %s (it has %v)", n, real)
		}
	}
	base := []string{"--set", "secret.clusterToken=" + testClusterToken, "--set", "worker.autoscaling.enabled=true",
		"--set", "worker.autoscaling.minReplicas=2", "--set", "worker.autoscaling.maxReplicas=30", "--set", "worker.autoscaling.tasksPerReplica=8"}
	for _, mode := range []string{"keda", "hpa"} {
		t.Run(mode, func(t *testing.T) {
			m := render(t, append(base, "--set", "worker.autoscaling.mode="+mode,
				"--set", "worker.autoscaling.keda.prometheusAddress=http://prometheus:9090")...)
			kind := map[string]string{"keda": "ScaledObject", "hpa": "HorizontalPodAutoscaler"}[mode]
			var workers []string
			var exprs []promcheck.Expr
			for name, o := range m["Deployment"] {
				if o.Metadata.Labels["app.kubernetes.io/component"] != "worker" {
					continue
				}
				workers = append(workers, name)
				if d := spec[deploymentSpec](t, o); d.Replicas != nil {
					t.Errorf("%s: replicas %d beside an autoscaler", name, *d.Replicas)
				}
				a, ok := m[kind][name]
				if !ok {
					t.Errorf("%s: no %s", name, kind)
					continue
				}
				reg, pool := o.Metadata.Labels["ax-sched.io/region"], o.Metadata.Labels["ax-sched.io/pool"]
				var names []string
				if mode == "keda" {
					s := spec[scaledObjectSpec](t, a)
					if s.ScaleTargetRef.Name != name || s.Min != 2 || s.Max != 30 || len(s.Triggers) != 1 || s.Triggers[0].Type != "prometheus" {
						t.Fatalf("%s: %+v", name, s)
					}
					md := s.Triggers[0].Metadata
					q := md["query"]
					if md["serverAddress"] != "http://prometheus:9090" || md["threshold"] != "8" ||
						strings.Count(q, `region="`+reg+`",pool="`+pool+`"`) != 2 {
						t.Errorf("%s: trigger %v: want the region %s and pool %s, threshold 8", name, md, reg, pool)
					}
					exprs = append(exprs, promcheck.Expr{Where: kind + " " + name, Expr: q})
					names = promcheck.Names(q)
				} else {
					s := spec[hpaSpec](t, a)
					if s.ScaleTargetRef.Kind != "Deployment" || s.ScaleTargetRef.Name != name || s.Min != 2 || s.Max != 30 || len(s.Metrics) != 2 {
						t.Fatalf("%s: %+v", name, s)
					}
					for _, mt := range s.Metrics {
						e := mt.External
						if mt.Type != "External" || e.Target.Type != "AverageValue" || e.Target.AverageValue != "8" ||
							e.Metric.Selector.MatchLabels["region"] != reg || e.Metric.Selector.MatchLabels["pool"] != pool {
							t.Errorf("%s: metric %+v: want region %s, pool %s, 8 per replica", name, mt, reg, pool)
						}
						names = append(names, e.Metric.Name)
					}
				}
				slices.Sort(names)
				if !slices.Equal(names, []string{"ax_pool_ready", "ax_pool_running"}) {
					t.Errorf("%s reads %v, want ax_pool_ready and ax_pool_running", name, names)
				}
				for _, n := range names {
					if !real[n] {
						t.Errorf("%s reads %s, which ax does not export", name, n)
					}
				}
			}
			if len(workers) == 0 || len(m[kind]) != len(workers) {
				t.Errorf("%d %s for worker Deployments %v", len(m[kind]), kind, workers)
			}
			if len(exprs) > 0 {
				if err := promcheck.Check(t.TempDir(), exprs); err != nil {
					t.Error(err)
				}
			}
		})
	}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"an unknown mode", []string{"--set", "worker.autoscaling.mode=vpa"}, `want keda or hpa, got "vpa"`},
		{"keda without Prometheus", nil, "prometheusAddress is required"},
		{"min above max", []string{"--set", "worker.autoscaling.mode=hpa", "--set", "worker.autoscaling.minReplicas=40"}, "minReplicas 40 is above maxReplicas 30"},
	} {
		t.Run("refuses "+c.name, func(t *testing.T) {
			_, err := helm(t, append(append([]string{"template", "ax", chartDir(t)}, base...), c.args...)...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("helm template: %v; want a failure saying %q", err, c.want)
			}
		})
	}
}
