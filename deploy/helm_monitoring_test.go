package deploy

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestHelmMonitoring: the chart's PrometheusRule holds exactly the alert
// rules of deploy/prometheus/ax-rules.yaml, its Grafana ConfigMap exactly
// deploy/grafana/ax-overview.json (the chart links both files, it keeps no
// copy), and its ServiceMonitor sends the token of the Secret it is given
// with every scrape; all three are off by default.
func TestHelmMonitoring(t *testing.T) {
	root := repoRoot(t)
	m := render(t, "--set", "secret.clusterToken="+testClusterToken, "--set", "monitoring.serviceMonitor.enabled=true",
		"--set", "monitoring.serviceMonitor.tokenSecret.name=prometheus-ax-token", "--set", "monitoring.prometheusRule.enabled=true",
		"--set", "monitoring.grafanaDashboard.enabled=true")

	rule, ok := m["PrometheusRule"]["ax"]
	if !ok || rule.APIVersion != "monitoring.coreos.com/v1" {
		t.Fatalf("PrometheusRule ax: %+v", rule)
	}
	var got, want struct {
		Groups []any `yaml:"groups"`
	}
	if err := rule.Spec.Decode(&got); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "deploy", "prometheus", "ax-rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	if len(want.Groups) == 0 || !reflect.DeepEqual(got.Groups, want.Groups) {
		t.Errorf("the PrometheusRule's groups are not deploy/prometheus/ax-rules.yaml's")
	}

	dash, err := os.ReadFile(filepath.Join(root, "deploy", "grafana", "ax-overview.json"))
	if err != nil {
		t.Fatal(err)
	}
	cm, ok := m["ConfigMap"]["ax-grafana-dashboard"]
	if !ok || cm.Metadata.Labels["grafana_dashboard"] != "1" || cm.Data["ax-overview.json"] != string(dash) {
		t.Errorf("ConfigMap ax-grafana-dashboard: labels %v, the dashboard is the file's: %v", cm.Metadata.Labels, cm.Data["ax-overview.json"] == string(dash))
	}

	var sm struct {
		Endpoints []struct {
			Port          string `yaml:"port"`
			Authorization struct {
				Type        string `yaml:"type"`
				Credentials struct {
					Name string `yaml:"name"`
					Key  string `yaml:"key"`
				} `yaml:"credentials"`
			} `yaml:"authorization"`
		} `yaml:"endpoints"`
	}
	smo := m["ServiceMonitor"]["ax"]
	if err := smo.Spec.Decode(&sm); err != nil {
		t.Fatal(err)
	}
	if len(sm.Endpoints) != 2 {
		t.Fatalf("ServiceMonitor endpoints: %+v", sm.Endpoints)
	}
	for _, e := range sm.Endpoints {
		if a := e.Authorization; a.Type != "Bearer" || a.Credentials.Name != "prometheus-ax-token" || a.Credentials.Key != "token" {
			t.Errorf("ServiceMonitor endpoint %s: authorization %+v; want Bearer from prometheus-ax-token/token", e.Port, a)
		}
	}

	off := render(t, "--set", "secret.clusterToken="+testClusterToken)
	if len(off["PrometheusRule"]) != 0 || len(off["ServiceMonitor"]) != 0 || off["ConfigMap"]["ax-grafana-dashboard"].Kind != "" {
		t.Error("monitoring objects rendered by default")
	}
}
