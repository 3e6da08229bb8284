package config

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"

	"github.com/ax-sched/ax/internal/config/keypath"
	"github.com/ax-sched/ax/internal/config/quotas"
)

const configsDir = "../../configs"

// TestDevConfigs loads the regions `ax dev` runs and checks what ax dev and
// the demos rely on.
func TestDevConfigs(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(configsDir, "dev", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	type poolPrice struct {
		name  string
		slots int
		spot  bool
		price float64
		tags  map[string]string
	}
	ondemand := map[string]string{"class": "ondemand", "cpu": "x86"}
	spot := map[string]string{"class": "spot", "cpu": "x86"}
	// Prices from placement/testdata/prices.csv, as the files' comments derive them.
	want := map[string]struct {
		provider, listen, redis string
		pools                   []poolPrice
	}{
		"us-east-1": {"aws", "127.0.0.1:8080", "127.0.0.1:6391", []poolPrice{
			{"cpu-ondemand", 16, false, 0.768 / 16, ondemand},
			{"cpu-spot", 32, true, 0.2721 / 16, spot},
			{"gpu-l4", 4, false, 0.8048, map[string]string{"class": "ondemand", "gpu": "l4", "accelerator": "nvidia-l4"}},
		}},
		"europe-west4": {"gcp", "127.0.0.1:8081", "127.0.0.1:6392", []poolPrice{
			{"cpu-ondemand", 16, false, 0.85533 / 16, ondemand},
			{"cpu-spot", 32, true, 0.28349 / 16, spot},
			{"gpu-a100", 8, false, 0.81406 + 1.61365, map[string]string{"class": "ondemand", "gpu": "a100", "accelerator": "nvidia-tesla-a100"}},
		}},
		"eastus": {"azure", "127.0.0.1:8082", "127.0.0.1:6393", []poolPrice{
			{"cpu-ondemand", 16, false, 0.768 / 16, ondemand},
			{"cpu-spot", 32, true, 0.08448 / 16, spot},
			{"gpu-a100", 2, false, 3.673, map[string]string{"class": "ondemand", "gpu": "a100", "accelerator": "nvidia-a100-80gb"}},
		}},
	}
	if len(files) != len(want) {
		t.Errorf("configs/dev has %d files %q, want %d", len(files), files, len(want))
	}
	schedules := 0
	for _, file := range files {
		r, err := Load(file)
		if err != nil {
			t.Errorf("Load: %v", err)
			continue
		}
		name := filepath.Base(file[:len(file)-len(".yaml")])
		w, ok := want[name]
		if !ok {
			t.Errorf("%s: unexpected dev region", file)
			continue
		}
		if r.Name != name || r.Provider != w.provider || r.Listen != w.listen || r.Redis.Addr != w.redis {
			t.Errorf("%s: region %q provider %q listen %q redis %q, want %q %q %q %q",
				file, r.Name, r.Provider, r.Listen, r.Redis.Addr, name, w.provider, w.listen, w.redis)
		}
		if diff := cmp.Diff([]string{"us-east-1", "europe-west4", "eastus"}, r.Regions); diff != "" {
			t.Errorf("%s: regions (-want +got):\n%s", file, diff)
		}
		if r.Auth.Enabled {
			t.Errorf("%s: auth enabled, want it off in dev", file)
		}
		var got []poolPrice
		for _, p := range r.Pools {
			got = append(got, poolPrice{p.Name, p.Slots, p.Spot, p.PricePerSlotHour, p.Tags})
			if len(p.CapacitySchedule.Windows) > 0 {
				schedules++
				wantWin := []Window{{Start: "20:00", End: "08:00", Slots: 7}}
				if diff := cmp.Diff(wantWin, p.CapacitySchedule.Windows); diff != "" || p.Slots != 8 {
					t.Errorf("%s: %s lends %d of %d slots (-want +got):\n%s", file, p.Name, p.CapacitySchedule.Windows[0].Slots, p.Slots, diff)
				}
			}
		}
		if diff := cmp.Diff(w.pools, got, cmp.AllowUnexported(poolPrice{}), cmp.Comparer(func(a, b float64) bool {
			return a == b || (a-b < 1e-12 && b-a < 1e-12)
		})); diff != "" {
			t.Errorf("%s: pools (-want +got):\n%s", file, diff)
		}
		for _, typ := range []string{"echo", "sleep"} {
			if _, ok := r.Worker.Exec.Allow[typ]; !ok {
				t.Errorf("%s: worker.exec.allow has no %q demo", file, typ)
			}
		}
	}
	if schedules != 1 {
		t.Errorf("%d dev pools have a capacity schedule, want 1", schedules)
	}
}

// TestExampleIsTheDefaults loads configs/example.yaml and checks that every
// value it shows as a default is the default.
func TestExampleIsTheDefaults(t *testing.T) {
	path := filepath.Join(configsDir, "example.yaml")
	got, err := Load(path)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}

	want := Default()
	want.Name = "eu-central"
	want.PublicAddr = "http://127.0.0.1:8080"
	want.Regions = []string{"eu-central"}
	want.Etcd.Global = want.Etcd.Regional
	want.Pools = []Pool{
		{
			Name:             "cpu",
			Tags:             map[string]string{"class": "ondemand", "cpu": "x86"},
			Slots:            16,
			QueueCapacity:    10000,
			PricePerSlotHour: 0.048,
			Thresholds:       &Thresholds{Alert: 0.6, Spill: 0.7, Pause: 0.95, Resume: 0.4},
			CapacitySchedule: CapacitySchedule{Timezone: "UTC"},
			FairShare:        &FairShare{DefaultWeight: 1, Tenants: map[string]TenantShare{"team-a": {Weight: 3, Floor: 4, Max: 12}}},
			SlowLane:         &SlowLane{Threshold: 5 * time.Minute, MaxShare: 0.25},
		},
		{
			Name:             "gpu",
			Tags:             map[string]string{"gpu": "a100"},
			Slots:            8,
			QueueCapacity:    10000,
			PricePerSlotHour: 2.42771,
			CapacitySchedule: CapacitySchedule{
				Timezone: "Europe/Berlin",
				Windows:  []Window{{Start: "20:00", End: "08:00", Slots: 7}},
			},
		},
		{
			Name:             "team-a-gpu",
			Tags:             map[string]string{"gpu": "l4"},
			Slots:            4,
			QueueCapacity:    10000,
			PricePerSlotHour: 0.8,
			ScaleFromZero:    true,
			CapacitySchedule: CapacitySchedule{Timezone: "UTC"},
			Tenants:          []string{"team-a"},
		},
	}
	want.Auth.Tokens = []Token{
		{Name: "ci", TokenSHA256: sha256Hex("example-ci-token-change-me"), Role: "submitter", Tenant: "team-a"},
		{Name: "oncall", TokenSHA256: sha256Hex("example-operator-token"), Role: "operator", ExpiresAt: "2099-01-01T00:00:00Z"},
		{Name: "team-a-gpu-workers", TokenSHA256: sha256Hex("example-worker-token"), Role: "worker",
			Tenants: []string{"team-a"}, Pools: []string{"team-a-gpu"}, Types: []string{"resize", "embed"}},
	}
	want.Quotas.Tenants = map[string]quotas.TenantQuota{"team-a": {SubmitsPerSecond: 100, Burst: 200, MaxBacklog: 100000, MaxBacklogBytes: 1 << 30,
		MaxSchedules: 200, ScheduleFiresPerSecond: 20, MaxBackfillPeriods: 500}}
	want.Tenants = map[string]TenantBudget{"team-a": {MonthlyBudgetUSD: 500, OverBudget: "cap", PriceCap: 0.40}}
	want.Worker.Exec.Allow = map[string]ExecRule{"report.generate": {
		Argv:    []string{"/usr/local/bin/report", "--id", "{{.id}}"},
		Env:     []string{"REPORT_FORMAT=pdf", "LANG=C.UTF-8", "PATH"},
		Args:    map[string]ExecArg{"id": {Pattern: "[a-z0-9-]{1,64}"}},
		Timeout: 10 * time.Minute,
	}}
	want.Worker.HTTP.AllowPrefixes = []string{"https://hooks.example.com/"}
	want.Worker.Types = map[string]WorkerType{"report.generate": {Concurrency: 4}}
	rate, burst, conc := 50.0, 5, 5
	want.Limits = []Limit{{Key: "stripe-api", Rate: &rate, Burst: &burst, Concurrency: &conc,
		Scope: "federation", Weights: map[string]float64{"eu-central": 2}}}
	tconc, trate := 20, 0.5
	want.Limits = append(want.Limits, Limit{Tenant: "default", Concurrency: &tconc}, Limit{Type: "report.build", Rate: &trate})
	if diff := cmp.Diff(want, got, cmpRegion); diff != "" {
		t.Errorf("%s (-want +got):\n%s", path, diff)
	}
}

