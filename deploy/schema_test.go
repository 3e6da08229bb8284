package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"go.yaml.in/yaml/v3"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	sigsyaml "sigs.k8s.io/yaml"
)

// scaledObject is KEDA's keda.sh/v1alpha1 ScaledObject as far as the chart
// writes it: its fields as KEDA's CRD names them (KEDA publishes no Go
// module small enough to import), decoded as strictly as the others.
type scaledObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		ScaleTargetRef struct {
			APIVersion             string `json:"apiVersion,omitempty"`
			Kind                   string `json:"kind,omitempty"`
			Name                   string `json:"name"`
			EnvSourceContainerName string `json:"envSourceContainerName,omitempty"`
		} `json:"scaleTargetRef"`
		PollingInterval  *int32 `json:"pollingInterval,omitempty"`
		CooldownPeriod   *int32 `json:"cooldownPeriod,omitempty"`
		IdleReplicaCount *int32 `json:"idleReplicaCount,omitempty"`
		MinReplicaCount  *int32 `json:"minReplicaCount,omitempty"`
		MaxReplicaCount  *int32 `json:"maxReplicaCount,omitempty"`
		Triggers         []struct {
			Type              string            `json:"type"`
			Name              string            `json:"name,omitempty"`
			MetricType        string            `json:"metricType,omitempty"`
			UseCachedMetrics  bool              `json:"useCachedMetrics,omitempty"`
			Metadata          map[string]string `json:"metadata"`
			AuthenticationRef *struct {
				Name string `json:"name"`
				Kind string `json:"kind,omitempty"`
			} `json:"authenticationRef,omitempty"`
		} `json:"triggers"`
	} `json:"spec"`
}

// schemaOf is the Go type of each apiVersion/kind the chart may render:
// the Kubernetes API's own types (k8s.io/api), the Prometheus Operator's,
// and KEDA's ScaledObject above. A kind not listed fails the check.
var schemaOf = map[string]func() any{
	"apps/v1/Deployment":                      func() any { return &appsv1.Deployment{} },
	"v1/Service":                              func() any { return &corev1.Service{} },
	"v1/ConfigMap":                            func() any { return &corev1.ConfigMap{} },
	"v1/Secret":                               func() any { return &corev1.Secret{} },
	"policy/v1/PodDisruptionBudget":           func() any { return &policyv1.PodDisruptionBudget{} },
	"networking.k8s.io/v1/NetworkPolicy":      func() any { return &networkingv1.NetworkPolicy{} },
	"autoscaling/v2/HorizontalPodAutoscaler":  func() any { return &autoscalingv2.HorizontalPodAutoscaler{} },
	"monitoring.coreos.com/v1/ServiceMonitor": func() any { return &monitoringv1.ServiceMonitor{} },
	"monitoring.coreos.com/v1/PrometheusRule": func() any { return &monitoringv1.PrometheusRule{} },
	"keda.sh/v1alpha1/ScaledObject":           func() any { return &scaledObject{} },
}

// everyOption is the chart's values with every optional part on.
func everyOption(mode string) []string {
	return []string{"--set", "secret.clusterToken=" + testClusterToken,
		"--set", "networkPolicy.enabled=true",
		"--set-json", `networkPolicy.redis.to=[{"podSelector":{"matchLabels":{"app.kubernetes.io/name":"redis"}}}]`,
		"--set-json", `networkPolicy.metricsFrom=[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"monitoring"}}}]`,
		"--set", "worker.autoscaling.enabled=true", "--set", "worker.autoscaling.mode=" + mode,
		"--set", "worker.autoscaling.keda.prometheusAddress=http://prometheus:9090",
		"--set", "monitoring.serviceMonitor.enabled=true", "--set", "monitoring.serviceMonitor.tokenSecret.name=ax-scrape",
		"--set", "monitoring.prometheusRule.enabled=true", "--set", "monitoring.grafanaDashboard.enabled=true",
		"--set", "remoteWorkers[0].name=acme", "--set", "remoteWorkers[0].region=us-east-1", "--set", "remoteWorkers[0].pool=cpu-spot",
		"--set", "remoteWorkers[0].tokenSecret.name=acme-token",
		"--set-json", `worker.resources={"requests":{"cpu":"500m","memory":"256Mi"}}`}
}

