package config

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// minimal is the smallest valid file.
const minimal = `
region: r1
auth: {enabled: false}
pools:
  - {name: a, slots: 1}
`

func mustParse(t *testing.T, yaml string) *Region {
	t.Helper()
	r, err := Parse("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return r
}

// problemLines returns each line of an Errors, failing on any other error.
func problemLines(t *testing.T, err error) []string {
	t.Helper()
	if err == nil {
		return nil
	}
	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("error %v (%T) is not an Errors", err, err)
	}
	return strings.Split(err.Error(), "\n")
}

var cmpRegion = cmp.Options{cmpopts.IgnoreUnexported(Region{}), cmpopts.EquateEmpty()}

func TestDefaultsApplied(t *testing.T) {
	got := mustParse(t, minimal)

	want := Default()
	want.Name = "r1"
	want.PublicAddr = "http://127.0.0.1:8080"
	want.Regions = []string{"r1"}
	want.Etcd.Global = want.Etcd.Regional
	want.Auth.Enabled = false
	want.Pools = []Pool{{
		Name:             "a",
		Slots:            1,
		QueueCapacity:    10000,
		CapacitySchedule: CapacitySchedule{Timezone: "UTC"},
	}}
	if diff := cmp.Diff(want, got, cmpRegion); diff != "" {
		t.Errorf("Parse(minimal) (-want +got):\n%s", diff)
	}
	if got.Source() != "test.yaml" {
		t.Errorf("Source() = %q, want test.yaml", got.Source())
	}

	// The documented figures, spelled out once more against typos in Default.
	d := Default()
	checks := map[string][2]any{
		"listen":                    {d.Listen, "127.0.0.1:8080"},
		"etcd.prefix":               {d.Etcd.Prefix, "/ax/"},
		"etcd.session_ttl":          {d.Etcd.SessionTTL, 5 * time.Second},
		"redis.addr":                {d.Redis.Addr, "127.0.0.1:6379"},
		"redis.wait_timeout":        {d.Redis.WaitTimeout, 100 * time.Millisecond},
		"thresholds":                {d.Thresholds, Thresholds{Alert: 0.6, Spill: 0.8, Pause: 0.95, Resume: 0.4}},
		"retry":                     {d.Retry, Retry{MaxRetries: 4, Base: 300 * time.Millisecond, Cap: 30 * time.Second, MaxPause: time.Hour}},
		"lease":                     {d.Lease, Lease{Duration: 10 * time.Second, Heartbeat: 3 * time.Second}},
		"task":                      {d.Task, Task{DefaultTimeout: 30 * time.Minute, MaxPayload: 65536, ColdHorizon: 5 * time.Minute}},
		"aging_step":                {d.AgingStep, time.Minute},
		"retention.dead":            {d.Retention.Dead, 168 * time.Hour},
		"starvation_threshold":      {d.StarvationThreshold, 10 * time.Minute},
		"placement.stale_after":     {d.Placement.StaleAfter, 15 * time.Second},
		"preemption.readmit_rate":   {d.Preemption.ReadmitRate, 10.0},
		"preemption.max_per_task":   {d.Preemption.MaxPerTask, 2},
		"worker.claim_batch":        {d.Worker.ClaimBatch, 32},
		"worker.shutdown_grace":     {d.Worker.ShutdownGrace, 30 * time.Second},
		"auth.enabled":              {d.Auth.Enabled, true},
		"pool queue_capacity":       {defaultPool().QueueCapacity, 10000},
		"preemption.readmit_delays": {[2]time.Duration{d.Preemption.ReadmitDelayMin, d.Preemption.ReadmitDelayMax}, [2]time.Duration{time.Minute, 2 * time.Minute}},
	}
	for key, c := range checks {
		if diff := cmp.Diff(c[1], c[0]); diff != "" {
			t.Errorf("Default() %s (-want +got):\n%s", key, diff)
		}
	}
}