// TestExampleHasEveryKey keeps configs/example.yaml complete: every key of
// Region appears in it (in at least one entry of each list).
func TestExampleHasEveryKey(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(configsDir, "example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := yaml.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	missing := missingKeys(reflect.TypeFor[Region](), "", []any{raw})
	if len(missing) > 0 {
		t.Errorf("configs/example.yaml lacks keys %q", missing)
	}
}

// missingKeys lists the keys of t found in none of vals.
func missingKeys(t reflect.Type, path string, vals []any) []string {
	var missing []string
	switch {
	case t.Kind() == reflect.Struct:
		fields := keypath.Fields(t)
		for _, name := range keypath.Sorted(fields) {
			var sub []any
			for _, v := range vals {
				if m, ok := v.(map[string]any); ok {
					if x, ok := m[name]; ok {
						sub = append(sub, x)
					}
				}
			}
			if len(sub) == 0 {
				missing = append(missing, keypath.Join(path, name))
				continue
			}
			missing = append(missing, missingKeys(fields[name].Type, keypath.Join(path, name), sub)...)
		}
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct:
		var elems []any
		for _, v := range vals {
			if l, ok := v.([]any); ok {
				elems = append(elems, l...)
			}
		}
		missing = missingKeys(t.Elem(), path+"[]", elems)
	case t.Kind() == reflect.Map && t.Elem().Kind() == reflect.Struct:
		var elems []any
		for _, v := range vals {
			if m, ok := v.(map[string]any); ok {
				for _, k := range keypath.Sorted(m) {
					elems = append(elems, m[k])
				}
			}
		}
		missing = missingKeys(t.Elem(), path+"[*]", elems)
	}
	return slices.Compact(missing)
}