// The schema check of the chart (kubeconform's job, without its network
// fetch of schemas): `helm lint` and `helm template` with every option
// on, then every rendered document decoded strictly into the Go type of
// its apiVersion and kind (an unknown field, a wrong type or an unknown
// kind fails), its names and labels valid as the API server requires, a
// Deployment's selector matching its pods and each container named, with
// an image and valid ports.
func TestHelmManifestsPassTheSchemaCheck(t *testing.T) {
	for _, mode := range []string{"keda", "hpa"} {
		t.Run(mode, func(t *testing.T) {
			if _, err := helm(t, append([]string{"lint", "--strict", chartDir(t)}, everyOption(mode)...)...); err != nil {
				t.Errorf("helm lint --strict: %v", err)
			}
			out, err := helm(t, append([]string{"template", "ax", chartDir(t), "--namespace", "ax"}, everyOption(mode)...)...)
			if err != nil {
				t.Fatalf("helm template: %v", err)
			}
			kinds := map[string]int{}
			for _, doc := range splitDocs(t, out) {
				var head struct {
					APIVersion string `yaml:"apiVersion"`
					Kind       string `yaml:"kind"`
				}
				if err := yaml.Unmarshal(doc, &head); err != nil {
					t.Fatalf("not YAML: %v", err)
				}
				gvk := head.APIVersion + "/" + head.Kind
				mk, ok := schemaOf[gvk]
				if !ok {
					t.Errorf("%s: a kind the schema check does not know", gvk)
					continue
				}
				obj := mk()
				if err := sigsyaml.UnmarshalStrict(doc, obj); err != nil {
					t.Errorf("%s does not pass its schema: %v\n%s", gvk, err, doc)
					continue
				}
				kinds[head.Kind]++
				for _, p := range checkObject(obj) {
					t.Errorf("%s: %s", gvk, p)
				}
			}
			for _, k := range []string{"Deployment", "Service", "ConfigMap", "Secret", "PodDisruptionBudget", "NetworkPolicy",
				"ServiceMonitor", "PrometheusRule", map[string]string{"keda": "ScaledObject", "hpa": "HorizontalPodAutoscaler"}[mode]} {
				if kinds[k] == 0 {
					t.Errorf("no %s rendered with every option on (rendered: %v)", k, kinds)
				}
			}
		})
	}
}

// splitDocs cuts a render into its non-empty YAML documents.
func splitDocs(t *testing.T, out []byte) [][]byte {
	t.Helper()
	var docs [][]byte
	dec := yaml.NewDecoder(bytes.NewReader(out))
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("helm template: a manifest is not YAML: %v", err)
		}
		if len(n.Content) == 0 || n.Content[0].Kind != yaml.MappingNode || len(n.Content[0].Content) == 0 {
			continue
		}
		b, err := yaml.Marshal(&n)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, b)
	}
}

// checkObject is what the API server's validation would refuse in obj
// beyond its schema: its name, its labels, a Deployment's selector and
// containers, a Service's and a NetworkPolicy's ports.
func checkObject(obj any) []string {
	var probs []string
	add := func(where string, errs []string) {
		for _, e := range errs {
			probs = append(probs, where+": "+e)
		}
	}
	var meta metav1.Object
	if o, ok := obj.(metav1.Object); ok {
		meta = o
	} else if o, ok := obj.(*scaledObject); ok {
		meta = &o.ObjectMeta
	}
	if meta == nil {
		return []string{"no metadata"}
	}
	name := meta.GetName()
	add("metadata.name "+name, validation.IsDNS1123Subdomain(name))
	checkLabels := func(where string, ls map[string]string) {
		for k, v := range ls {
			add(where+" key "+k, validation.IsQualifiedName(k))
			add(where+" "+k+"="+v, validation.IsValidLabelValue(v))
		}
	}
	checkLabels(name+" labels", meta.GetLabels())
	switch o := obj.(type) {
	case *appsv1.Deployment:
		sel, err := metav1.LabelSelectorAsSelector(o.Spec.Selector)
		if err != nil || sel.Empty() {
			probs = append(probs, fmt.Sprintf("%s: selector %v: %v", name, o.Spec.Selector, err))
		} else if !sel.Matches(labels.Set(o.Spec.Template.Labels)) {
			probs = append(probs, fmt.Sprintf("%s: selector %v does not match its pods' labels %v", name, o.Spec.Selector, o.Spec.Template.Labels))
		}
		checkLabels(name+" pod labels", o.Spec.Template.Labels)
		for _, c := range o.Spec.Template.Spec.Containers {
			add(name+" container "+c.Name, validation.IsDNS1123Label(c.Name))
			if strings.TrimSpace(c.Image) == "" {
				probs = append(probs, name+": container "+c.Name+" has no image")
			}
			for _, p := range c.Ports {
				add(name+" port", validation.IsValidPortNum(int(p.ContainerPort)))
				if p.Name != "" {
					add(name+" port name", validation.IsValidPortName(p.Name))
				}
			}
		}
	case *corev1.Service:
		for _, p := range o.Spec.Ports {
			add(name+" port", validation.IsValidPortNum(int(p.Port)))
		}
	case *networkingv1.NetworkPolicy:
		if _, err := metav1.LabelSelectorAsSelector(&o.Spec.PodSelector); err != nil {
			probs = append(probs, name+": podSelector: "+err.Error())
		}
		for _, r := range o.Spec.Egress {
			for _, p := range r.Ports {
				if p.Port != nil {
					add(name+" egress port", validation.IsValidPortNum(p.Port.IntValue()))
				}
			}
		}
	}
	return probs
}