func TestDerivedDefaults(t *testing.T) {
	r := mustParse(t, `
region: r1
listen: 10.0.0.5:9000
regions: [r0, r1]
etcd:
  regional: {endpoints: ["https://e1:2379"], username: ax, password: pw, tls: {ca: ca.pem}}
redis:
  sentinel: {master_name: m, addrs: ["s1:26379"]}
auth: {enabled: false}
pools: [{name: a, slots: 1}]
`)
	if r.PublicAddr != "http://10.0.0.5:9000" {
		t.Errorf("public_addr = %q, want http://<listen>", r.PublicAddr)
	}
	if diff := cmp.Diff(r.Etcd.Regional, r.Etcd.Global); diff != "" {
		t.Errorf("etcd.global is not a copy of etcd.regional:\n%s", diff)
	}
	if r.Redis.Addr != "" || r.Redis.Mode() != "sentinel" {
		t.Errorf("redis addr %q mode %q: the default addr must give way to sentinel", r.Redis.Addr, r.Redis.Mode())
	}

	// A global etcd of its own keeps its own settings.
	r = mustParse(t, minimal+`
etcd:
  global: {endpoints: ["g:2379"]}
`)
	if got := r.Etcd.Global; got.Endpoints[0] != "g:2379" || got.DialTimeout != 5*time.Second {
		t.Errorf("etcd.global = %+v, want its endpoint and the default dial timeout", got)
	}
}

func TestEnvOverride(t *testing.T) {
	t.Setenv("AX_REDIS_ADDR", "10.1.2.3:7000")
	t.Setenv("AX_REDIS_SHARDS", "4")
	t.Setenv("AX_LEASE_DURATION", "20s")
	t.Setenv("AX_ETCD_REGIONAL_ENDPOINTS", "http://a:2379, http://b:2379")
	t.Setenv("AX_AUTH_CLUSTER_TOKEN", "0123456789abcdef-cluster")
	t.Setenv("AX_PREEMPTION_ENABLED", "false")
	t.Setenv("AX_THRESHOLDS_ALERT", "0.5")

	r := mustParse(t, minimal+`
redis: {addr: "127.0.0.1:6391"}
`)
	if r.Redis.Addr != "10.1.2.3:7000" {
		t.Errorf("redis.addr = %q, want the environment's", r.Redis.Addr)
	}
	if r.Redis.Shards != 4 || r.Lease.Duration != 20*time.Second || r.Preemption.Enabled || r.Thresholds.Alert != 0.5 {
		t.Errorf("shards %d, lease %s, preemption %v, alert %v: environment not applied",
			r.Redis.Shards, r.Lease.Duration, r.Preemption.Enabled, r.Thresholds.Alert)
	}
	if diff := cmp.Diff([]string{"http://a:2379", "http://b:2379"}, r.Etcd.Regional.Endpoints); diff != "" {
		t.Errorf("etcd.regional.endpoints (-want +got):\n%s", diff)
	}
	if r.Auth.ClusterToken != "0123456789abcdef-cluster" {
		t.Errorf("auth.cluster_token = %q", r.Auth.ClusterToken)
	}

	// A bad value from the environment names the key it was meant for and
	// the variable it came from (the file does not hold it).
	t.Setenv("AX_REDIS_SHARDS", "many")
	t.Setenv("AX_LEASE_DURATION", "banana")
	_, err := Parse("test.yaml", []byte(minimal))
	want := []string{
		`test.yaml: lease.duration: invalid duration "banana" (use Go syntax: "300ms", "10s", "1h30m") (from AX_LEASE_DURATION)`,
		`test.yaml: redis.shards: must be a whole number, got "many" (from AX_REDIS_SHARDS)`,
	}
	if diff := cmp.Diff(want, problemLines(t, err)); diff != "" {
		t.Errorf("bad env value (-want +got):\n%s", diff)
	}
}

func TestDataKeysKeepCaseAndDots(t *testing.T) {
	r := mustParse(t, `
region: r1
auth: {enabled: false}
pools:
  - name: a
    slots: 1
    tags: {topology.kubernetes.io/zone: eu-1a, gpu: A100}
worker:
  exec:
    allow:
      report.generate:
        argv: [/bin/report, "{{.id}}"]
        env: [PATH=/usr/bin, "Report_Mode={{.mode}}", HOME]
`)
	wantTags := map[string]string{"topology.kubernetes.io/zone": "eu-1a", "gpu": "A100"}
	if diff := cmp.Diff(wantTags, r.Pools[0].Tags); diff != "" {
		t.Errorf("tags (-want +got):\n%s", diff)
	}
	want := map[string]ExecRule{"report.generate": {
		Argv: []string{"/bin/report", "{{.id}}"},
		Env:  []string{"PATH=/usr/bin", "Report_Mode={{.mode}}", "HOME"},
	}}
	if diff := cmp.Diff(want, r.Worker.Exec.Allow); diff != "" {
		t.Errorf("worker.exec.allow (-want +got):\n%s", diff)
	}
}

func TestPlainTokenHashedAndDropped(t *testing.T) {
	const plain = "a-long-enough-plain-token"
	r := mustParse(t, `
region: r1
auth:
  tokens:
    - {name: ci, token: `+plain+`, role: submitter, tenant: t1}
    - {name: ops, token_sha256: `+strings.ToUpper(sha256Hex("another-long-token-x"))+`, role: admin}
pools: [{name: a, slots: 1}]
`)
	got := r.Auth.Tokens
	if got[0].Token != "" {
		t.Errorf("plain token kept: %q", got[0].Token)
	}
	if got[0].TokenSHA256 != sha256Hex(plain) {
		t.Errorf("token_sha256 = %q, want sha256 of the plain token", got[0].TokenSHA256)
	}
	if got[1].TokenSHA256 != sha256Hex("another-long-token-x") {
		t.Errorf("given hash not kept in lower case: %q", got[1].TokenSHA256)
	}
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func TestPoolThresholdsInheritRegion(t *testing.T) {
	r := mustParse(t, minimal+`
thresholds: {alert: 0.5}
`)
	if r.Pools[0].Thresholds != nil {
		t.Errorf("pool without thresholds got %+v, want nil (the region's)", r.Pools[0].Thresholds)
	}
	r = mustParse(t, `
region: r1
auth: {enabled: false}
thresholds: {alert: 0.5}
pools:
  - {name: a, slots: 1, thresholds: {spill: 0.7}}
`)
	want := &Thresholds{Alert: 0.5, Spill: 0.7, Pause: 0.95, Resume: 0.4}
	if diff := cmp.Diff(want, r.Pools[0].Thresholds); diff != "" {
		t.Errorf("pool thresholds (-want +got):\n%s", diff)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load("testdata/nope.yaml")
	lines := problemLines(t, err)
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "testdata/nope.yaml: open testdata/nope.yaml: ") {
		t.Errorf("Load(missing) = %q", lines)
	}
}

// TestParseErrors checks the exact text of each kind of problem a file can
// have: "file: key: message".
func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{
			name: "slots of the third pool",
			yaml: `
region: r1
auth: {enabled: false}
pools:
  - {name: a, slots: 1}
  - {name: b, slots: 2}
  - {name: c, slots: 0}
`,
			want: []string{"x.yaml: pools[2].slots: must be > 0"},
		},
		{
			name: "unknown top-level key",
			yaml: minimal + "colour: blue\n",
			want: []string{"x.yaml: colour: unknown key"},
		},
		{
			name: "misspelt key in a pool",
			yaml: `
region: r1
auth: {enabled: false}
pools:
  - {name: a, slot: 1}
`,
			want: []string{
				`x.yaml: pools[0].slot: unknown key (did you mean "slots"?)`,
				"x.yaml: pools[0].slots: must be > 0",
			},
		},
		{
			name: "unknown nested key, even without a value",
			yaml: minimal + "redis:\n  sentinel:\n    master:\n",
			want: []string{`x.yaml: redis.sentinel.master: unknown key (did you mean "master_name"?)`},
		},
		{
			name: "upper-case key",
			yaml: minimal + "Listen: 127.0.0.1:9000\n",
			want: []string{`x.yaml: Listen: unknown key (did you mean "listen"?)`},
		},
		{
			name: "bad duration",
			yaml: minimal + "lease: {duration: 10 seconds}\n",
			want: []string{`x.yaml: lease.duration: invalid duration "10 seconds" (use Go syntax: "300ms", "10s", "1h30m")`},
		},
		{
			name: "duration as a bare number",
			yaml: minimal + "retry: {base: 300}\n",
			want: []string{`x.yaml: retry.base: must be a duration string such as "10s", got number 300`},
		},
		{
			name: "number where a string list is needed",
			yaml: minimal + "etcd: {regional: {endpoints: {a: 1}}}\n",
			want: []string{`x.yaml: etcd.regional.endpoints: must be a list, got a mapping`},
		},
		{
			name: "fraction of a slot",
			yaml: `
region: r1
auth: {enabled: false}
pools: [{name: a, slots: 1.5}]
`,
			want: []string{"x.yaml: pools[0].slots: must be a whole number, got 1.5"},
		},
		{
			name: "bad timezone",
			yaml: `
region: r1
auth: {enabled: false}
pools:
  - name: a
    slots: 8
    capacity_schedule: {timezone: Mars/Olympus, windows: [{start: "20:00", end: "08:00", slots: 7}]}
`,
			want: []string{`x.yaml: pools[0].capacity_schedule.timezone: unknown IANA time zone "Mars/Olympus" (e.g. "UTC", "Europe/Amsterdam")`},
		},
		{
			name: "thresholds out of order",
			yaml: minimal + "thresholds: {alert: 0.9, spill: 0.8}\n",
			want: []string{"x.yaml: thresholds: must satisfy 0 < resume < alert < spill < pause ≤ 1, got resume 0.4, alert 0.9, spill 0.8, pause 0.95"},
		},
		{
			name: "pool thresholds out of order after inheriting",
			yaml: `
region: r1
auth: {enabled: false}
pools: [{name: a, slots: 1, thresholds: {resume: 0.7}}]
`,
			want: []string{"x.yaml: pools[0].thresholds: must satisfy 0 < resume < alert < spill < pause ≤ 1, got resume 0.7, alert 0.6, spill 0.8, pause 0.95"},
		},
		{
			name: "duplicate pool names",
			yaml: `
region: r1
auth: {enabled: false}
pools:
  - {name: a, slots: 1}
  - {name: b, slots: 1}
  - {name: a, slots: 2}
`,
			want: []string{`x.yaml: pools[2].name: duplicate of pools[0] "a"`},
		},
		{
			name: "plain token too short, and both forms",
			yaml: `
region: r1
auth:
  tokens:
    - {name: a, token: short, role: admin}
    - {name: b, token: long-enough-token-1, token_sha256: ` + sha256Hex("x") + `, role: admin}
pools: [{name: a, slots: 1}]
`,
			want: []string{
				"x.yaml: auth.tokens[0].token: too short: use at least 16 characters",
				"x.yaml: auth.tokens[1]: set token_sha256 or token, not both",
			},
		},
		{
			name: "not YAML",
			yaml: "region: [r1\n",
			want: []string{"x.yaml: yaml: line 1: did not find expected ',' or ']'"},
		},
		{
			name: "wrong shapes, all listed",
			yaml: minimal + "etcd: x\nredis: [1]\nworker: {exec: {allow: {e: [1]}}}\n",
			want: []string{
				`x.yaml: etcd: must be a mapping, got string "x"`,
				"x.yaml: redis: must be a mapping, got a list",
				"x.yaml: worker.exec.allow[e]: must be a mapping, got a list",
			},
		},
		{
			name: "key given twice",
			yaml: minimal + "region: r2\n",
			want: []string{`x.yaml: line 6: mapping key "region" already defined at line 2`},
		},
		{
			name: "not a mapping",
			yaml: "- region: r1\n",
			want: []string{"x.yaml: line 1: the file must be a mapping of keys to values"},
		},
		{
			name: "window times unquoted are fine, bad ones are named",
			yaml: `
region: r1
auth: {enabled: false}
pools:
  - name: a
    slots: 8
    capacity_schedule: {windows: [{start: 20:00, end: 8am, slots: 7}]}
`,
			want: []string{`x.yaml: pools[0].capacity_schedule.windows[0].end: must be a time of day "HH:MM" (00:00 to 23:59), got "8am"`},
		},
		{
			name: "redis modes",
			yaml: minimal + "redis: {addr: 'r:6379', cluster: {addrs: ['c1:7000']}}\n",
			want: []string{"x.yaml: redis: set exactly one of addr, sentinel or cluster, found addr and cluster"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Parse("x.yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatalf("Parse = %+v, want errors %q", r, tt.want)
			}
			if r != nil {
				t.Errorf("Parse returned a Region with an error")
			}
			if diff := cmp.Diff(tt.want, problemLines(t, err)); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.File != "x.yaml" {
				t.Errorf("errors.As(*FieldError) = %v", fe)
			}
		})
	}
}
